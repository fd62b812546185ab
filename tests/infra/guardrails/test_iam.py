"""IAM rules: a hard-coded partition and an all-actions-on-all-resources grant both fire."""

from __future__ import annotations

import pytest

from tests.infra.guardrails.conftest import run


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_no_full_wildcard_in_any_environment(view, env: str) -> None:
    assert run("HPDPD-IAM2", view(env)) == []


def test_only_acknowledged_aws_cdk_internals_hard_code_the_partition(view) -> None:
    # GIVEN the raw templates (acknowledgments are applied by the validation framework, not by the rule)
    findings = run("HPDPD-IAM1", view("dev"))
    # THEN the only hits are the two aws-cdk-lib handlers that the constructs acknowledge with a reason
    assert sorted(f.resource.logical_id.split("CustomResourceProvider")[0][:30] for f in findings) == [
        "CustomCDKBucketDeployment8693B", "CustomVpcRestrictDefaultSG"]


def test_literal_partition_in_our_policy_fires_iam1(view) -> None:
    stage = view("dev")
    platform = stage.templates["dev/platform"]["Resources"]
    policy = next(v for k, v in platform.items() if k.startswith("HyperPodNodePolicy"))
    policy["Properties"]["PolicyDocument"]["Statement"][0]["Resource"] = "arn:aws:ec2:us-west-2:111111111111:instance/*"
    assert any(f.resource.logical_id.startswith("HyperPodNodePolicy") for f in run("HPDPD-IAM1", stage))


def test_star_on_star_fires_iam2(view) -> None:
    stage = view("dev")
    platform = stage.templates["dev/platform"]["Resources"]
    policy = next(v for k, v in platform.items() if k.startswith("InferenceOperatorKedaRolePolicy"))
    policy["Properties"]["PolicyDocument"]["Statement"].append({"Effect": "Allow", "Action": "*", "Resource": "*"})
    (finding,) = run("HPDPD-IAM2", stage)
    assert finding.detail == "allows every action on every resource"
