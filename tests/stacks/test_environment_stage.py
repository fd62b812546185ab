"""EnvironmentStage: one stage per environment, stable stack names, protection and tags from the config."""

from __future__ import annotations

import json

import pytest

from hyperpod_dpd.infra.guardrails.stateful import STATEFUL_TYPES, stateful_resources

ENVS = ("dev", "staging", "prod")


@pytest.mark.parametrize("env", ENVS)
def test_stage_has_network_and_platform_stacks_with_explicit_names(synthesized, env: str) -> None:
    assert synthesized.stack_names[(env, "network")] == f"hpdpd-{env}-network"
    assert synthesized.stack_names[(env, "platform")] == f"hpdpd-{env}-platform"


def _manifest_stack(synthesized, env: str, part: str) -> dict:
    manifest = json.loads((synthesized.outdir / f"assembly-{env}" / "manifest.json").read_text())
    return next(a for a in manifest["artifacts"].values() if a.get("displayName") == f"{env}/{part}")


def test_stacks_deploy_to_the_configured_account_and_region(synthesized) -> None:
    assert _manifest_stack(synthesized, "prod", "Platform")["environment"] == "aws://333333333333/us-east-1"
    assert _manifest_stack(synthesized, "dev", "Network")["environment"] == "aws://111111111111/us-west-2"


def test_platform_deploys_after_network(synthesized) -> None:
    platform = _manifest_stack(synthesized, "staging", "Platform")
    assert any("Network" in d for d in platform["dependencies"])


def test_prod_has_termination_protection_and_dev_does_not(synthesized) -> None:
    for part in ("Network", "Platform"):
        assert _manifest_stack(synthesized, "prod", part)["properties"]["terminationProtection"] is True
        assert not _manifest_stack(synthesized, "dev", part)["properties"].get("terminationProtection", False)


def test_prod_retains_every_stateful_resource_and_dev_destroys_its_own(synthesized) -> None:
    # GIVEN every stateful resource of prod's and dev's stacks (network, platform, endpoints)
    def policies(env: str) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        return {(part, logical_id): (t["Resources"][logical_id].get("DeletionPolicy"),
                                     t["Resources"][logical_id].get("UpdateReplacePolicy"))
                for (e, part), t in synthesized.templates.items() if e == env for logical_id in stateful_resources(t)}

    prod, dev = policies("prod"), policies("dev")
    # THEN prod (removal_policy: retain) retains every one of them, of every stateful type, on deletion and replacement
    assert set(prod.values()) == {("Retain", "Retain")}
    types = {synthesized.templates[("prod", part)]["Resources"][logical_id]["Type"] for part, logical_id in prod}
    assert types == set(STATEFUL_TYPES)
    # AND dev (destroy) retains none of its own: its VPC, EKS and HyperPod clusters and buckets are deleted with it
    (hyperpod,) = synthesized.resources("dev", "platform", "AWS::SageMaker::Cluster")
    (vpc,) = synthesized.resources("dev", "network", "AWS::EC2::VPC")
    assert dev[("platform", hyperpod)] == dev[("network", vpc)] == (None, None)
    assert {dev[("platform", b)] for b in synthesized.resources("dev", "platform", "AWS::S3::Bucket")} == {("Delete", "Delete")}


def test_environment_tags_reach_the_resources(synthesized) -> None:
    (vpc,) = synthesized.resources("staging", "network", "AWS::EC2::VPC").values()
    tags = {t["Key"]: t["Value"] for t in vpc["Properties"]["Tags"]}
    assert tags["environment"] == "staging" and tags["project"] == "hyperpod-dpd"
