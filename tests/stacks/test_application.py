"""The app as a whole: every environment synthesizes offline, passes cfn-lint and the CDK's own validation,
and bad config stops ``app.py`` before anything is written."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.config.pipeline import load_pipeline
from hyperpod_dpd.infra.config_warnings import warning_id
from hyperpod_dpd.stacks.application import cdk_json_context
from tests.paths import ROOT
from tests.validators import cfn_lint_findings, report_violations, validation_report


def test_cdk_validation_is_switched_on() -> None:
    context = cdk_json_context()
    assert context["@aws-cdk/core:validateAgainstDefaultRules"] is True
    assert json.loads((ROOT / "cdk.json").read_text())["app"].endswith("app.py")


def test_app_py_fits_node_to_the_machine_before_the_cdk_starts() -> None:
    # GIVEN app.py's top-level statements
    statements = ast.parse((ROOT / "app.py").read_text()).body
    calls = [i for i, s in enumerate(statements) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
             and getattr(s.value.func, "id", None) == "fit_node_to_machine"]
    cdk_imports = [i for i, s in enumerate(statements) if isinstance(s, ast.ImportFrom)
                   and (s.module or "").startswith(("hyperpod_dpd.stacks", "hyperpod_dpd.infra", "aws_cdk"))]
    # THEN Node's options are fitted once, before the first import that starts jsii's Node process
    assert len(calls) == 1 and cdk_imports and calls[0] < min(cdk_imports)


def test_every_template_of_every_environment_passes_cfn_lint(synthesized) -> None:
    assert {env for env, _ in synthesized.templates} == {"dev", "staging", "prod"}
    regions = {"dev": "us-west-2", "staging": "us-west-2", "prod": "us-east-1"}
    assert cfn_lint_findings(synthesized.templates, regions) == []


def test_cdk_validation_report_has_no_unacknowledged_findings(synthesized) -> None:
    report = validation_report(synthesized.outdir)
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPodDpd"}
    # Nothing but the pipeline's warning for each environment whose steps have no checks role to assume (its
    # configuration carries no trust for one, and pipeline.yaml names none): there is no lookup-role fallback
    pipeline = load_pipeline()
    roleless = sorted(p.name for p in pipeline.environments if p.checks_role_arn is None
                      and pipeline.trusted_environment(load_environment(p.name)).checks_role_trust is None)
    # ... and the configuration's warnings, each once as an annotation on the stack or manifest it concerns
    # (tests/stacks/test_warnings.py): warning-level, acknowledgeable, never an error
    config_warnings = sorted(v for v in report_violations(report) if v[1].startswith("Annotation::hpdpd:config:"))
    assert config_warnings == _config_warning_annotations()
    assert sorted(v for v in report_violations(report) if v not in config_warnings) == [
        ("Construct Annotations", "Annotation::hpdpd:no-checks-role", [f"pipeline/Checks-{name}"]) for name in roleless]


def _config_warning_annotations() -> list[tuple[str, str, list[str]]]:
    """What the fixture environments' warnings become: an annotation each, the environment's on its platform stack,
    an endpoint's on its manifest (infra/config_warnings.py)."""
    found = []
    for name in ("dev", "staging", "prod"):
        config = load_environment(name)
        for warning in environment_warnings(config):
            match = re.fullmatch(r"endpoints\[(\d+)\]\..+", warning.path)
            where = f"{name}/Endpoints/Endpoint-{config.endpoints[int(match[1])].name}" if match else f"{name}/Platform"
            found.append(("Construct Annotations", f"Annotation::{warning_id(warning.path)}", [where]))
    return sorted(found)


