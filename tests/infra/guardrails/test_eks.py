"""EKS rules fire on a cluster without logs, without secrets encryption, or with an open production endpoint."""

from __future__ import annotations

import pytest

from hyperpod_dpd.infra.guardrails.rules import Settings
from tests.infra.guardrails.conftest import first, run


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_environment_is_compliant(view, env: str) -> None:
    stage = view(env)
    settings = Settings(production=env == "prod")
    assert [f for rule in ("HPDPD-EKS1", "HPDPD-EKS2", "HPDPD-EKS3") for f in run(rule, stage, settings)] == []


def test_missing_audit_logs_fire_eks1(view) -> None:
    stage = view("dev")
    cluster = first(stage, "AWS::EKS::Cluster")
    cluster["Properties"]["Logging"]["ClusterLogging"]["EnabledTypes"] = [{"Type": "api"}]
    (finding,) = run("HPDPD-EKS1", stage)
    assert "['audit', 'authenticator']" in finding.detail


def test_unencrypted_secrets_fire_eks2(view) -> None:
    stage = view("dev")
    del first(stage, "AWS::EKS::Cluster")["Properties"]["EncryptionConfig"]
    assert [f.location for f in run("HPDPD-EKS2", stage)] == ["Properties.EncryptionConfig"]


def test_open_endpoint_fires_eks3_in_production_only(view) -> None:
    # GIVEN dev's public endpoint opened to the internet
    stage = view("dev")
    access = first(stage, "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    access["PublicAccessCidrs"] = ["0.0.0.0/0"]
    # THEN only a production environment is told to restrict it
    assert run("HPDPD-EKS3", stage, Settings(production=False)) == []
    (finding,) = run("HPDPD-EKS3", stage, Settings(production=True))
    assert "publicly routable IPv4 addresses" in finding.detail


@pytest.mark.parametrize("cidrs", [["0.0.0.0/1", "128.0.0.0/1"], ["8.0.0.0/7"]])
def test_public_space_spelled_otherwise_fires_eks3(view, cidrs: list[str]) -> None:
    # GIVEN a production endpoint opened to all of IPv4 in two halves, or to a block wider than one organisation's
    stage = view("dev")
    first(stage, "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]["PublicAccessCidrs"] = cidrs
    # THEN the rule judges the address space covered, not the literal 0.0.0.0/0
    (finding,) = run("HPDPD-EKS3", stage, Settings(production=True))
    assert "public" in finding.detail


def test_unresolved_cidrs_count_as_open_for_eks3(view) -> None:
    # GIVEN a production endpoint whose CIDRs are an intrinsic the rule cannot read
    stage = view("dev")
    vpc = first(stage, "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    vpc["PublicAccessCidrs"] = {"Fn::Split": [",", {"Ref": "Cidrs"}]}
    # THEN it fails safe
    (finding,) = run("HPDPD-EKS3", stage, Settings(production=True))
    assert "not literal CIDRs" in finding.detail
