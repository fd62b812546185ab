"""S3 rules fire on a bucket without encryption, without a TLS-only policy, or not fully private."""

from __future__ import annotations

import pytest

from tests.infra.guardrails.conftest import first, run


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_bucket_of_every_environment_is_compliant(view, env: str) -> None:
    stage = view(env)
    assert [f for rule in ("HPDPD-S3-1", "HPDPD-S3-2", "HPDPD-S3-3") for f in run(rule, stage)] == []


def test_bucket_without_encryption_fires_s3_1(view) -> None:
    stage = view("dev")
    del first(stage, "AWS::S3::Bucket", "InferenceOperatorTlsBucket")["Properties"]["BucketEncryption"]
    assert [f.resource.logical_id[:26] for f in run("HPDPD-S3-1", stage)] == ["InferenceOperatorTlsBucket"]


def test_bucket_policy_without_tls_deny_fires_s3_2(view) -> None:
    stage = view("dev")
    platform = stage.templates["dev/platform"]["Resources"]
    bucket_id = next(k for k in platform if k.startswith("InferenceOperatorTlsBucket") and platform[k]["Type"] == "AWS::S3::Bucket")
    policy = next(v for v in platform.values() if v["Type"] == "AWS::S3::BucketPolicy" and v["Properties"]["Bucket"] == {"Ref": bucket_id})
    policy["Properties"]["PolicyDocument"]["Statement"] = [s for s in policy["Properties"]["PolicyDocument"]["Statement"]
                                                           if s["Effect"] != "Deny"]
    assert [f.resource.logical_id for f in run("HPDPD-S3-2", stage)] == [bucket_id]


def test_partially_public_bucket_fires_s3_3(view) -> None:
    stage = view("dev")
    first(stage, "AWS::S3::Bucket", "HyperPodLifecycleBucket")["Properties"]["PublicAccessBlockConfiguration"]["BlockPublicPolicy"] = False
    (finding,) = run("HPDPD-S3-3", stage)
    assert "BlockPublicPolicy" in finding.detail
