"""``TieredStorageConfig`` of ``AWS::SageMaker::Cluster`` from ``hyperpod.tiered_storage`` (the memory of the managed
``tieredstorage`` L2 KV cache, docs/kv-cache.md), on a per-construct stack, checked with Template assertions, cfn-lint
and the CloudFormation registry schema's create-only properties."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from hyperpod_dpd.catalogue.kv_tiers import CLUSTER_CREATE_ONLY
from hyperpod_dpd.config.hyperpod import InstanceGroup, TieredStorage
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from tests.validators import cfn_lint_findings

REGION = "us-west-2"


def _stack(tiered_storage: TieredStorage | None) -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(), "Tiered", env=cdk.Environment(account="111111111111", region=REGION))
    HyperPodCluster(
        stack, "HyperPod", cluster_name="c", region=REGION,
        eks_cluster_arn=f"arn:{cdk.Aws.PARTITION}:eks:{REGION}:111111111111:cluster/c",
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"],
        instance_groups=[InstanceGroup(name="prefill", role="prefill", instance_type="ml.p5.48xlarge", count=1),
                         InstanceGroup(name="decode", role="decode", instance_type="ml.p5.48xlarge", count=1)],
        lifecycle_bucket_name=f"sagemaker-c-111111111111-{REGION}", tiered_storage=tiered_storage)
    return dict(Template.from_stack(stack).to_json())


@pytest.fixture(scope="module")
def enabled() -> dict[str, Any]:
    return _stack(TieredStorage(memory_percent=20))


def _cluster(template: dict[str, Any]) -> dict[str, Any]:
    (props,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    return props


def test_the_cluster_renders_tiered_storage_enabled_at_the_configured_share(enabled: dict[str, Any]) -> None:
    Template.from_json(enabled).has_resource_properties("AWS::SageMaker::Cluster", {
        "TieredStorageConfig": {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 20},
        "ClusterName": "c"})


def test_disabled_renders_mode_disable_and_absent_renders_nothing() -> None:
    assert _cluster(_stack(TieredStorage(enabled=False)))["TieredStorageConfig"] == {"Mode": "Disable"}
    Template.from_json(_stack(None)).has_resource_properties("AWS::SageMaker::Cluster", {
        "TieredStorageConfig": Match.absent()})


def test_the_template_passes_cfn_lint(enabled: dict[str, Any]) -> None:
    assert cfn_lint_findings({("tiered", "cluster"): enabled}, {"tiered": REGION}) == []


def test_changing_the_memory_share_does_not_replace_the_cluster(enabled: dict[str, Any]) -> None:
    # GIVEN the registry schema of AWS::SageMaker::Cluster as the pinned cfn-lint ships it for the Region (its
    # createOnlyProperties replace the resource on change)
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(REGION, "AWS::SageMaker::Cluster").schema
    create_only = schema["createOnlyProperties"]
    assert tuple(create_only) == CLUSTER_CREATE_ONLY
    # WHEN only the share changes THEN the properties that differ are none of the create-only ones
    other = _cluster(_stack(TieredStorage(memory_percent=40)))
    changed = {key for key in {*other, *_cluster(enabled)} if other.get(key) != _cluster(enabled).get(key)}
    assert changed == {"TieredStorageConfig"}
    assert not [p for p in create_only if p.split("/")[2] in changed]
    # AND the schema bounds the share as the config does (0-100, integer), with Mode Enable | Disable
    definition = schema["definitions"]["TieredStorageConfig"]
    percent = definition["properties"]["InstanceMemoryAllocationPercentage"]
    assert (percent["type"], percent["minimum"], percent["maximum"]) == ("integer", 0, 100)
    assert definition["properties"]["Mode"]["enum"] == ["Enable", "Disable"]
    assert TieredStorage.model_fields["memory_percent"].metadata[0].ge == percent["minimum"]
