"""Model locations in S3: each bucket exists (or the stack creates it) in the cluster's Region, and each
endpoint's model folder holds objects. Weights loaded from another Region are slow and cost transfer fees.

The folder of ``prefix`` is ``prefix/`` (ListObjectsV2 through botocore's paginator, stopping at the first object
that is not an empty ``.../`` folder marker). A bucket whose ``HeadBucket`` answer names no Region is a WARN."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import http_status, is_not_found
from hyperpod_dpd.ops.checks import Check, failed, guarded, passed, warned
from hyperpod_dpd.ops.endpoints import EndpointLike

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

BUCKET_PERMISSION = "s3:ListBucket"


def bucket_region(s3: Any, bucket: str) -> str | None:
    """The bucket's Region, None when it does not exist, or ``""`` when the answer names none (``HeadBucket``: its
    ``BucketRegion``, the ``x-amz-bucket-region`` header). A Region is never assumed: the rows WARN on ``""``."""
    try:
        response = s3.head_bucket(Bucket=bucket)
    except Exception as exc:
        if is_not_found(exc) or http_status(exc) == 404:
            return None
        raise
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return str(response.get("BucketRegion") or headers.get("x-amz-bucket-region") or "")


def _unknown_region(name: str, uri: str, region: str) -> Check:
    return warned(name, f"{uri}: S3 named no Region for the bucket (HeadBucket: no BucketRegion, no "
                        "x-amz-bucket-region), so whether it is in " + region + " could not be checked",
                  fix="check the endpoint (AWS_ENDPOINT_URL_S3) and the bucket's Region "
                      "(aws s3api get-bucket-location)")


def _relocate_fix(bucket: str, region: str) -> str:
    return f"copy the model into a bucket in {region} (aws s3 sync s3://{bucket}/... s3://<bucket-in-{region}>/...)"


def bucket_checks(env: EnvironmentConfig, s3: Any) -> Iterator[Check]:
    for bucket in env.operator.model_buckets:
        name = f"model-bucket:{bucket.name}"
        yield from guarded(functools.partial(_bucket_check, env, s3, bucket, name), names=[name],
                           permission=BUCKET_PERMISSION)


def _bucket_check(env: EnvironmentConfig, s3: Any, bucket: Any, name: str) -> Iterator[Check]:
    region = bucket_region(s3, bucket.name)
    if region is None:
        if bucket.create:
            yield passed(name, f"s3://{bucket.name} does not exist yet; the stack creates it in {env.region}")
        else:
            yield failed(name, f"s3://{bucket.name} does not exist (or belongs to another account)",
                         fix=f"create it in {env.region}, fix operator.model_buckets, or set create: true")
    elif not region:
        yield _unknown_region(name, f"s3://{bucket.name}", env.region)
    elif region != env.region:
        yield failed(name, f"s3://{bucket.name} is in {region}, the cluster in {env.region}",
                     fix=_relocate_fix(bucket.name, env.region))
    else:
        yield passed(name, f"s3://{bucket.name} exists in {region}")


def endpoint_model_checks(env: EnvironmentConfig, s3: Any, endpoints: tuple[EndpointLike, ...]) -> Iterator[Check]:
    for endpoint in endpoints:
        location = getattr(endpoint.model, "s3", None)
        if location is None:
            continue
        name = f"model:{endpoint.name}"
        yield from guarded(functools.partial(_model_check, env, s3, location, name), names=[name],
                           permission=f"{BUCKET_PERMISSION} on the model bucket")


def _model_check(env: EnvironmentConfig, s3: Any, location: Any, name: str) -> Iterator[Check]:
    prefix = (location.prefix or "").lstrip("/")
    uri = f"s3://{location.bucket}/{prefix}"
    region = bucket_region(s3, location.bucket)
    if region is None:
        if any(b.create and b.name == location.bucket for b in env.operator.model_buckets):
            # A first deploy: the platform stack creates the bucket, so the weights cannot be there yet.
            yield warned(name, f"{uri}: the bucket does not exist yet; the platform stack creates it",
                         fix=f"after the platform stack deploys, upload the model to {uri} before the endpoint starts")
        else:
            yield failed(name, f"{uri}: the bucket does not exist", fix="upload the model or fix the endpoint's model.s3")
        return
    if not region:
        yield _unknown_region(name, uri, env.region)
        return
    if region != env.region:
        yield failed(name, f"{uri} is in {region}, the cluster in {env.region}", fix=_relocate_fix(location.bucket, env.region))
        return
    if location.region and location.region != region:
        yield failed(name, f"{uri} is in {region}, but the endpoint declares {location.region}",
                     fix=f"set the endpoint's model.s3.region to {region}")
        return
    # The weights are a folder (the operator mounts modelLocation as the model directory): "llama" is "llama/", so
    # "llama-guard/..." beside it is not them; folder markers (empty "x/" keys the console creates) are not weights.
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    where = f"s3://{location.bucket}/{folder}"
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=folder)
    weights = next((o for page in pages for o in page.get("Contents", []) if not _folder_marker(o)), None)
    if weights is None:
        yield failed(name, f"{where} holds no objects", fix=f"upload the model weights to {where} (an empty folder "
                                                            "marker is not weights)")
    else:
        yield passed(name, f"{where} holds objects ({weights.get('Key')}, ...), in {region}")


def _folder_marker(entry: dict[str, Any]) -> bool:
    return str(entry.get("Key", "")).endswith("/") and not entry.get("Size")
