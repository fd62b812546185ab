"""``hpdpd verify``: the KV-fabric gate against a fake Kubernetes API server and a fake Prometheus.

Each failing case breaks one thing of a healthy endpoint and expects the failing row to name its likely cause.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main
from hyperpod_dpd.config import load_environment
from tests.fakes import dpd_cluster, kube_api, prometheus

ENDPOINT = load_environment("dev").endpoints[0]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[kube_api.FakeKube, str]]:
    """A healthy endpoint on a fake API server, and a kubeconfig that points at it."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("HPDPD_PROMETHEUS_URL", raising=False)
    with kube_api.serve() as fake:
        dpd_cluster.healthy(fake, ENDPOINT)
        yield fake, fake.kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def metrics() -> Iterator[prometheus.FakePrometheus]:
    """60 GB moved in 1 s of transfer time over the window: 60 GB/s, 15 % of p5's 400 GB/s EFA line rate."""
    with prometheus.serve() as fake:
        fake.series = {"vllm:nixl_bytes_transferred_sum": 60e9, "vllm:nixl_xfer_time_seconds_sum": 1.0}
        yield fake


def verify(kubeconfig: str, *extra: str, output: str = "json") -> list[str]:
    return ["verify", "--env", "dev", "--endpoint", ENDPOINT.name, "--kubeconfig", kubeconfig, "--output", output,
            *extra]


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, dict[str, Any], str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (report,) = data["endpoints"]
    return {c["name"]: c for c in report["checks"]}


