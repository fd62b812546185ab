"""The app as a whole: every environment synthesizes offline, passes cfn-lint and the CDK's own validation,
and bad config stops ``app.py`` before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint
from hyperpod_dpd.stacks.application import cdk_json_context

ROOT = Path(__file__).resolve().parents[2]
# W3005: CDK writes DependsOn that is also implied by Ref (harmless); W3010: the GPU AZ is pinned on purpose,
# because capacity (reservations, training plans) lives in one AZ.
IGNORED = ["W3005", "W3010"]


def test_cdk_validation_is_switched_on() -> None:
    context = cdk_json_context()
    assert context["@aws-cdk/core:validateAgainstDefaultRules"] is True
    assert json.loads((ROOT / "cdk.json").read_text())["app"].endswith("app.py")


def test_every_template_of_every_environment_passes_cfn_lint(synthesized) -> None:
    assert {env for env, _ in synthesized.templates} == {"dev", "staging", "prod"}
    problems = []
    for (env, part), template in sorted(synthesized.templates.items()):
        region = {"dev": "us-west-2", "staging": "us-west-2", "prod": "us-east-1"}[env]
        for match in lint(json.dumps(template), config=ManualArgs(regions=[region], ignore_checks=IGNORED)):
            problems.append(f"{env}/{part}: {match.rule.id} {match.message} ({'/'.join(map(str, match.path))})")
    assert problems == []


def test_cdk_validation_report_has_no_unacknowledged_findings(synthesized) -> None:
    report_path = synthesized.outdir / "validation-report.json"
    if not report_path.exists():
        return  # no report is written when no plugin found anything
    report = json.loads(report_path.read_text())
    violations = [(p["pluginName"], v["ruleName"], [c["constructPath"] for c in v["violatingConstructs"]])
                  for p in report["pluginReports"] for v in p["violations"]]
    assert violations == []


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
    write_config(lambda d: d["hyperpod"]["instance_groups"][1].__setitem__("count", 0), env="staging")
    result = _run_app(config_dir, tmp_path / "out")
    assert result.returncode == 2 and "staging.yaml: hyperpod.instance_groups[1].count: 0" in result.stderr
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
