"""checkov over a gitops environment's tree: the objects that move out of CloudFormation (where its scan of the
templates never saw them as Kubernetes objects: the RBAC, the Karpenter pools) pass its Kubernetes checks too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_all
from hyperpod_dpd.k8s.gitops import write_manifests
from tests.validators import CHECKOV, checkov

ROOT = Path(__file__).resolve().parents[2]
GITOPS_CONFIG_DIR = ROOT / "tests" / "fixtures" / "gitops" / "config"


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    if not CHECKOV.exists():
        pytest.fail("checkov is not installed; run 'make setup-checkov' (it installs .venv-checkov)")
    out = tmp_path_factory.mktemp("gitops") / "k8s"
    write_manifests(out, load_all(GITOPS_CONFIG_DIR))
    result = checkov(out)  # kept by content in .cache/ (tests/validators.py)
    documents = json.loads(result.stdout)
    (kubernetes,) = [d for d in (documents if isinstance(documents, list) else [documents])
                     if d.get("check_type") == "kubernetes"]
    return out, kubernetes


def test_every_object_of_the_gitops_tree_passes_checkov(scanned: tuple[Path, dict[str, Any]]) -> None:
    # GIVEN the GitOps fixture's tree (dev: RBAC, Karpenter, an endpoint; handover: its review copy)
    out, report = scanned
    objects = [o for p in out.rglob("*.k8s.yaml") for o in yaml.safe_load_all(p.read_text())]
    assert {"ClusterRole", "RoleBinding", "NodePool", "InferenceEndpointConfig"} <= {o["kind"] for o in objects}
    # THEN checkov parsed every object, and no check failed or was skipped
    summary = report["summary"]
    assert (summary["resource_count"], summary["parsing_errors"]) == (len(objects), 0)
    assert summary["passed"] > 0
    assert [(f["check_id"], f["resource"]) for f in report["results"]["failed_checks"]] == []
    assert summary["failed"] == summary["skipped"] == 0
