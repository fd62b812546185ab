"""IEC status through kubectl: a fake ``kubectl`` on PATH stands in for a cluster."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hyperpod_dpd.ops.kube import NO_KUBECONFIG, Kubectl, parse_iec

READY = {"status": {"state": "DeploymentComplete", "conditions": [
    {"type": "Ready", "status": "True", "message": "DPD prefill and decode deployments are ready"}]}}


def fake_kubectl(directory: Path, *, stdout: str = "", stderr: str = "", code: int = 0) -> Path:
    """A kubectl that records its arguments and prints a canned answer."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "out.txt").write_text(stdout)
    (directory / "err.txt").write_text(stderr)
    script = directory / "kubectl"
    script.write_text(f"""#!/bin/sh
printf '%s\\n' "$@" > "{directory}/args.txt"
cat "{directory}/out.txt"
cat "{directory}/err.txt" >&2
exit {code}
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def no_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)


def test_without_a_kubeconfig_the_state_is_unknown(no_kubeconfig: None, tmp_path: Path) -> None:
    kubectl = Kubectl(kubeconfig=None, binary=str(fake_kubectl(tmp_path, stdout=json.dumps(READY))))
    status = kubectl.iec_status(name="llama", namespace="default")
    assert status.state == NO_KUBECONFIG == "unknown (no kubeconfig)" and not status.known
    assert not (tmp_path / "args.txt").exists()  # kubectl was not run


def test_without_kubectl_on_path_the_state_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    status = Kubectl.from_environment(str(tmp_path / "kubeconfig")).iec_status(name="llama", namespace="default")
    assert status.state == "unknown (kubectl not on PATH)"


def test_the_iec_is_read_with_the_given_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   no_kubeconfig: None) -> None:
    # GIVEN kubectl on PATH and a kubeconfig passed explicitly
    fake_kubectl(tmp_path / "bin", stdout=json.dumps(READY))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    # WHEN the IEC status is read
    status = Kubectl.from_environment("/etc/kube/dev").iec_status(name="llama-1a2b3c", namespace="serving")
    # THEN kubectl was asked for exactly that IEC as JSON, and its state and first condition are reported
    args = (tmp_path / "bin" / "args.txt").read_text().split()
    assert args == ["--kubeconfig", "/etc/kube/dev", "get", "inferenceendpointconfig", "llama-1a2b3c", "-n",
                    "serving", "-o", "json"]
    assert status.ready and status.message == "DPD prefill and decode deployments are ready"


def test_kubeconfig_from_the_environment_is_left_to_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    binary = fake_kubectl(tmp_path / "bin", stdout=json.dumps({"status": {"state": "DeploymentInProgress"}}))
    status = Kubectl(kubeconfig=None, binary=str(binary)).iec_status(name="llama", namespace="default")
    assert status.state == "DeploymentInProgress" and not status.ready and not status.failed
    assert "--kubeconfig" not in (tmp_path / "bin" / "args.txt").read_text()


def test_a_missing_iec_and_a_kubectl_error_are_reported(tmp_path: Path) -> None:
    missing = fake_kubectl(tmp_path / "a", code=1,
                           stderr='Error from server (NotFound): inferenceendpointconfigs "llama" not found\n')
    status = Kubectl(kubeconfig="k", binary=str(missing)).iec_status(name="llama", namespace="default")
    assert status.state == "NotFound" and status.known
    broken = fake_kubectl(tmp_path / "b", code=1, stderr="Unable to connect to the server: dial tcp: i/o timeout\n")
    status = Kubectl(kubeconfig="k", binary=str(broken)).iec_status(name="llama", namespace="default")
    assert status.state == "unknown (kubectl: Unable to connect to the server: dial tcp: i/o timeout)"


def test_failed_and_pending_states_are_parsed() -> None:
    failed = parse_iec(json.dumps({"status": {"state": "DeploymentFailed", "conditions": [
        {"message": "prefill pods: ImagePullBackOff"}]}}))
    assert failed.failed and failed.message == "prefill pods: ImagePullBackOff"
    assert parse_iec(json.dumps({"metadata": {}})).state == "DeploymentPending"
    assert not parse_iec("not json").known
