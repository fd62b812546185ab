"""Pod calls through the official client against the fake API server: exec over WebSocket, logs, create/delete."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.ops.kube import KubeError
from hyperpod_dpd.ops.pod_api import create_pod, delete_pod, exec_in_pod, get_pod, read_log, worker_documents
from tests.fakes.kube_api import pod


@pytest.fixture
def worker(fake_kube: Any) -> Any:
    fake_kube.pods.append(pod("decode-x-1-a", namespace="ns", node_name="n1", role="decode"))
    return fake_kube


def test_exec_returns_the_output_and_exit_code_of_the_command(worker: Any) -> None:
    seen: list[tuple[str, str, list[str]]] = []

    def shell(namespace: str, name: str, container: str, command: list[str]) -> tuple[str, str, int]:
        seen.append((name, container, command))
        return ("out\n", "err\n", 0) if command[0] == "true" else ("", "sh: 1: nope: not found\n", 127)

    worker.exec = shell
    ok = exec_in_pod(worker.client(), namespace="ns", pod="decode-x-1-a", container="decode-x", command=["true", "a"])
    missing = exec_in_pod(worker.client(), namespace="ns", pod="decode-x-1-a", container=None, command=["nope"])
    # THEN stdout, stderr and the exit code come over the channels, and the container and command were passed
    assert (ok.stdout, ok.stderr, ok.exit_code) == ("out\n", "err\n", 0)
    assert missing.exit_code == 127 and "not found" in missing.output
    assert seen[0] == ("decode-x-1-a", "decode-x", ["true", "a"])


def test_exec_refusals_are_classified_with_the_permission(worker: Any) -> None:
    with pytest.raises(KubeError) as denied:  # no exec callback: RBAC's 403 on pods/exec
        exec_in_pod(worker.client(), namespace="ns", pod="decode-x-1-a", container=None, command=["true"])
    assert denied.value.cause == "access_denied" and denied.value.reason.endswith(
        "; needs create on pods/exec in namespace ns")
    worker.exec = lambda *args: ("", "", 0)
    with pytest.raises(KubeError) as gone:
        exec_in_pod(worker.client(), namespace="ns", pod="gone", container=None, command=["true"])
    assert gone.value.not_found


def test_pods_are_created_read_and_deleted_once(worker: Any) -> None:
    kube = worker.client()
    create_pod(kube, {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}})
    assert get_pod(kube, namespace="ns", name="p")["status"]["phase"] == "Pending"
    assert delete_pod(kube, namespace="ns", name="p") is True and delete_pod(kube, namespace="ns", name="p") is False
    assert [m for m, *_ in worker.requests if m == "DELETE"] == ["DELETE", "DELETE"]


def test_the_log_head_is_asked_by_bytes_and_workers_by_iec(worker: Any) -> None:
    worker.logs[("ns", "decode-x-1-a", "decode-x")] = "start-up\nlater\n"
    assert read_log(worker.client(), namespace="ns", name="decode-x-1-a", container="decode-x", limit_bytes=1024) \
        == "start-up\nlater\n"
    assert any("limitBytes=1024" in path for path in worker.calls("GET"))
    worker.pods.append(pod("decode-y-1-a", namespace="ns", node_name="n1", role="decode"))
    assert [d["metadata"]["name"] for d in worker_documents(worker.client(), namespace="ns", iec="x")] == [
        "decode-x-1-a"]
