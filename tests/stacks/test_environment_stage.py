"""EnvironmentStage: one stage per environment, stable stack names, protection and tags from the config."""

from __future__ import annotations

import json

import pytest

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


def test_environment_tags_reach_the_resources(synthesized) -> None:
    (vpc,) = synthesized.resources("staging", "network", "AWS::EC2::VPC").values()
    tags = {t["Key"]: t["Value"] for t in vpc["Properties"]["Tags"]}
    assert tags["environment"] == "staging" and tags["project"] == "hyperpod-dpd"
