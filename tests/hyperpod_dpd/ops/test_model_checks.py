"""Model locations: buckets exist (or will be created) in the cluster's Region; endpoint prefixes hold objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.ops.model_checks import bucket_checks, endpoint_model_checks

REGION = "us-west-2"


def _bucket(name: str, region: str = REGION) -> None:
    boto3.client("s3", region_name=region).create_bucket(Bucket=name,
                                                         CreateBucketConfiguration={"LocationConstraint": region})


def test_model_buckets_exist_in_the_cluster_region_or_are_created(make_env: Callable[..., EnvironmentConfig],
                                                                 clients: ClientFactory) -> None:
    # GIVEN one bucket in the Region, one in Ireland, one the stack creates and one that is missing
    _bucket("models-here")
    _bucket("models-ireland", "eu-west-1")
    env = make_env(lambda d: d.setdefault("operator", {}).__setitem__("model_buckets", [
        {"name": "models-here"}, {"name": "models-ireland"}, {"name": "models-new", "create": True},
        {"name": "models-missing"}]))
    # WHEN the bucket checks run
    rows = {r.name: r for r in bucket_checks(env, clients.client("s3"))}
    # THEN only the local and the to-be-created bucket pass
    assert rows["model-bucket:models-here"].status == "pass"
    assert rows["model-bucket:models-new"].status == "pass" and "the stack creates it" in rows["model-bucket:models-new"].detail
    ireland = rows["model-bucket:models-ireland"]
    assert ireland.status == "fail" and ireland.detail == "s3://models-ireland is in eu-west-1, the cluster in us-west-2"
    assert rows["model-bucket:models-missing"].status == "fail"


def test_an_endpoint_model_prefix_must_hold_objects(env: EnvironmentConfig, clients: ClientFactory,
                                                    make_endpoint: Callable[..., Any]) -> None:
    # GIVEN weights under one prefix and nothing under another
    _bucket("models-here")
    clients.client("s3").put_object(Bucket="models-here", Key="llama/config.json", Body=b"{}")
    endpoints = (make_endpoint(name="ready", bucket="models-here", prefix="llama", model_region=REGION),
                 make_endpoint(name="empty", bucket="models-here", prefix="mistral/"),
                 make_endpoint(name="nobucket", bucket="models-gone", prefix="x"),
                 make_endpoint(name="wrongregion", bucket="models-here", prefix="llama", model_region="us-east-1"),
                 make_endpoint(name="fsx"))
    # WHEN the model checks run
    rows = {r.name: r for r in endpoint_model_checks(env, clients.client("s3"), endpoints)}
    # THEN each endpoint with an S3 model gets one row; only the one with weights passes
    assert set(rows) == {"model:ready", "model:empty", "model:nobucket", "model:wrongregion"}
    assert rows["model:ready"].status == "pass"
    assert rows["model:empty"].status == "fail" and rows["model:empty"].detail == "s3://models-here/mistral/ holds no objects"
    assert rows["model:nobucket"].status == "fail" and "the bucket does not exist" in rows["model:nobucket"].detail
    assert rows["model:wrongregion"].status == "fail" and "declares us-east-1" in rows["model:wrongregion"].detail


def test_access_denied_on_a_bucket_warns_with_the_permission(make_env: Callable[..., EnvironmentConfig],
                                                             aws_credentials: None) -> None:
    env = make_env(lambda d: d.setdefault("operator", {}).__setitem__("model_buckets", [{"name": "models-locked"}]))
    s3 = boto3.client("s3", region_name=REGION)
    with Stubber(s3) as stub:
        stub.add_client_error("head_bucket", "403", "Forbidden", http_status_code=403)
        rows = list(bucket_checks(env, s3))
    assert rows[0].status == "warn" and "access denied" in rows[0].detail
    assert rows[0].fix is not None and "s3:ListBucket" in rows[0].fix


def test_a_model_in_a_bucket_the_stack_creates_only_warns_before_the_first_deploy(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory, make_endpoint: Callable[..., Any]) -> None:
    # GIVEN a model bucket the platform stack creates, which does not exist yet (a first deploy)
    env = make_env(lambda d: d.setdefault("operator", {}).__setitem__(
        "model_buckets", [{"name": "models-created-by-stack", "create": True}]))
    endpoint = make_endpoint(name="first", bucket="models-created-by-stack", prefix="llama")
    # WHEN preflight checks the endpoint's model
    rows = list(endpoint_model_checks(env, clients.client("s3"), (endpoint,)))
    # THEN it warns (the pipeline's preflight must not stop a first promotion) and says what to do after the deploy
    assert [(r.status, r.detail) for r in rows] == [
        ("warn", "s3://models-created-by-stack/llama: the bucket does not exist yet; the platform stack creates it")]
    assert rows[0].fix is not None and "upload the model" in rows[0].fix


def test_a_sibling_folder_or_an_empty_folder_marker_is_not_the_model(env: EnvironmentConfig, clients: ClientFactory,
                                                                     make_endpoint: Callable[..., Any]) -> None:
    # GIVEN weights only beside the configured folder ("llama-guard/" next to "llama"), and a folder holding nothing
    # but the empty marker the S3 console creates
    _bucket("models-here")
    s3 = clients.client("s3")
    s3.put_object(Bucket="models-here", Key="llama-guard/config.json", Body=b"{}")
    s3.put_object(Bucket="models-here", Key="mistral/", Body=b"")
    endpoints = (make_endpoint(name="sibling", bucket="models-here", prefix="llama"),
                 make_endpoint(name="marker", bucket="models-here", prefix="mistral"))
    # WHEN the model checks run
    rows = {r.name: r for r in endpoint_model_checks(env, s3, endpoints)}
    # THEN neither passes: the model folder is the prefix with a slash, and a marker is not weights
    assert rows["model:sibling"].status == "fail" and rows["model:sibling"].detail == (
        "s3://models-here/llama/ holds no objects")
    assert rows["model:marker"].status == "fail" and rows["model:marker"].detail == (
        "s3://models-here/mistral/ holds no objects")


def test_a_bucket_whose_answer_names_no_region_warns_instead_of_assuming_one(
        make_env: Callable[..., EnvironmentConfig], aws_credentials: None, make_endpoint: Callable[..., Any]) -> None:
    # GIVEN an S3 endpoint whose HeadBucket answer carries neither BucketRegion nor x-amz-bucket-region, for an
    # environment in us-east-1 (the Region an absent header used to be read as)
    def in_virginia(data: dict[str, Any]) -> None:
        data["region"] = "us-east-1"
        data["network"]["gpu_availability_zone"] = "us-east-1a"
        data["network"]["create"]["availability_zones"] = ["us-east-1a", "us-east-1b"]
        data.setdefault("operator", {})["model_buckets"] = [{"name": "models-somewhere"}]

    env = make_env(in_virginia)
    s3 = boto3.client("s3", region_name="us-east-1")
    with Stubber(s3) as stub:
        stub.add_response("head_bucket", {}, {"Bucket": "models-somewhere"})
        stub.add_response("head_bucket", {}, {"Bucket": "models-somewhere"})
        # WHEN the bucket and model checks run
        rows = [*bucket_checks(env, s3), *endpoint_model_checks(
            env, s3, (make_endpoint(name="llama", bucket="models-somewhere", prefix="llama"),))]
    # THEN both warn that the Region could not be checked; neither passes
    assert [(r.name, r.status) for r in rows] == [("model-bucket:models-somewhere", "warn"), ("model:llama", "warn")]
    assert all("S3 named no Region for the bucket" in r.detail for r in rows)
