"""checkov over every synthesized template and every GitOps manifest: no failed check, and every skip has a
reason on the one resource it concerns (.checkov.yaml skips nothing globally)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.k8s.gitops import write_manifests
from tests.validators import CHECKOV, checkov

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reports(synthesized, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    if not CHECKOV.exists():
        pytest.fail("checkov is not installed; run 'make setup-checkov' (it installs .venv-checkov)")
    dist = tmp_path_factory.mktemp("dist") / "k8s"
    write_manifests(dist)
    result = checkov(synthesized.outdir, dist)  # kept by content in .cache/ (tests/validators.py)
    merged: dict[str, dict[str, Any]] = {}
    for report in _documents(result.stdout):  # one JSON document per scanned directory
        current = merged.setdefault(report["check_type"], {"summary": {"resource_count": 0}, "results": {
            "failed_checks": [], "skipped_checks": [], "passed_checks": []}})
        current["summary"]["resource_count"] += report["summary"]["resource_count"]
        for kind in ("failed_checks", "skipped_checks", "passed_checks"):
            current["results"][kind] += report["results"].get(kind, [])
    return merged


def _documents(text: str) -> list[dict[str, Any]]:
    decoder, position, found = json.JSONDecoder(), 0, []
    text = text.strip()
    while position < len(text):
        value, end = decoder.raw_decode(text, position)
        found.extend(value if isinstance(value, list) else [value])
        position = end
        while position < len(text) and text[position].isspace():
            position += 1
    return [r for r in found if "check_type" in r]


def test_both_frameworks_are_scanned(reports: dict[str, dict[str, Any]]) -> None:
    assert reports["cloudformation"]["summary"]["resource_count"] > 100
    assert reports["kubernetes"]["summary"]["resource_count"] >= 6


@pytest.mark.parametrize("framework", ["cloudformation", "kubernetes"])
def test_no_check_fails(reports: dict[str, dict[str, Any]], framework: str) -> None:
    failed = [(f["check_id"], f["check_name"], f["resource"], Path(f["file_path"]).name)
              for f in reports[framework]["results"]["failed_checks"]]
    assert failed == []


@pytest.mark.parametrize("framework", ["cloudformation", "kubernetes"])
def test_every_skip_has_a_reason(reports: dict[str, dict[str, Any]], framework: str) -> None:
    skipped = reports[framework]["results"]["skipped_checks"]
    unexplained = [(s["check_id"], s["resource"]) for s in skipped if len((s.get("check_result") or {}).get("suppress_comment", "")) < 20]
    assert unexplained == []


def test_the_configuration_skips_nothing_globally() -> None:
    config = yaml.safe_load((ROOT / ".checkov.yaml").read_text())
    assert not config.get("skip-check") and not config.get("skip-path")
    assert set(config["framework"]) == {"cloudformation", "kubernetes"}
