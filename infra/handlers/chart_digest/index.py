"""Custom::HyperPodChartDigest: before Helm installs the HyperPod dependencies chart, check that the tag it will pull
is the chart whose digest the configuration recorded, in a repository where that tag cannot be moved.

aws-cdk-lib's Helm handler pulls an OCI chart by tag only (``helm pull <repository> --version <tag>``; a digest in
the reference leaves it returning an empty directory, infra/chart_digest.py), so this check runs first, as a
resource the Helm chart depends on. It asks ECR (botocore 1.44.8 ``ecr`` model, 2015-09-21):

* ``DescribeRepositories`` -> ``repositories[0].imageTagMutability``: only ``IMMUTABLE`` passes. The enum also holds
  ``MUTABLE``, ``MUTABLE_WITH_EXCLUSION`` and ``IMMUTABLE_WITH_EXCLUSION``; whether exclusion filters cover a tag is
  not something this check can confirm, so those fail too (a movable tag would make the check race the pull);
* ``DescribeImages`` (``imageIds: [{imageTag}]``) -> ``imageDetails[0].imageDigest``, "the sha256 digest of the image
  manifest", the ``Digest:`` ``helm push`` prints. It must equal the recorded digest.

CloudFormation invokes the function directly (no Provider framework), so the function answers the request itself:
a ``PUT`` of the response object to the pre-signed ``ResponseURL`` (AWS CloudFormation User Guide, "Custom resource
request objects" / "response objects": Status SUCCESS | FAILED, Reason, PhysicalResourceId, StackId, RequestId,
LogicalResourceId, Data; at most 4096 bytes). Every path answers, a failure with its reason; a Delete succeeds
without a call. Runs on AWS Lambda with the runtime's boto3; nothing printed, the failure reason is the log.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

IMMUTABLE = "IMMUTABLE"
# The properties the construct passes (infra/chart_digest.py, PROPERTIES) and the handler reads.
PROPERTIES = ("RegistryId", "Region", "RepositoryName", "Tag", "Digest")
MAX_REASON = 1500  # the whole response object must stay under CloudFormation's 4096 bytes
RESPONSE_TIMEOUT_SECONDS = 30
# ECR calls within the function's 60 s: 3 attempts of at most 5 s to connect and 15 s to read.
CLIENT_CONFIG = {"connect_timeout": 5, "read_timeout": 15, "retries": {"mode": "standard", "total_max_attempts": 3}}


class DigestMismatch(Exception):
    """The chart ECR would serve is not the recorded one, or its tag could be moved: fail the request."""


def check(properties: Mapping[str, Any], ecr: Any) -> str:
    """The recorded digest when ECR holds it under the tag of an immutable repository; raises DigestMismatch else."""
    missing = [name for name in PROPERTIES if not properties.get(name)]
    if missing:
        raise DigestMismatch(f"the resource lacks {', '.join(missing)}")
    registry, name, tag, digest = (str(properties[k]) for k in ("RegistryId", "RepositoryName", "Tag", "Digest"))
    where = f"{registry}.dkr.ecr.{properties['Region']}/{name}"
    try:
        (repository,) = ecr.describe_repositories(registryId=registry, repositoryNames=[name])["repositories"]
        described = ecr.describe_images(registryId=registry, repositoryName=name,
                                        imageIds=[{"imageTag": tag}])["imageDetails"]
    except ValueError as error:
        raise DigestMismatch(f"ECR answered more or fewer than one repository {where}") from error
    except ecr.exceptions.RepositoryNotFoundException as error:
        raise DigestMismatch(f"no ECR repository {where}: mirror the chart there first (README, \"The HyperPod "
                             "dependencies chart\")") from error
    except ecr.exceptions.ImageNotFoundException as error:
        raise DigestMismatch(f"{where} has no tag {tag}: push the chart packaged at the pinned commit") from error
    mutability = repository.get("imageTagMutability")
    if mutability != IMMUTABLE:
        raise DigestMismatch(f"tags of {where} are {mutability or 'of unknown mutability'}, so {tag} could point to "
                             f"another chart by the time Helm pulls it: run 'aws ecr put-image-tag-mutability "
                             f"--registry-id {registry} --repository-name {name} --image-tag-mutability IMMUTABLE'")
    found = {str(image.get("imageDigest")) for image in described}
    if found != {digest}:
        raise DigestMismatch(f"{where}:{tag} is {', '.join(sorted(found)) or 'no image'}, not the recorded {digest} "
                             "(hyperpod.dependencies_chart.digest): the mirror holds another chart than the one "
                             "reviewed; push the reviewed one under a new version, or review this one and record it")
    return digest


def handler(event: Mapping[str, Any], context: Any, *, ecr: Any = None,
            respond: Callable[[str, bytes], None] | None = None) -> None:
    """CloudFormation's entry point: check on Create and Update, succeed on Delete, answer every time."""
    properties = event.get("ResourceProperties") or {}
    physical = event.get("PhysicalResourceId") or (
        f"{properties.get('RegistryId')}/{properties.get('RepositoryName')}:{properties.get('Tag')}")
    status, reason, data = "SUCCESS", "", {}
    try:
        if event.get("RequestType") != "Delete":
            data = {"Digest": check(properties, ecr if ecr is not None else _ecr(str(properties.get("Region"))))}
    except DigestMismatch as error:
        status, reason = "FAILED", str(error)
    except Exception as error:  # noqa: BLE001 - any failure must still answer CloudFormation, with what it was
        status, reason = "FAILED", f"the chart digest could not be checked: {type(error).__name__}: {error}"
    body = json.dumps({
        "Status": status, "Reason": reason[:MAX_REASON] or f"{status} (see the function's log group)",
        "PhysicalResourceId": physical, "StackId": event.get("StackId"), "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"), "Data": data,
    }).encode()
    (respond or _put)(str(event.get("ResponseURL")), body)


def _ecr(region: str) -> Any:
    import boto3  # the Lambda runtime's copy
    from botocore.config import Config

    return boto3.client("ecr", region_name=region, config=Config(**CLIENT_CONFIG))


def _put(url: str, body: bytes) -> None:
    """The answer, as the pre-signed S3 URL expects it: a PUT with no content type (the signature covers none)."""
    if not url.startswith("https://"):
        raise ValueError("ResponseURL is not an https URL")
    request = urllib.request.Request(url, data=body, method="PUT",  # noqa: S310 - https only, checked above
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as answer:  # noqa: S310 - https only
        answer.read()
