"""The GitOps writer with the default delivery (cdk): no environment directory a controller could apply, each
endpoint's manifests for review under _cdk/, nothing written on bad input, the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_all
from hyperpod_dpd.k8s.gitops import CDK_REVIEW_DIR, MARKER, main, render_environment, write_manifests
from hyperpod_dpd.k8s.gitops_tree import WriteResult

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, WriteResult]:
    out = tmp_path_factory.mktemp("gitops")
    return out, write_manifests(out, load_all())


def test_cdk_environments_get_only_review_copies_of_their_endpoints(written: tuple[Path, WriteResult]) -> None:
    # GIVEN the fixture environments, all delivered by CDK (no delivery key)
    out, result = written
    # THEN dev's endpoint is written for review under _cdk/, and the environments without endpoints get nothing
    assert result.written == {"dev": ("_cdk/dev/llama-3-3-70b.k8s.yaml",), "prod": (), "staging": ()}
    assert (out / MARKER).is_file() and result.deleted == ()


def test_no_directory_a_controller_could_apply_exists_for_a_cdk_environment(written: tuple[Path, WriteResult]) -> None:
    out, _ = written
    # THEN there is no <out>/<env>/ (an Argo CD directory generator or a Flux path finds nothing), and the review
    # copies have no kustomization.yaml
    assert sorted(p.name for p in out.iterdir()) == [MARKER, CDK_REVIEW_DIR]
    assert not list(out.rglob("kustomization.yaml"))


def test_review_files_hold_exactly_the_validated_manifests_cdk_applies(written: tuple[Path, WriteResult]) -> None:
    out, _ = written
    documents = list(yaml.safe_load_all((out / CDK_REVIEW_DIR / "dev" / "llama-3-3-70b.k8s.yaml").read_text()))
    assert documents == render_environment(load_all(names=["dev"])[0])["llama-3-3-70b"]
    assert sorted(d["kind"] for d in documents) == sorted([
        "Namespace", "InferenceEndpointConfig", "Service", "NetworkPolicy", "NetworkPolicy", "PodDisruptionBudget",
        "PodDisruptionBudget"])
    # no ordering annotations: these are not for a controller
    assert all("argocd.argoproj.io/sync-wave" not in d["metadata"].get("annotations", {}) for d in documents)


def test_bad_input_writes_nothing_and_exits_2_with_one_line(
        tmp_path: Path, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    def negative_threshold(data: dict[str, Any]) -> None:
        data["endpoints"][0]["routing"]["threshold"] = -1

    config_dir = write_config(negative_threshold)
    out = tmp_path / "out"
    assert main(["--out", str(out), "--config-dir", str(config_dir)]) == 2
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1
    assert "dev.yaml: endpoints[0].routing.threshold: -1: must be 0 (always disaggregate)" in error
    assert not out.exists()


def test_cli_writes_the_selected_environment_and_says_who_delivers_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path), "--env", "dev"]) == 0
    assert f"dev (delivery.endpoints: cdk): 1 file(s) in {tmp_path / CDK_REVIEW_DIR / 'dev'}" in capsys.readouterr().out
    assert (tmp_path / CDK_REVIEW_DIR / "dev" / "llama-3-3-70b.k8s.yaml").is_file()
    assert not (tmp_path / CDK_REVIEW_DIR / "prod").exists()


def test_an_output_path_that_is_a_file_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN --out naming a file
    out = tmp_path / "k8s"
    out.write_text("not a directory\n")
    # THEN the command refuses with one line, and the file is untouched
    assert main(["--out", str(out), "--env", "dev"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"error: {out}: is not a directory; choose a directory for the GitOps tree (--out)"
    assert out.read_text() == "not a directory\n"


def test_runs_as_a_module(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{ROOT / 'node_modules' / 'node' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd.k8s.gitops", "--out", str(tmp_path), "--env", "dev"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / CDK_REVIEW_DIR / "dev" / "llama-3-3-70b.k8s.yaml").is_file()
