"""The real validators, run the same way by every test that checks synthesized output."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from cfnlint.api import ManualArgs, lint

from tests import cache
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


# checkov, from its own venv (make setup-checkov), offline (BC_SKIP_MAPPING=TRUE), with the project's configuration.
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
CHECKOV_CACHE = cache.CACHE_ROOT / "checkov"
CHECKOV_ENV = {"BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "ERROR"}
# The one part of an assembly that differs from synthesis to synthesis of the same app: the random names of jsii's
# temporary directories (its kernel's and its runtime's program.js), in the stack traces of a stack's metadata and of
# validation-report.json (neither is a template checkov scans; a name inside a string cannot make one). The key reads
# them as one name.
JSII_TEMP_NAMES = re.compile(rb"jsii-kernel-[A-Za-z0-9]{6}|tmp[a-z0-9_]{8}/lib/program\.js")


def _checkov_key(dirs: tuple[Path, ...], config: Path) -> str:
    """What checkov's report is a function of: every file of the scanned directories (path within its directory and
    bytes), the configuration file, the checkov venv (its lock, which pins checkov and everything it runs, and the
    installed checkov's metadata), the variables checkov reads (CKV_*, BC_*, LOG_LEVEL) and the working directory."""
    parts: list[bytes | str] = [str(os.getcwd()), config.read_bytes(), (ROOT / "requirements-checkov-lock.txt").read_bytes()]
    parts += cache.files_key(sorted(CHECKOV.parent.parent.glob("lib/python*/site-packages/checkov-*.dist-info/METADATA")))
    environ = {**os.environ, **CHECKOV_ENV}
    parts += [f"{k}={v}" for k, v in sorted(environ.items()) if k.startswith(("CKV_", "BC_", "CHECKOV_", "LOG_LEVEL"))]
    for index, directory in enumerate(dirs):
        parts.append(f"-d {index}")
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            parts += [str(path.relative_to(directory)), JSII_TEMP_NAMES.sub(b"<jsii>", path.read_bytes())]
    return cache.key(*parts)


def checkov(*dirs: Path, config: Path = ROOT / ".checkov.yaml") -> subprocess.CompletedProcess[str]:
    """checkov over ``dirs`` (``-d`` each), as ``make checkov`` runs it. The report is kept under
    :func:`_checkov_key` with each scanned directory's path written as a placeholder, so a warm run over the same files
    elsewhere gets the report checkov gives for them there; HPDPD_TEST_CACHE=off runs checkov every time."""
    argv = [str(CHECKOV), "--config-file", str(config)] + [arg for d in dirs for arg in ("-d", str(d))]
    kept = CHECKOV_CACHE / f"{_checkov_key(dirs, config)}.json"
    placeholders = [(str(d), f"<scanned directory {i}>") for i, d in enumerate(dirs)]
    hit = cache.read_json(kept)
    if hit is not None:
        out, err = hit["stdout"], hit["stderr"]
        for path, placeholder in placeholders:
            out, err = out.replace(placeholder, path), err.replace(placeholder, path)
        return subprocess.CompletedProcess(argv, hit["returncode"], out, err)
    result = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **CHECKOV_ENV}, timeout=600,
                            check=False)
    if result.returncode in (0, 1):  # a report (1: a check failed); anything else is not kept
        out, err = result.stdout, result.stderr
        for path, placeholder in sorted(placeholders, key=lambda p: -len(p[0])):
            out, err = out.replace(path, placeholder), err.replace(path, placeholder)
        cache.write_json(kept, {"returncode": result.returncode, "stdout": out, "stderr": err})
    return result
