"""The probe against the fake API server: the pods it creates, where, and that none outlives it."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.ops.kube import KubeError
from hyperpod_dpd.ops.probe import ProbeOptions, run_probe
from tests.fakes import dpd_cluster

ENDPOINT = load_environment("dev").endpoints[0]
IEC = ENDPOINT.resource_name
NS = ENDPOINT.namespace


@pytest.fixture
def cluster(fake_kube: Any) -> tuple[Any, dpd_cluster.ProbeKubelet]:
    dpd_cluster.healthy(fake_kube, ENDPOINT)
    dpd_cluster.add_free_nodes(fake_kube)
    kubelet = dpd_cluster.ProbeKubelet()
    fake_kube.on_pod_created, fake_kube.exec = kubelet, dpd_cluster.WorkerShell()
    return fake_kube, kubelet


def probe_pods(fake: Any) -> list[str]:
    return [p["metadata"]["name"] for p in fake.pods if p["metadata"]["name"].startswith("hpdpd-probe-")]


def test_the_probe_pods_take_one_efa_device_on_the_free_nodes_and_no_gpu(cluster: Any) -> None:
    fake, kubelet = cluster
    # WHEN the probe runs
    report = run_probe(fake.client(), ENDPOINT, iec=IEC, token="abc123")
    server, client = kubelet.created
    # THEN the server ran on the free decode node and the client on the free prefill node, with the server's IP
    assert server["spec"]["nodeName"] == "p5-decode-1" and client["spec"]["nodeName"] == "p5-prefill-1"
    assert {"name": "HPDPD_PROBE_SERVER", "value": "10.1.0.7"} in client["spec"]["containers"][0]["env"]
    for document in (server, client):
        spec, container = document["spec"], document["spec"]["containers"][0]
        # AND each takes one EFA device, no GPU (and hides the node's GPUs from the NVIDIA runtime)
        assert container["resources"]["requests"]["vpc.amazonaws.com/efa"] == "1"
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"
        assert "nvidia.com/gpu" not in container["resources"]["requests"]
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"]
        # AND runs as the workers do, stops itself after the deadline, and carries the run's labels
        assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert spec["activeDeadlineSeconds"] == 660 and spec["restartPolicy"] == "Never"
        assert spec["automountServiceAccountToken"] is False
        assert document["metadata"]["labels"]["hyperpod-dpd/probe"] == "abc123"
        assert "fi_pingpong -e rdm -p efa -S 4194304 -I 1000" in container["command"][2]
    # AND both are deleted; the report names them
    assert report.created == (server["metadata"]["name"], client["metadata"]["name"]) and probe_pods(fake) == []
    assert report.bandwidth.outcome == "measured" and report.bandwidth.gbps == pytest.approx(11.5)
    assert fake.calls("DELETE") == [f"/api/v1/namespaces/{NS}/pods/{n}" for n in report.created]


def test_an_interrupt_while_waiting_deletes_the_pods_and_propagates(cluster: Any) -> None:
    fake, kubelet = cluster
    kubelet.start = False  # the server stays Pending, so the probe sleeps

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_probe(fake.client(), ENDPOINT, iec=IEC, sleep=interrupt)
    assert len(kubelet.created) == 1 and probe_pods(fake) == []


def test_a_pod_that_cannot_be_deleted_is_reported(cluster: Any) -> None:
    fake, _ = cluster
    fake.fail(f"/api/v1/namespaces/{NS}/pods/hpdpd-probe-", 500, "etcd unavailable", methods=("DELETE",))
    report = run_probe(fake.client(), ENDPOINT, iec=IEC)
    cleanup = next(c for c in report.checks(floor_gbps=1.0) if c.name == "probe:cleanup")
    assert report.left_behind == report.created and cleanup.status == "fail"
    assert f"kubectl delete pod -n {NS} {' '.join(report.created)}" in (cleanup.cause or "")


def test_a_denied_create_propagates_and_leaves_nothing(cluster: Any) -> None:
    fake, _ = cluster
    fake.fail(f"/api/v1/namespaces/{NS}/pods", 403, 'pods is forbidden: cannot create resource "pods"',
              methods=("POST",))
    with pytest.raises(KubeError) as raised:
        run_probe(fake.client(), ENDPOINT, iec=IEC)
    assert raised.value.cause == "access_denied" and "needs create on pods in namespace llm-serving" in \
        raised.value.reason
    assert probe_pods(fake) == []


def test_a_pod_the_kubelet_refuses_is_not_a_measurement(cluster: Any) -> None:
    fake, kubelet = cluster

    def refuse(fake_api: Any, document: dict[str, Any]) -> None:
        kubelet.created.append(document)
        document["status"] = {"phase": "Failed", "reason": "OutOfvpc.amazonaws.com/efa",
                              "message": "Pod was rejected: Node didn't have enough resource"}

    fake.on_pod_created = refuse
    report = run_probe(fake.client(), ENDPOINT, iec=IEC)
    assert report.bandwidth.outcome == "not-run" and "OutOfvpc.amazonaws.com/efa" in report.bandwidth.detail
    rows = {c.name: c for c in report.checks(floor_gbps=1.0)}
    assert rows["probe:bandwidth"].status == "warn" and rows["probe:provider:decode"].status == "pass"  # workers
    assert probe_pods(fake) == []


def test_nodes_in_another_az_or_serving_the_iec_are_not_used(cluster: Any) -> None:
    fake, kubelet = cluster
    free_decode = next(n for n in fake.nodes if n["metadata"]["name"] == "p5-decode-1")
    free_decode["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-west-2b"
    report = run_probe(fake.client(), ENDPOINT, iec=IEC)
    assert kubelet.created == [] and report.bandwidth.outcome == "not-run"
    assert "no prefill-group and decode-group nodes with free EFA devices in one AZ" in report.bandwidth.detail


def test_the_options_refuse_what_fi_pingpong_cannot_send() -> None:
    with pytest.raises(ValueError, match="fi_pingpong's largest message"):
        ProbeOptions(message_bytes=8 * 1024 * 1024)
    with pytest.raises(ValueError):
        ProbeOptions(timeout_seconds=0)


def test_an_image_without_fi_info_warns_naming_the_probe_image(cluster: Any) -> None:
    fake, kubelet = cluster
    # GIVEN neither the workers nor the probe pods find fi_info in the image
    fake.exec = dpd_cluster.WorkerShell(fi_info=dpd_cluster.NOT_FOUND, fi_exit=127)
    kubelet.server_fi_info, kubelet.server_fi_exit = dpd_cluster.NOT_FOUND, 127
    report = run_probe(fake.client(), ENDPOINT, iec=IEC)
    rows = {c.name: c for c in report.checks(floor_gbps=1.0)}
    # THEN nothing passes: the provider rows warn and the bandwidth row says the tool is missing
    assert rows["probe:provider:decode"].status == "warn" and "--probe-image" in (rows["probe:provider:decode"].cause
                                                                                 or "")
    assert report.bandwidth.outcome == "missing" and rows["probe:bandwidth"].status == "warn"
    assert probe_pods(fake) == []


def test_an_image_without_the_efa_provider_fails_and_measures_nothing(cluster: Any) -> None:
    fake, kubelet = cluster
    # GIVEN libfabric in the image lists no efa provider on the free decode node (fi_getinfo: -61)
    kubelet.server_fi_info, kubelet.server_fi_exit = dpd_cluster.FI_INFO_NONE, 61
    report = run_probe(fake.client(), ENDPOINT, iec=IEC)
    rows = {c.name: c for c in report.checks(floor_gbps=1.0)}
    # THEN the decode provider row fails naming the probe pod, the client was never started, and nothing is measured
    assert rows["probe:provider:decode"].status == "fail" and "in probe pod" in (rows["probe:provider:decode"].cause
                                                                                 or "")
    assert len(kubelet.created) == 1 and rows["probe:bandwidth"].status == "warn"
    assert "no EFA path to measure" in (rows["probe:bandwidth"].cause or "") and probe_pods(fake) == []
