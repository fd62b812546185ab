"""The plugin runs on every stage through the CDK's validation report: a deliberate regression fails synthesis
with the rule id, and an acknowledgment on that construct, with a reason, lets it through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_s3 as s3

from hyperpod_dpd.infra.guardrails import PLUGIN_NAME, RULES, acknowledge
from hyperpod_dpd.stacks.application import build_app


def _report(outdir: Path) -> dict[str, list[str]]:
    report = json.loads((outdir / "validation-report.json").read_text())
    return {p["pluginName"]: [v["ruleName"] for v in p["violations"]] for p in report["pluginReports"]}


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> tuple[Exception, dict[str, list[str]]]:
    """dev with two regressions: manual node recovery (own rule) and a plain bucket (cdk-nag and own S3 rules)."""
    outdir = tmp_path_factory.mktemp("regressed")
    app, stages = build_app(environments=["dev"], outdir=str(outdir), context=cdk_context)
    platform = stages["dev"].platform
    platform.hyperpod.resource.node_recovery = "None"
    s3.Bucket(platform, "CarelessBucket")
    with pytest.raises(RuntimeError, match="ValidationFailed") as raised:
        app.synth()
    return raised.value, _report(outdir)


def test_own_rules_fail_synthesis_with_their_ids(regressed) -> None:
    error, report = regressed
    assert "HPDPD-HP1" in report[PLUGIN_NAME]
    assert {"HPDPD-S3-2", "HPDPD-S3-3"} <= set(report[PLUGIN_NAME])
    assert "HyperPod node recovery must be Automatic" in str(error)


def test_cdk_nag_fails_synthesis_on_a_new_unacknowledged_finding(regressed) -> None:
    _, report = regressed
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= set(report["AwsSolutions"])


def test_an_acknowledgment_with_a_reason_lets_one_construct_through(tmp_path: Path, cdk_context: dict[str, Any]) -> None:
    app, stages = build_app(environments=["dev"], outdir=str(tmp_path), context=cdk_context)
    cluster = stages["dev"].platform.hyperpod.resource
    cluster.node_recovery = "None"
    acknowledge(cluster, "HPDPD-HP1", "test: recovery handled by an external controller")
    app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text()) if (tmp_path / "validation-report.json").exists() else {}
    suppressed = [v["ruleName"] for p in report.get("pluginReports", []) for v in p.get("suppressedViolations", [])]
    assert "HPDPD-HP1" in suppressed


def test_every_rule_has_an_id_description_and_fix() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids)) == 17
    assert all(r.description and r.fix for r in RULES)
    with pytest.raises(KeyError):
        acknowledge(None, "HPDPD-NOPE", "x")  # type: ignore[arg-type]
