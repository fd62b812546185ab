"""Model locations in S3: each bucket exists (or the stack creates it) in the cluster's Region, and each
endpoint's model prefix holds objects. Weights loaded from another Region are slow and cost transfer fees."""

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
    """The bucket's Region, or None when it does not exist (``HeadBucket``)."""
    try:
        response = s3.head_bucket(Bucket=bucket)
    except Exception as exc:
        if is_not_found(exc) or http_status(exc) == 404:
            return None
        raise
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return response.get("BucketRegion") or headers.get("x-amz-bucket-region") or "us-east-1"


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
    if region != env.region:
        yield failed(name, f"{uri} is in {region}, the cluster in {env.region}", fix=_relocate_fix(location.bucket, env.region))
        return
    if location.region and location.region != region:
        yield failed(name, f"{uri} is in {region}, but the endpoint declares {location.region}",
                     fix=f"set the endpoint's model.s3.region to {region}")
        return
    listing = s3.list_objects_v2(Bucket=location.bucket, Prefix=prefix, MaxKeys=1)
    if not listing.get("KeyCount"):
        yield failed(name, f"{uri} holds no objects", fix=f"upload the model weights to {uri}")
    else:
        yield passed(name, f"{uri} holds objects, in {region}")