def _run_app(config_dir: Path, outdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPDPD_CONFIG_DIR": str(config_dir), "CDK_OUTDIR": str(outdir)}
    return subprocess.run([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_bad_config_stops_the_app_with_one_line_and_writes_nothing(write_config: Any, tmp_path: Path) -> None:
    # GIVEN a config with a malformed account id
    config_dir = write_config(lambda d: d.__setitem__("account", "12345"))
    outdir = tmp_path / "cdk.out"
    # WHEN app.py runs as the CDK CLI would run it
    result = _run_app(config_dir, outdir)
    # THEN it exits 2 with one line naming file, field, value and rule, no traceback, and no assembly
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {config_dir / 'dev.yaml'}: account: '12345': must be a 12-digit AWS account id (quote it in YAML)"]
    assert "Traceback" not in result.stderr
    assert not outdir.exists() or not any(outdir.iterdir())


def test_one_bad_environment_stops_all_of_them(write_config: Any, tmp_path: Path) -> None:
    config_dir = write_config(env="dev")
    # GIVEN dev is valid and staging's system group has no nodes
    write_config(lambda d: d["hyperpod"]["instance_groups"][0].__setitem__("count", 0), env="staging")
    # WHEN the app runs
    result = _run_app(config_dir, tmp_path / "out")
    # THEN nothing is synthesized, dev included, and the error names staging's file and field
    assert result.returncode == 2 and "staging.yaml: hyperpod.instance_groups[0].count: 0" in result.stderr
    assert not (tmp_path / "out").exists()


def test_app_py_run_directly_applies_the_cdk_json_flags(tmp_path: Path) -> None:
    """Without the CDK CLI, app.py reads cdk.json and cdk.context.json itself (same flags, same validation)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDK_CONTEXT")}
    env.update({"CDK_OUTDIR": str(tmp_path / "out"), "HPDPD_ENVIRONMENTS": "dev"})
    result = subprocess.run([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.loads((tmp_path / "out" / "assembly-dev" / "manifest.json").read_text())
    assert {a["displayName"] for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"} == {
        "dev/Network", "dev/Platform", "dev/Endpoints"}
    # AND with no CDK CLI to show the annotations, it prints each configuration warning once, on one line
    dev = load_environment("dev")
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {w.render(dev.source)}" for w in environment_warnings(dev)]


def _app_with_an_error_annotation(outdir: Path) -> Any:
    import aws_cdk as cdk

    app = cdk.App(outdir=str(outdir))
    stage = cdk.Stage(app, "perf", env=cdk.Environment(account="555555555555", region="us-east-2"))
    stack = cdk.Stack(stage, "Network", stack_name="hpdpd-perf-network")
    cdk.CfnResource(stack, "Topic", type="AWS::SNS::Topic")
    cdk.Annotations.of(stack).add_error("Need to perform AWS calls for account 555555555555")
    return app


def test_synthesis_errors_names_environment_stack_and_message(tmp_path: Path) -> None:
    from hyperpod_dpd.stacks.application import synthesis_errors

    # GIVEN a stage whose stack carries an error annotation WHEN it synthesizes (which does not raise)
    assembly = _app_with_an_error_annotation(tmp_path).synth()
    # THEN the error is found, one line naming the stage, the stack and the message
    assert synthesis_errors(assembly) == [
        "perf/Network (hpdpd-perf-network): Need to perform AWS calls for account 555555555555"]


def test_main_fails_when_any_stage_carries_an_error(monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    from hyperpod_dpd.stacks import application

    # GIVEN the app would synthesize a stage with an error annotation
    monkeypatch.setattr(application, "build_app", lambda **_: (_app_with_an_error_annotation(tmp_path), {}))
    # WHEN app.py's entry point runs
    code = application.main(ROOT)
    # THEN it exits non-zero with one line per problem instead of reporting success
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: perf/Network (hpdpd-perf-network): Need to perform AWS calls for account 555555555555"]


def _app_with_a_guardrail_finding(outdir: Path) -> Any:
    """A guarded stage with a plain bucket, synthesized as the CDK CLI does it: validation errors fail nothing."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from hyperpod_dpd.infra import apply_guardrails

    app = cdk.App(outdir=str(outdir), context={"@aws-cdk/core:failSynthOnValidationErrors": False})
    stage = cdk.Stage(app, "perf")
    s3.Bucket(cdk.Stack(stage, "Data"), "Plain")
    apply_guardrails(stage)
    return app


def test_main_fails_on_a_finding_the_cli_does_not_fail_on(monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    from hyperpod_dpd.stacks import application

    # GIVEN the app would synthesize an unacknowledged cdk-nag finding, with the flag the CDK CLI passes
    monkeypatch.setattr(application, "build_app", lambda **_: (_app_with_a_guardrail_finding(tmp_path), {}))
    # WHEN app.py's entry point runs (the synthesis itself succeeds)
    code = application.main(ROOT)
    # THEN it exits non-zero with one line per error-level finding: plugin, rule and construct path
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert "error: AwsSolutions AwsSolutions-S1 at perf/Data/Plain/Resource: " in "\n".join(lines)
    assert all(line.startswith("error: ") for line in lines)


def test_validation_failures_count_errors_not_warnings(tmp_path: Path) -> None:
    from hyperpod_dpd.stacks.application import validation_failures

    # GIVEN a report with one error and one warning, and a directory with no report at all
    construct = {"constructPath": "dev/Network/Vpc/Resource"}
    (tmp_path / "validation-report.json").write_text(json.dumps({"pluginReports": [{"pluginName": "CloudFormation Validate",
        "violations": [{"ruleName": "E3001", "severity": "error", "description": "bad  value",
                        "violatingConstructs": [construct]},
                       {"ruleName": "W3010", "severity": "warning", "description": "hard-coded AZ",
                        "violatingConstructs": [construct]}]}]}))
    # THEN only the error is a failure, and no report means none
    assert validation_failures(tmp_path) == ["CloudFormation Validate E3001 at dev/Network/Vpc/Resource: bad value"]
    assert validation_failures(tmp_path / "missing") == []


def test_check_validates_the_configuration_without_synthesizing(write_config: Any, monkeypatch: Any,
                                                               capsys: Any) -> None:
    from hyperpod_dpd.stacks import application

    # GIVEN a configuration directory with one bad file
    config_dir = write_config(lambda d: d.__setitem__("region", "mars-1"))
    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(config_dir))
    # WHEN make synth's first step checks it THEN it exits 2 naming the file and field (cdk.out is untouched)
    assert application.check() == 2
    assert "dev.yaml: region: 'mars-1'" in capsys.readouterr().err


def test_availability_zones_come_from_the_configuration(synthesized: Any) -> None:
    from hyperpod_dpd.config import load_all
    from hyperpod_dpd.infra.platform import availability_zone_context
    from tests.paths import FIXTURE_CONFIG_DIR

    # GIVEN the fixture environments (no cdk.context.json entry is needed for their accounts)
    context = availability_zone_context(*load_all(FIXTURE_CONFIG_DIR))
    # THEN each account and Region gets the zones its configuration names, and synthesis needed no lookup
    assert context["availability-zones:account=111111111111:region=us-west-2"] == ["us-west-2a", "us-west-2b"]
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    assert "missing" not in manifest


@pytest.mark.parametrize("argv", [["--chek"], ["--check", "--config"], ["--check", "--config-dir"], ["synth"]])
def test_the_module_refuses_options_it_does_not_know(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.stacks.application import _module_main

    # WHEN the check's entry point gets an option it does not know
    code = _module_main(argv)
    # THEN it says so in one line and synthesizes nothing (it never falls back to the default configuration)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "usage: python -m hyperpod_dpd.stacks.application" in err


def test_the_check_reads_the_config_dir_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.stacks.application import _module_main

    # GIVEN an empty configuration directory named on the command line
    monkeypatch.delenv("HPDPD_CONFIG_DIR", raising=False)
    empty = tmp_path / "config"
    empty.mkdir()
    # WHEN the check runs on it
    code = _module_main(["--check", "--config-dir", str(empty)])
    # THEN that directory is the one refused (an empty directory is an error, not "ok")
    assert code == 2 and str(empty) in capsys.readouterr().err


@pytest.mark.parametrize("cdk_json", [None, '{"app": "python app.py"}'], ids=["no cdk.json", "cdk.json without context"])
def test_cdk_json_context_outside_a_project_is_the_lookups_alone(tmp_path: Path, cdk_json: str | None) -> None:
    from hyperpod_dpd.stacks.application import cdk_json_context

    # GIVEN another project's directory: no cdk.json, or one without context (the CDK CLI accepts both), and a lookup
    if cdk_json is not None:
        (tmp_path / "cdk.json").write_text(cdk_json)
    (tmp_path / "cdk.context.json").write_text('{"availability-zones:account=123456789012:region=eu-west-1": ["a"]}')
    # WHEN the context the CLI would pass is read THEN it is the recorded lookup, nothing more
    assert cdk_json_context(tmp_path) == {"availability-zones:account=123456789012:region=eu-west-1": ["a"]}


@pytest.mark.parametrize("text", ["[]", '{"context": ["@aws-cdk/core:stackRelativeExports"]}', "{"])
def test_the_check_names_an_unreadable_cdk_json(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.stacks.application import check

    # GIVEN a directory whose cdk.json is there but is not a CDK settings object
    (tmp_path / "cdk.json").write_text(text)
    monkeypatch.chdir(tmp_path)
    # WHEN the check runs there THEN it exits 2 with one line naming that file, before anything is synthesized
    assert check(tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {tmp_path / 'cdk.json'}: <file>: ") and "cannot be read" in err


def test_the_check_runs_outside_any_cdk_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.stacks.application import check
    from tests.paths import FIXTURE_CONFIG_DIR

    # GIVEN a directory with no cdk.json (a library user's checkout, or none) and one environment file
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "staging.yaml").write_text((FIXTURE_CONFIG_DIR / "staging.yaml").read_text())
    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(config_dir))
    monkeypatch.delenv("HPDPD_ENVIRONMENTS", raising=False)
    monkeypatch.chdir(tmp_path)
    # WHEN the check runs there
    code = check(tmp_path)
    captured = capsys.readouterr()
    # THEN it synthesizes with the toolkit's own flags (the stages set them) and accepts the configuration
    assert code == 0, captured.err
    assert captured.out.splitlines() == ["configuration ok: staging (synthesized and validated, nothing written)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config"]  # nothing written next to it
