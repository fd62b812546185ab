"""The vendored CRD and its committed cdk8s import: unchanged from the source, and what ``make imports`` produces."""

from __future__ import annotations

import filecmp
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hyperpod_dpd.k8s.imports.com.amazon.aws.sagemaker import inference as iec

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "k8s" / "crds" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
CDK8S = ROOT / "node_modules" / ".bin" / "cdk8s"
NODE_BIN = ROOT / "node_modules" / "node" / "bin"


def test_the_vendored_crd_is_the_recorded_upstream_file() -> None:
    sources = (CRD.parent / "SOURCES.md").read_text()
    assert hashlib.sha256(CRD.read_bytes()).hexdigest() in sources


def test_the_generated_l1_renders_the_v1_kind() -> None:
    gvk = iec.InferenceEndpointConfig.GVK
    assert (gvk.api_version, gvk.kind) == ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")


@pytest.mark.slow
@pytest.mark.skipif(not CDK8S.exists() or shutil.which("node", path=str(NODE_BIN)) is None,
                    reason="the pinned cdk8s CLI and Node are not installed")
def _imported(tmp_path: Path) -> Path:
    """The CRD imported with the pinned CLI (as `make imports` does). What the import writes is a function of the CRD,
    the locked npm packages (the cdk8s CLI, jsii-pacmak) and Node, so it is kept under that key in .cache/ and
    imported again only when one of them changes (HPDPD_TEST_CACHE=off imports every time)."""
    node = subprocess.run([str(NODE_BIN / "node"), "--version"], capture_output=True, text=True, check=True).stdout
    key = hashlib.sha256(CRD.read_bytes() + (ROOT / "package-lock.json").read_bytes() + node.encode()).hexdigest()
    cached = ROOT / ".cache" / "test-validators" / "cdk8s-import" / key
    use_cache = os.environ.get("HPDPD_TEST_CACHE", "on") != "off"
    if use_cache and cached.is_dir():
        return cached
    out = tmp_path / "imported"
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "CDK8S_CHECK_UPGRADE": "false"}
    subprocess.run([str(CDK8S), "import", str(CRD), "--language", "python", "--output", str(out),
                    "--no-check-upgrade"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=180)
    if use_cache:
        partial = cached.with_name(f"{key}.{os.getpid()}.tmp")
        shutil.copytree(out, partial)
        partial.rename(cached)  # whole or not at all (another run that got there first keeps its copy)
    return out


def test_committed_imports_are_what_cdk8s_import_generates(tmp_path: Path) -> None:
    # WHEN the CRD is imported again with the pinned CLI
    imported = _imported(tmp_path)
    # THEN the output is byte-identical to the committed k8s/imports
    committed = ROOT / "k8s" / "imports"
    generated = sorted(p.relative_to(imported) for p in imported.rglob("*") if p.is_file())
    assert generated
    assert generated == sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file()
                               and "__pycache__" not in p.parts)
    _, mismatch, errors = filecmp.cmpfiles(imported, committed, [str(p) for p in generated], shallow=False)
    assert (mismatch, errors) == ([], [])
