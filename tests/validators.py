"""The real validators, run the same way by every test that checks synthesized output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint

# W3005: CDK writes DependsOn that is also implied by Ref (harmless); W3010: the GPU AZ is pinned on purpose,
# because capacity (reservations, training plans) lives in one AZ.
CFN_LINT_IGNORED = ["W3005", "W3010"]


_LINTED: dict[tuple[str, str], list[str]] = {}  # (template JSON, Region) -> findings: the same template is linted once


def cfn_lint_findings(templates: Mapping[tuple[str, str], dict[str, Any]], regions: Mapping[str, str]) -> list[str]:
    """One line per cfn-lint finding over ``(environment, stack part) -> template``, each linted in its Region."""
    problems = []
    for (env, part), template in sorted(templates.items()):
        text = json.dumps(template, sort_keys=True)
        key = (text, regions[env])
        if key not in _LINTED:
            config = ManualArgs(regions=[regions[env]], ignore_checks=CFN_LINT_IGNORED)
            _LINTED[key] = [f"{match.rule.id} {match.message} ({'/'.join(map(str, match.path))})"
                            for match in lint(text, config=config)]
        problems += [f"{env}/{part}: {finding}" for finding in _LINTED[key]]
    return problems


def validation_report(outdir: Path) -> dict[str, Any]:
    """The CDK's policy-validation report of a synthesized assembly (every plugin of every stage)."""
    return json.loads((outdir / "validation-report.json").read_text())


def report_violations(report: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(p["pluginName"], v["ruleName"], [c["constructPath"] for c in v["violatingConstructs"]])
            for p in report["pluginReports"] for v in p["violations"]]