def test_a_healthy_fabric_passes(cluster: Any, metrics: prometheus.FakePrometheus,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    # WHEN verify reads the cluster and the metrics of a healthy transfer
    code, data, err = run_json(capsys, verify(kubeconfig, "--prometheus", metrics.url))
    # THEN every check passes and the throughput is reported in GB/s and as a share of the EFA line rate
    assert code == 0 and data["ok"] is True and err == ""
    assert {name: row["status"] for name, row in rows(data).items()} == dict.fromkeys(
        ["iec", "pods:prefill", "pods:decode", "same-az", "separate-nodes", "efa:prefill", "efa:decode",
         "transfer-backend", "kv-throughput"], "pass")
    (report,) = data["endpoints"]
    assert report["iec"] == ENDPOINT.resource_name and report["line_rate_gbps"] == 400.0
    assert report["throughput"] == {"gbps": 60.0, "bytes": 60e9, "seconds": 1.0, "source": "prometheus",
                                    "line_rate_fraction": 0.15}
    # AND the metrics were selected by the IEC's namespace and resource name, in either metric spelling
    assert any('resource_name="llama-3-3-70b-9b9be6"' in q and "vllm[:_]nixl_bytes_transferred_sum" in q
               for q in metrics.queries)


def test_without_prometheus_the_decoder_log_is_measured(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    code, data, _ = run_json(capsys, verify(kubeconfig))
    kv = rows(data)["kv-throughput"]
    # 0.2344 GiB in 25 ms: ~10 GB/s, a pass of the 1 GB/s floor but under 10 % of the line rate: a warning, exit 0
    assert code == 0 and kv["status"] == "warn" and "from the decoder log" in kv["detail"]
    assert data["endpoints"][0]["throughput"]["source"] == "decoder log"


def _zones(fake: kube_api.FakeKube) -> None:
    fake.nodes[1]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-west-2b"


def _one_node(fake: kube_api.FakeKube) -> None:
    decode = next(p for p in fake.pods if p["metadata"]["name"].startswith("decode-"))
    decode["spec"]["nodeName"] = "p5-prefill-0"


def _no_efa(fake: kube_api.FakeKube) -> None:
    for item in fake.pods:
        for container in item["spec"]["containers"]:
            for kind in ("requests", "limits"):
                container.get("resources", {}).get(kind, {}).pop("vpc.amazonaws.com/efa", None)


def _tcp(fake: kube_api.FakeKube) -> None:
    for item in fake.pods:
        item["spec"]["containers"][0]["env"] = [{"name": "LMCACHE_NIXL_BACKENDS", "value": '["UCX"]'},
                                                {"name": "UCX_TLS", "value": "tcp"}]
    for key, text in list(fake.logs.items()):
        fake.logs[key] = text.replace("Backend LIBFABRIC", "Backend UCX")


@pytest.mark.parametrize(("breakage", "check", "cause"), [
    (_zones, "same-az", "EFA does not cross Availability Zones"),
    (_one_node, "separate-nodes", "both roles landed on one node"),
    (_no_efa, "efa:decode", "requests no vpc.amazonaws.com/efa"),
    (_tcp, "transfer-backend", "moves over TCP, not EFA"),
], ids=["two-azs", "one-node", "no-efa", "tcp-backend"])
def test_a_broken_fabric_fails_naming_the_cause(cluster: Any, metrics: prometheus.FakePrometheus,
                                                capsys: pytest.CaptureFixture[str], breakage: Any, check: str,
                                                cause: str) -> None:
    fake, kubeconfig = cluster
    # GIVEN a healthy endpoint with one thing broken
    breakage(fake)
    # WHEN it is verified
    code, data, _ = run_json(capsys, verify(kubeconfig, "--prometheus", metrics.url))
    # THEN the run fails (exit 1) and the failing row names the likely cause
    assert code == 1 and data["ok"] is False
    assert rows(data)[check]["status"] == "fail" and cause in rows(data)[check]["cause"]


def test_half_a_gigabyte_per_second_fails_as_efa_not_in_use(cluster: Any, metrics: prometheus.FakePrometheus,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    metrics.series = {"vllm:nixl_bytes_transferred_sum": 0.5e9, "vllm:nixl_xfer_time_seconds_sum": 1.0}
    code, data, _ = run_json(capsys, verify(kubeconfig, "--prometheus", metrics.url))
    kv = rows(data)["kv-throughput"]
    assert code == 1 and kv["status"] == "fail" and kv["detail"].startswith("0.50 GB/s (0.1% of the 400 GB/s")
    assert "EFA is not in use" in kv["cause"] and "floor 1 GB/s" in kv["detail"]


def test_the_floor_is_configured_per_endpoint(cluster: Any, metrics: prometheus.FakePrometheus, tmp_path: Path,
                                              write_config: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    # GIVEN dev's endpoint with a floor of 100 GB/s, and 60 GB/s measured
    config_dir = write_config(lambda d: d["endpoints"][0].__setitem__("kv_transfer", {"min_gbps": 100}))
    code, data, _ = run_json(capsys, [*verify(kubeconfig, "--prometheus", metrics.url), "--config-dir",
                                      str(config_dir)])
    assert code == 1 and "floor 100 GB/s" in rows(data)["kv-throughput"]["detail"]


def test_the_table_names_the_cause(cluster: Any, metrics: prometheus.FakePrometheus,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    _zones(fake)
    code = main(verify(kubeconfig, "--prometheus", metrics.url, output="table"))
    out = capsys.readouterr().out
    assert code == 1 and "Likely cause" in out and "FAIL" in out and "same-az" in out
    assert "8 pass, 0 warn, 1 fail" in " ".join(out.split())


@pytest.mark.parametrize(("fault", "expected"), [
    ({"prefix": "/api/v1/namespaces/llm-serving/pods", "status": 403,
      "message": 'pods is forbidden: User "ci" cannot list resource "pods"'},
     "403 Forbidden: pods is forbidden"),
    ({"prefix": "/api/v1/nodes", "delay": 2.0}, "timed out"),
], ids=["denied", "timeout"])
def test_a_cluster_that_cannot_be_read_ends_with_one_line(cluster: Any, capsys: pytest.CaptureFixture[str],
                                                          fault: dict[str, Any], expected: str) -> None:
    fake, kubeconfig = cluster
    prefix = fault.pop("prefix")
    fake.fail(prefix, **fault)
    code = main(verify(kubeconfig, "--request-timeout", "0.5"))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"hpdpd: error: cannot verify {ENDPOINT.name}") and expected in captured.err
    if "denied" in expected or "403" in expected:
        assert "; needs list on pods in namespace llm-serving" in captured.err


def test_unreachable_api_server_and_prometheus_end_with_one_line(tmp_path: Path, cluster: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    with prometheus.serve() as gone:
        url = gone.url  # stopped when the block ends: nothing listens there any more
    code = main(verify(kubeconfig, "--prometheus", url))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"cannot reach {url}" in err
    closed = kube_api.FakeKube(url=url).kubeconfig(tmp_path / "closed")
    code = main(verify(closed))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot reach the Kubernetes API server" in err
