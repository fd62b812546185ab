"""apply_guardrails on any app: cdk-nag once per app over every guarded stage, the project's rules per stage, and a
finding anywhere still fails synthesis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from hyperpod_dpd.infra.guardrails import PLUGIN_NAME, apply_guardrails
from hyperpod_dpd.infra.guardrails.apply import aws_solutions_checks


@pytest.fixture(scope="module")
def two_stages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Exception, dict[str, Any]]:
    """An app with two guarded stages, each with a plain bucket (cdk-nag S1/S10 and the project's S3 rules)."""
    outdir = tmp_path_factory.mktemp("two-stages")
    app = cdk.App(outdir=str(outdir))
    for name in ("alpha", "beta"):
        stage = cdk.Stage(app, name)
        s3.Bucket(cdk.Stack(stage, "Stack"), "Plain")
        apply_guardrails(stage)
    with pytest.raises(RuntimeError, match="ValidationFailed") as raised:
        app.synth()
    return raised.value, json.loads((Path(outdir) / "validation-report.json").read_text())


def _paths(report: dict[str, Any], plugin: str) -> list[set[str]]:
    return [{c["constructPath"].split("/")[0] for v in p["violations"] for c in v["violatingConstructs"]}
            for p in report["pluginReports"] if p["pluginName"] == plugin]


def test_cdk_nag_runs_once_over_every_guarded_stage(two_stages: tuple[Exception, dict[str, Any]]) -> None:
    # GIVEN the report of the app with two guarded stages
    _, report = two_stages
    # THEN there is one AwsSolutions report, and its findings name both stages' buckets
    assert _paths(report, "AwsSolutions") == [{"alpha", "beta"}]


def test_the_projects_rules_report_per_stage(two_stages: tuple[Exception, dict[str, Any]]) -> None:
    # GIVEN the same report
    _, report = two_stages
    # THEN the project's rules reported once per stage, each on its own stage only
    assert sorted(map(sorted, _paths(report, PLUGIN_NAME))) == [["alpha"], ["beta"]]


def test_a_finding_in_any_stage_fails_synthesis(two_stages: tuple[Exception, dict[str, Any]]) -> None:
    # GIVEN the error synthesis raised
    error, _ = two_stages
    # THEN it names cdk-nag's S3 finding on the buckets of both stages
    assert "AwsSolutions-S1" in str(error)
    assert "alpha/Stack/Plain" in str(error) and "beta/Stack/Plain" in str(error)


def test_one_app_shares_one_plugin_and_another_app_gets_its_own() -> None:
    # GIVEN two apps
    first, second = cdk.App(), cdk.App()
    # WHEN the AwsSolutions plugin is asked for twice for the first and once for the second
    # THEN the first app gets the same plugin both times and the second app a different one
    assert aws_solutions_checks(first) is aws_solutions_checks(first)
    assert aws_solutions_checks(second) is not aws_solutions_checks(first)
