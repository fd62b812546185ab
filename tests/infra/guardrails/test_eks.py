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
    assert "0.0.0.0/0" in finding.detail
