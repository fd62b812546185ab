"""The real validators, run the same way by every test that checks synthesized output."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint

from tests.paths import ROOT

# W3005: CDK writes DependsOn that is also implied by Ref (harmless); W3010: the GPU AZ is pinned on purpose,
# because capacity (reservations, training plans) lives in one AZ.
CFN_LINT_IGNORED = ["W3005", "W3010"]


_LINTED: dict[tuple[str, str], list[str]] = {}  # (template JSON, Region) -> findings: the same template is linted once

# cfn-lint's findings are a function of the template, the Region, the ignored rules and cfn-lint itself (its rules and
# bundled schemas ship in its release), so they are kept on disk under that key, and a warm run lints only templates
# that changed: the same assertion over the same findings, without linting an unchanged template again. Any change of
# the lock (a new cfn-lint, or anything it depends on) makes every key new. HPDPD_TEST_CACHE=off lints everything.
CACHE_DIR = ROOT / ".cache" / "test-validators" / "cfn-lint"
_TOOL_KEY = hashlib.sha256(
    f"cfn-lint {metadata.version('cfn-lint')}\n".encode() + (ROOT / "requirements-lock.txt").read_bytes()).hexdigest()


def _cfn_lint(text: str, region: str) -> list[str]:
    key = hashlib.sha256(json.dumps([_TOOL_KEY, region, CFN_LINT_IGNORED, text]).encode()).hexdigest()
    cached = CACHE_DIR / f"{key}.json"
    use_cache = os.environ.get("HPDPD_TEST_CACHE", "on") != "off"
    if use_cache and cached.is_file():
        findings: list[str] = json.loads(cached.read_text())
        return findings
    config = ManualArgs(regions=[region], ignore_checks=CFN_LINT_IGNORED)
    findings = [f"{match.rule.id} {match.message} ({'/'.join(map(str, match.path))})" for match in lint(text, config=config)]
    if use_cache:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(findings))
        partial.replace(cached)  # atomic: two workers writing the same key leave one whole file
    return findings


def cfn_lint_findings(templates: Mapping[tuple[str, str], dict[str, Any]], regions: Mapping[str, str]) -> list[str]:
    """One line per cfn-lint finding over ``(environment, stack part) -> template``, each linted in its Region."""
    problems = []
    for (env, part), template in sorted(templates.items()):
        text = json.dumps(template, sort_keys=True)
        key = (text, regions[env])
        if key not in _LINTED:
            _LINTED[key] = _cfn_lint(text, regions[env])
        problems += [f"{env}/{part}: {finding}" for finding in _LINTED[key]]
    return problems


def validation_report(outdir: Path) -> dict[str, Any]:
    """The CDK's policy-validation report of a synthesized assembly (every plugin of every stage)."""
    return json.loads((outdir / "validation-report.json").read_text())


def report_violations(report: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(p["pluginName"], v["ruleName"], [c["constructPath"] for c in v["violatingConstructs"]])
            for p in report["pluginReports"] for v in p["violations"]]
