"""``hpdpd preflight``'s ownership checks: does a physical name the environment's stacks will create (its EKS
cluster, HyperPod cluster, buckets, roles: :func:`hyperpod_dpd.config.identity.physical_names`) already belong to
another stack, or to none?

Who created a resource is read from its tags. "CloudFormation automatically creates the following stack-level tags
with the aws: prefix: aws:cloudformation:logical-id, aws:cloudformation:stack-id, aws:cloudformation:stack-name", but
"The propagation of stack-level tags to resources ... varies by resource type" (CloudFormation Template Reference,
"CloudFormation resource tagging"), and IAM roles never get them (aws-cloudformation/cloudformation-coverage-roadmap
issues 277, 1159, 1966), so the toolkit tags its roles with their stack's name itself
(:data:`~hyperpod_dpd.config.identity.OWNER_TAG`, stacks/naming.py). The tags are read with EKS ``DescribeCluster``
(``cluster.tags``), SageMaker ``ListTags`` (on the cluster ARN ``DescribeCluster`` returns), S3 ``GetBucketTagging``
and IAM ``ListRoleTags``.

A name no resource holds passes (the stack creates it); one held by this environment's stack passes; one held by
another stack FAILs with the fix (``stack_name_prefix`` when that stack is this environment under an earlier name, or
another name); one with neither tag WARNs: created by hand or adopted, or a resource type that does not carry the tag,
which the sources cannot rule out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import ClientSource, MalformedAnswer, error_code, is_not_found
from hyperpod_dpd.config.identity import OWNED_KINDS, OWNER_TAG, STACK_PARTS, PhysicalName, owned_names, stack_name
from hyperpod_dpd.ops.answers import member
from hyperpod_dpd.ops.checks import Check, Report, failed, guarded, passed, warned

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

STACK_TAG = "aws:cloudformation:stack-name"
OWNER_TAGS = (STACK_TAG, OWNER_TAG)
# The kinds whose owner is read here, with the check's name prefix and the IAM actions the reads need.
KINDS = {
    "EKS cluster": ("owner:eks", "eks:DescribeCluster"),
    "HyperPod cluster": ("owner:hyperpod", "sagemaker:DescribeCluster, sagemaker:ListTags"),
    "S3 bucket": ("owner:s3", "s3:GetBucketTagging"),
    "IAM role": ("owner:iam-role", "iam:ListRoleTags"),
}
# One list of kinds (config.identity.OWNED_KINDS, which the checks role grants on): a kind without its read here would
# be a KeyError in the middle of preflight, so refuse at import.
if set(KINDS) != set(OWNED_KINDS):
    raise ImportError(f"ownership reads {sorted(KINDS)}, identity owns {sorted(OWNED_KINDS)}")
# GetBucketTagging on a bucket without tags: "NoSuchTagSet - There is no tag set associated with the bucket"
# (Amazon S3 API Reference, GetBucketTagging, Errors).
NO_TAG_SET = "NoSuchTagSet"


def check_name(name: PhysicalName) -> str:
    return f"{KINDS[name.kind][0]}:{name.name}"


def ownership_checks(env: EnvironmentConfig, clients: ClientSource) -> list[Check]:
    """One row per owned name; a read that AWS refuses is that row's WARN (:func:`~hyperpod_dpd.ops.checks.guarded`)."""
    rows: list[Check] = []
    for name in owned_names(env):
        rows += guarded(functools.partial(_check, env, clients, name), names=[check_name(name)],
                        permission=KINDS[name.kind][1])
    return rows


def with_ownership(report: Report, env: EnvironmentConfig, clients: ClientSource) -> Report:
    """``report`` with the ownership rows after its own; unchanged when the credentials check failed (every other
    check is skipped then)."""
    if any(c.name == "credentials" and c.status == "fail" for c in report.checks):
        return report
    return Report(checks=(*report.checks, *ownership_checks(env, clients)), strict=report.strict)


