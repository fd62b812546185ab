"""The GitOps writer: plain YAML per environment and endpoint, stale files removed, nothing written on bad input."""

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
from hyperpod_dpd.k8s.gitops import main, render_environment, write_manifests

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Path]]]:
    out = tmp_path_factory.mktemp("gitops")
    return out, write_manifests(out, load_all())


def test_every_environment_gets_a_directory_and_dev_one_file_per_endpoint(
        written: tuple[Path, dict[str, list[Path]]]) -> None:
    out, paths = written
    assert sorted(paths) == ["dev", "prod", "staging"]
    assert all((out / env).is_dir() for env in paths)
    assert paths["dev"] == [out / "dev" / "llama-3-3-70b.k8s.yaml"]
    assert paths["staging"] == paths["prod"] == []


def test_files_hold_exactly_the_validated_manifests(written: tuple[Path, dict[str, list[Path]]]) -> None:
    out, _ = written
    documents = list(yaml.safe_load_all((out / "dev" / "llama-3-3-70b.k8s.yaml").read_text()))
    assert documents == render_environment(load_all(names=["dev"])[0])["llama-3-3-70b"]
    assert [d["kind"] for d in documents] == ["Namespace", "InferenceEndpointConfig", "Service", "NetworkPolicy",
                                              "NetworkPolicy", "PodDisruptionBudget", "PodDisruptionBudget"]


def test_an_environment_directory_is_rewritten_so_removed_endpoints_disappear(tmp_path: Path) -> None:
    stale = tmp_path / "dev" / "removed-endpoint.k8s.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: InferenceEndpointConfig\n")
    keep = tmp_path / "dev" / "README.md"
    keep.write_text("not a manifest\n")
    write_manifests(tmp_path, load_all(names=["dev"]))
    assert sorted(p.name for p in (tmp_path / "dev").iterdir()) == ["README.md", "llama-3-3-70b.k8s.yaml"]


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


def test_cli_writes_the_selected_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path), "--env", "dev"]) == 0
    assert "dev: 1 file(s)" in capsys.readouterr().out
    assert (tmp_path / "dev" / "llama-3-3-70b.k8s.yaml").is_file()
    assert not (tmp_path / "prod").exists()


def test_runs_as_a_module(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{ROOT / 'node_modules' / 'node' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd.k8s.gitops", "--out", str(tmp_path), "--env", "dev"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "dev" / "llama-3-3-70b.k8s.yaml").is_file()
