"""HPDPD-DATA1: a production environment retains every stateful resource, the HyperPod cluster included."""

from __future__ import annotations

import pytest

from hyperpod_dpd.infra.guardrails.rules import Settings
from hyperpod_dpd.infra.guardrails.stateful import RETAINED_TYPES
from tests.infra.guardrails.conftest import first, run

PRODUCTION = Settings(production=True)


def test_prod_is_compliant(view) -> None:
    # GIVEN prod's real templates (removal_policy: retain)  WHEN the rule runs as for a production environment
    # THEN it finds nothing: every stateful resource carries both Retain policies
    assert run("HPDPD-DATA1", view("prod"), PRODUCTION) == []


@pytest.mark.parametrize("env", ["dev", "staging"])
def test_the_rule_applies_to_production_only(view, env: str) -> None:
    # GIVEN an environment that destroys its data  THEN outside production the rule stays silent ...
    assert run("HPDPD-DATA1", view(env)) == []
    # ... and the same templates would fail it in production, the HyperPod cluster among them
    findings = run("HPDPD-DATA1", view(env), PRODUCTION)
    assert {"AWS::SageMaker::Cluster", "AWS::EC2::VPC", "AWS::EKS::Cluster"} <= {f.resource.type for f in findings}


def test_a_hyperpod_cluster_without_retain_fires_data1(view) -> None:
    # GIVEN prod with the HyperPod cluster back at CloudFormation's default (deleted with the stack)
    stage = view("prod")
    cluster = first(stage, "AWS::SageMaker::Cluster")
    del cluster["DeletionPolicy"], cluster["UpdateReplacePolicy"]
    # THEN exactly that resource is reported, with both missing policies
    (finding,) = run("HPDPD-DATA1", stage, PRODUCTION)
    assert finding.resource.type == "AWS::SageMaker::Cluster" and finding.location == "DeletionPolicy"
    assert finding.detail.endswith("DeletionPolicy is None, UpdateReplacePolicy is None")


def test_a_subnet_replaced_without_retain_fires_data1(view) -> None:
    # GIVEN prod with the GPU subnet retained on deletion but not on replacement
    stage = view("prod")
    first(stage, "AWS::EC2::Subnet", "NetworkGpuSubnet")["UpdateReplacePolicy"] = "Delete"
    (finding,) = run("HPDPD-DATA1", stage, PRODUCTION)
    assert finding.resource.logical_id.startswith("NetworkGpuSubnet") and finding.location == "UpdateReplacePolicy"


def test_the_rule_covers_every_stateful_type() -> None:
    assert "AWS::SageMaker::Cluster" in RETAINED_TYPES