def _check(env: EnvironmentConfig, clients: ClientSource, name: PhysicalName) -> Iterator[Check]:
    row, expected = check_name(name), stack_name(env, name.part or "")
    tags = _tags(env, clients, name)
    what = f"{name.kind} {name.name}"
    if tags is None:
        yield passed(row, f"{what} does not exist yet; {expected} creates it")
        return
    owner = next((tags[key] for key in OWNER_TAGS if tags.get(key)), None)
    if owner == expected:
        yield passed(row, f"{what} belongs to {expected}")
    elif owner is not None:
        yield failed(row, f"{what} already belongs to stack {owner}, not to {expected} ({name.path})",
                     fix=_fix(env, name, owner))
    else:
        yield warned(row, f"{what} exists but carries no stack tag ({' or '.join(OWNER_TAGS)}): created by hand, "
                          f"adopted, or by a stack that does not tag it; {expected} cannot create it while it exists",
                     fix=f"delete it if it is unused, import it into {expected} (CloudFormation resource import), or "
                         f"give this environment another {name.path}")


def _fix(env: EnvironmentConfig, name: PhysicalName, owner: str) -> str:
    """Another environment's stack holds the name: either it is this environment under an earlier name (its stacks
    are ``<prefix>-<part>``), or the names collide."""
    prefix = next((owner[:-len(f"-{p}")] for p in STACK_PARTS if owner.endswith(f"-{p}")), None)
    if prefix and prefix != env.stack_prefix:
        return (f"if {owner} is this environment deployed under an earlier name, set stack_name_prefix: {prefix} "
                f"(docs/configuration.md, \"Renaming an environment\"); otherwise give this environment another "
                f"{name.path}")
    return f"give this environment another {name.path}, or delete {owner}"


def _tags(env: EnvironmentConfig, clients: ClientSource, name: PhysicalName) -> dict[str, str] | None:
    """The resource's tags, or None when there is no such resource (any other error propagates to ``guarded``)."""
    try:
        if name.kind == "EKS cluster":
            eks = clients.client("eks")
            cluster = member(eks.describe_cluster(name=name.name), "cluster", client=eks, operation="DescribeCluster")
            return {str(k): str(v) for k, v in (cluster.get("tags") or {}).items()}
        if name.kind == "HyperPod cluster":
            sagemaker = clients.client("sagemaker")
            cluster_arn = sagemaker.describe_cluster(ClusterName=name.name).get("ClusterArn")
            if not isinstance(cluster_arn, str) or not cluster_arn:
                raise MalformedAnswer(operation="DescribeCluster", endpoint=str(sagemaker.meta.endpoint_url),
                                      detail="it carries no ClusterArn")
            return _tag_pages(sagemaker.get_paginator("list_tags").paginate(ResourceArn=cluster_arn))
        if name.kind == "S3 bucket":
            return _bucket_tags(clients.client("s3"), name.name)
        iam = clients.client("iam")
        return _tag_pages(iam.get_paginator("list_role_tags").paginate(RoleName=name.name))
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise


def _bucket_tags(s3: Any, bucket: str) -> dict[str, str] | None:
    try:
        answer = s3.get_bucket_tagging(Bucket=bucket)
    except Exception as exc:
        if error_code(exc) == NO_TAG_SET:
            return {}
        if is_not_found(exc):  # NoSuchBucket
            return None
        raise
    return {str(t["Key"]): str(t["Value"]) for t in answer.get("TagSet", [])}


def _tag_pages(pages: Any) -> dict[str, str]:
    """Every ``{Key, Value}`` of a tag listing, through botocore's paginator (``NextToken`` for SageMaker ListTags,
    ``Marker``/``IsTruncated`` for IAM ListRoleTags; a token repeated by a broken answer raises PaginationError)."""
    return {str(t["Key"]): str(t["Value"]) for page in pages for t in page.get("Tags", [])}
