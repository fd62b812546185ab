"""S3 buckets with the toolkit's defaults: encrypted, TLS-only, private, owner-enforced, access-logged."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_dpd.infra import checkov, nag

ACCESS_LOG_PREFIX = "s3-access-logs/"


def secure_bucket(
    scope: Construct,
    id: str,
    *,
    bucket_name: str | None,
    removal_policy: cdk.RemovalPolicy,
    access_logs: s3.IBucket | None = None,
    versioned: bool = True,
) -> s3.Bucket:
    """A bucket that passes the toolkit's S3 rules. Destroyable buckets empty themselves on delete; retained
    buckets keep their data."""
    return s3.Bucket(
        scope, id, bucket_name=bucket_name, encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
        versioned=versioned, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED, removal_policy=removal_policy,
        auto_delete_objects=removal_policy == cdk.RemovalPolicy.DESTROY,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=f"{ACCESS_LOG_PREFIX}{id}/" if access_logs is not None else None)


def access_logs_bucket(scope: Construct, id: str, *, removal_policy: cdk.RemovalPolicy,
                       expiration: cdk.Duration = cdk.Duration.days(365)) -> s3.Bucket:
    """The target of S3 server access logs (SSE-S3, as the log delivery service requires)."""
    bucket = s3.Bucket(
        scope, id, encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL, object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        removal_policy=removal_policy, auto_delete_objects=removal_policy == cdk.RemovalPolicy.DESTROY,
        lifecycle_rules=[s3.LifecycleRule(expiration=expiration)])
    reason = "This is the server access log bucket itself; logging its own access would loop"
    resource = bucket.node.default_child
    nag.acknowledge(resource, "AwsSolutions-S1", reason)  # type: ignore[arg-type]
    checkov.skip_all(resource, {  # type: ignore[arg-type]
        "CKV_AWS_18": reason,
        "CKV_AWS_21": "Access logs are append-only and expire by lifecycle rule; versions would only keep deleted logs "
                      "longer"})
    return bucket
