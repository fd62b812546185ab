"""HyperPodDpdPlatform: one environment in one construct, in an app that is not the project's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails, availability_zone_context, availability_zones
from hyperpod_dpd.infra.feature_flags import FEATURE_FLAGS
from tests.paths import FIXTURE_CONFIG_DIR, ROOT


@pytest.fixture(scope="module")
def dev_config() -> Any:
    return load_environment("dev", FIXTURE_CONFIG_DIR)


@pytest.fixture(scope="module")
def consumer(dev_config: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, HyperPodDpdPlatform, Template]:
    # GIVEN an app with no feature flags of its own, one stack of the consumer's, and the guardrails applied
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("consumer")), context=availability_zone_context(dev_config))
    stack = cdk.Stack(app, "Serving", env=cdk.Environment(account=dev_config.account, region=dev_config.region))
    platform = HyperPodDpdPlatform(stack, "Dpd", config=dev_config)
    apply_guardrails(app)
    # WHEN it synthesizes (raises on any unacknowledged guardrail finding)
    app.synth()
    return stack, platform, Template.from_stack(stack)


def test_one_construct_builds_the_whole_environment(consumer: Any, dev_config: Any) -> None:
    _, platform, template = consumer
    # THEN network, EKS, HyperPod, operator and the endpoint share the consumer's stack
    template.resource_count_is("AWS::SageMaker::Cluster", 1)
    template.resource_count_is("AWS::EKS::Cluster", 1)
    template.has_resource_properties("AWS::SageMaker::Cluster", {"ClusterName": dev_config.hyperpod.cluster_name})
    template.has_resource_properties("AWS::EKS::Addon", {"AddonName": "amazon-sagemaker-hyperpod-inference"})
    assert set(platform.endpoint_manifests) == {e.name for e in dev_config.endpoints}
    assert platform.eks.cluster_name and platform.inference_operator.execution_role


def test_the_endpoint_is_applied_after_the_inference_addon(consumer: Any) -> None:
    stack, platform, template = consumer
    manifest_id = stack.get_logical_id(next(iter(platform.endpoint_manifests.values())).node.default_child)
    addon_id = stack.get_logical_id(platform.inference_operator.resource)
    depends = template.to_json()["Resources"][manifest_id].get("DependsOn", [])
    assert addon_id in depends


def test_the_platform_subtree_uses_the_projects_feature_flags(consumer: Any) -> None:
    _, platform, template = consumer
    # THEN the flags hold inside the platform (a native OIDC provider, access logs by bucket policy) ...
    assert platform.node.try_get_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy") is True
    template.resource_count_is("AWS::IAM::OIDCProvider", 1)
    assert not template.find_resources("Custom::AWSCDKOpenIdConnectProvider")
    # ... and not outside it
    assert cdk.Stack.of(platform).node.try_get_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy") is None


def test_feature_flags_are_the_service_flags_of_cdk_json() -> None:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    service = {k: v for k, v in context.items() if k.startswith(("@aws-cdk/aws-", "@aws-cdk/custom"))}
    assert dict(FEATURE_FLAGS) == service


def test_endpoints_can_be_left_out(dev_config: Any, tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context=availability_zone_context(dev_config))
    stack = cdk.Stack(app, "Serving", env=cdk.Environment(account=dev_config.account, region=dev_config.region))
    platform = HyperPodDpdPlatform(stack, "Dpd", config=dev_config, endpoints=False)
    assert platform.endpoint_manifests == {} and platform.charts == []


def test_a_stack_in_another_account_is_refused_before_anything_is_built(dev_config: Any) -> None:
    # GIVEN a stack whose account is not the configuration's
    app = cdk.App()
    stack = cdk.Stack(app, "Elsewhere", env=cdk.Environment(account="999999999999", region=dev_config.region))
    # WHEN the platform is added THEN one line names the file, the field, the value and the stack, and nothing joined
    # the tree
    assert dev_config.source.endswith("dev.yaml")
    with pytest.raises(ConfigError, match=rf"^{re.escape(dev_config.source)}: account: '111111111111': does not match "
                                          "the account of stack Elsewhere"):
        HyperPodDpdPlatform(stack, "Dpd", config=dev_config)
    assert stack.node.try_find_child("Dpd") is None


def test_availability_zone_context_unions_environments_of_one_account(dev_config: Any) -> None:
    other = dev_config.model_copy(update={"network": dev_config.network.model_copy(update={"gpu_availability_zone": "us-west-2c"})})
    other._name = "other"
    context = availability_zone_context(dev_config, other)
    assert context == {"availability-zones:account=111111111111:region=us-west-2": ["us-west-2a", "us-west-2b",
                                                                                    "us-west-2c"]}
    assert availability_zones(dev_config) == ["us-west-2a", "us-west-2b"]
