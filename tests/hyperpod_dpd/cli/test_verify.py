"""``hpdpd verify``: the KV-fabric gate against a fake Kubernetes API server and a fake Prometheus.

Each failing case breaks one thing of a healthy endpoint and expects the failing row to name its likely cause. The
measured transfer is the prefill side's (LMCache's store put_time); the decoder's retrieve is only its KV load time.
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
PREFILL, DECODE = f"prefill-{ENDPOINT.resource_name}-6f9c-x1", f"decode-{ENDPOINT.resource_name}-7a8b-y1"
GIB = 1024**3


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
    """A Prometheus that holds vLLM NixlConnector series: 30 GB moved in 1 s of transfer time."""
    with prometheus.serve() as fake:
        fake.series = {"vllm:nixl_bytes_transferred_sum": 30e9, "vllm:nixl_xfer_time_seconds_sum": 1.0}
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


def set_log(fake: kube_api.FakeKube, pod: str, text: str) -> None:
    key = next(k for k in fake.logs if k[1] == pod)
    fake.logs[key] = text


def set_args(fake: kube_api.FakeKube, args: list[str]) -> None:
    for item in fake.pods:
        if item["metadata"]["name"] in (PREFILL, DECODE):
            item["spec"]["containers"][0]["args"] = args


def test_a_healthy_fabric_passes_on_the_prefill_side(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    # WHEN verify reads a healthy endpoint (libfabric on efa in the NIXL log, LMCache store lines on the prefiller)
    code, data, err = run_json(capsys, verify(kubeconfig))
    # THEN every check passes
    assert code == 0 and data["ok"] is True and err == ""
    assert {name: row["status"] for name, row in rows(data).items()} == dict.fromkeys(
        ["iec", "pods:prefill", "pods:decode", "same-az", "separate-nodes", "efa:prefill", "efa:decode",
         "transfer-backend", "kv-throughput", "kv-retrieve"], "pass")
    (report,) = data["endpoints"]
    # AND the throughput is the prefill side's per rank: 0.2344 GiB per rank written in a 6 ms put, against the
    # 50 GB/s a p5 GPU owns of the instance's 3,200 Gbit/s
    per_rank = 0.2344 * GIB / 0.006 / 1e9
    assert report["connector"] == "LMCacheConnectorV1" and report["rank_line_rate_gbps"] == 50.0
    assert report["throughput"]["per"] == "rank" and report["throughput"]["lower_bound"] is False
    assert report["throughput"]["gbps"] == pytest.approx(per_rank, abs=0.001)
    assert report["throughput"]["source"].startswith("prefill log: LMCache store put_time")
    assert report["throughput"]["line_rate_fraction"] == pytest.approx(per_rank / 50, abs=1e-4)
    # AND the decoder's retrieve is reported as its KV load time, not as a transfer rate
    assert report["decoder_kv_load"] == {"lines": 1, "gib": 0.2344, "total_ms": 25.0, "mean_ms": 25.0}
    assert "libfabric on the efa provider" in rows(data)["transfer-backend"]["detail"]
    assert "NIXL discovered 32 efa device(s)" in rows(data)["transfer-backend"]["detail"]


def test_nixl_connector_metrics_are_read_only_for_vllms_nixl_connector(
        cluster: Any, metrics: prometheus.FakePrometheus, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN an LMCache endpoint whose prefill log holds no store line, and a Prometheus with NIXL-connector series
    set_log(fake, PREFILL, dpd_cluster.PREFILL_STARTUP + dpd_cluster.NIXL_EFA)
    code, data, _ = run_json(capsys, verify(kubeconfig, "--prometheus", metrics.url))
    # THEN those series are not read (LMCacheConnectorV1 never registers them) and nothing is measured: a warning
    kv = rows(data)["kv-throughput"]
    assert code == 0 and kv["status"] == "warn" and not any("nixl" in q for q in metrics.queries)
    assert "connector LMCacheConnectorV1" in kv["detail"]
    # WHEN the workers run vLLM's NixlConnector
    set_args(fake, ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'])
    code, data, _ = run_json(capsys, verify(kubeconfig, "--prometheus", metrics.url))
    (report,) = data["endpoints"]
    # THEN they are, selected by the IEC's namespace and resource name in either spelling of the metric name
    assert code == 0 and rows(data)["kv-throughput"]["status"] == "pass" and report["connector"] == "NixlConnector"
    assert report["throughput"]["gbps"] == 30.0 and "NixlConnector" in report["throughput"]["source"]
    assert any(f'resource_name="{ENDPOINT.resource_name}"' in q and "vllm[:_]nixl_bytes_transferred_sum" in q
               for q in metrics.queries)


def test_an_unknown_connector_never_trusts_nixl_connector_series(
        cluster: Any, metrics: prometheus.FakePrometheus, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN workers whose arguments name no --kv-transfer-config, and no store line in the prefill log
    set_args(fake, ["--model", "/opt/ml/model"])
    set_log(fake, PREFILL, dpd_cluster.PREFILL_STARTUP)
    code, data, _ = run_json(capsys, verify(kubeconfig, "--prometheus", metrics.url))
    kv = rows(data)["kv-throughput"]
    # THEN the NIXL-connector series are not read and the row says why nothing was measured
    assert code == 0 and kv["status"] == "warn" and data["endpoints"][0]["connector"] is None
    assert not any("nixl" in q for q in metrics.queries) and "connector unknown" in kv["detail"]


def test_the_prefill_store_series_give_an_estimate_that_never_passes(cluster: Any,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    set_log(fake, PREFILL, dpd_cluster.PREFILL_STARTUP + dpd_cluster.NIXL_EFA)
    # GIVEN no store line in the log, but LMCache's store series: 1,000,000 tokens stored in 2 s of store time
    with prometheus.serve() as series:
        series.series = {"lmcache:time_to_store_sum": 2.0, "lmcache:num_stored_tokens_total": 1e6}
        code, data, _ = run_json(capsys, verify(kubeconfig, "--prometheus", series.url))
    (report,) = data["endpoints"]
    # THEN bytes are tokens x 40,960 (Llama 3.3 70B: 80 layers x 1 KV head per rank of TP 8 x 128 x 2 x BF16), per rank
    assert report["throughput"]["bytes"] == 1e6 * 40960 and report["throughput"]["estimate"] is True
    # AND 20.5 GB/s per rank, well above the floor, only WARNs: a count taken when a store starts can read high
    kv = rows(data)["kv-throughput"]
    assert code == 0 and kv["status"] == "warn" and "cannot pass" in kv["detail"] and "INFO store lines" in kv["cause"]
    # AND the store series were selected on the prefill pods of the IEC
    store = [q for q in series.queries if "lmcache" in q]
    assert store and all('pod_name=~"prefill-.*"' in q and f'resource_name="{ENDPOINT.resource_name}"' in q
                         for q in store)


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


def _ucx(fake: kube_api.FakeKube) -> None:
    for item in fake.pods:
        item["spec"]["containers"][0]["env"] = [{"name": "LMCACHE_NIXL_BACKENDS", "value": '["UCX"]'},
                                                {"name": "UCX_TLS", "value": "tcp"}]
    for key, text in list(fake.logs.items()):
        fake.logs[key] = text.replace("Backend LIBFABRIC", "Backend UCX")


def _libfabric_on_tcp(fake: kube_api.FakeKube) -> None:
    """LIBFABRIC instantiated, but NIXL's plugin found only libfabric's tcp provider (an image without EFA's)."""
    for item in fake.pods:
        item["spec"]["containers"][0]["env"] = [{"name": "LMCACHE_NIXL_BACKENDS", "value": "LIBFABRIC"},
                                                {"name": "NIXL_LOG_LEVEL", "value": "INFO"}]
    for key, text in list(fake.logs.items()):
        fake.logs[key] = text.replace(dpd_cluster.NIXL_EFA, dpd_cluster.NIXL_TCP)


def _no_gpudirect(fake: kube_api.FakeKube) -> None:
    """libfabric on efa, but its provider lacks FI_HMEM: NIXL registers the GPU buffer as system memory (NIXL 1.0.1
    libfabric_rail.cpp:1344, a WARN line, printed at NIXL's default level)."""
    for key, text in list(fake.logs.items()):
        if key[1] in (PREFILL, DECODE):
            fake.logs[key] = text.replace(dpd_cluster.NIXL_EFA, dpd_cluster.NIXL_EFA + (
                "W1201 21:55:02.000000  4242 libfabric_rail.cpp:1344] VRAM memory requested but provider does not "
                "support FI_HMEM - falling back to system memory registration\n"))


def _recomputed(fake: kube_api.FakeKube) -> None:
    set_log(fake, DECODE, dpd_cluster.STARTUP + dpd_cluster.NIXL_EFA
            + dpd_cluster.RETRIEVED.replace("Retrieved 6035 out of", "Retrieved 0 out of") + "\n")


def _slow(fake: kube_api.FakeKube) -> None:
    set_log(fake, PREFILL, dpd_cluster.PREFILL_STARTUP + dpd_cluster.NIXL_EFA + dpd_cluster.stored(0.2344, put_ms=500.0))


@pytest.mark.parametrize(("breakage", "check", "cause"), [
    (_zones, "same-az", "EFA does not cross Availability Zones"),
    (_one_node, "separate-nodes", "both roles landed on one node"),
    (_no_efa, "efa:decode", "requests no vpc.amazonaws.com/efa"),
    (_ucx, "transfer-backend", "NIXL's UCX backend"),
    (_libfabric_on_tcp, "transfer-backend", "LIBFABRIC on libfabric's tcp provider"),
    (_slow, "kv-throughput", "EFA is not in use"),
    (_no_gpudirect, "transfer-backend", "GPUDirect RDMA is off"),
    (_recomputed, "kv-retrieve", "the decoder recomputed the prefill"),
], ids=["two-azs", "one-node", "no-efa", "ucx-backend", "libfabric-on-tcp", "half-a-gigabyte", "no-gpudirect",
        "decoder-recomputed"])
def test_a_broken_fabric_fails_naming_the_cause(cluster: Any, capsys: pytest.CaptureFixture[str], breakage: Any,
                                                check: str, cause: str) -> None:
    fake, kubeconfig = cluster
    # GIVEN a healthy endpoint with one thing broken
    breakage(fake)
    # WHEN it is verified
    code, data, _ = run_json(capsys, verify(kubeconfig))
    # THEN the run fails (exit 1) and the failing row names the likely cause
    assert code == 1 and data["ok"] is False
    assert rows(data)[check]["status"] == "fail" and cause in rows(data)[check]["cause"]


def test_libfabric_without_evidence_of_the_efa_provider_warns(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN FI_PROVIDER=efa declared and 'Backend LIBFABRIC was instantiated', but no line naming the provider
    for key, text in list(fake.logs.items()):
        fake.logs[key] = text.replace(dpd_cluster.NIXL_EFA, "")
    code, data, _ = run_json(capsys, verify(kubeconfig))
    backend = rows(data)["transfer-backend"]
    # THEN the row warns (a declared variable is not the effective environment) and names how to prove it
    assert code == 0 and backend["status"] == "warn" and "hpdpd verify --probe" in backend["cause"]
    assert "FI_PROVIDER=efa (spec env)" in backend["detail"]


def test_the_floor_is_configured_per_endpoint(cluster: Any, write_config: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    # GIVEN dev's endpoint with a floor of 100 GB/s, and ~42 GB/s per rank measured
    config_dir = write_config(lambda d: d["endpoints"][0].__setitem__("kv_transfer", {"min_gbps": 100}))
    code, data, _ = run_json(capsys, [*verify(kubeconfig), "--config-dir", str(config_dir)])
    assert code == 1 and "floor 100 GB/s" in rows(data)["kv-throughput"]["detail"]


def test_the_table_names_the_cause_and_the_decoder_load(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    _zones(fake)
    code = main(verify(kubeconfig, output="table"))
    out = capsys.readouterr().out
    assert code == 1 and "Likely cause" in out and "FAIL" in out and "same-az" in out
    assert "9 pass, 0 warn, 1 fail" in " ".join(out.split())
    assert "decoder KV load time (a local copy from the decoder's PD buffer, not the fabric): 25.00 ms" in out


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
    if "403" in expected:
        assert "; needs list on pods in namespace llm-serving" in captured.err


def test_unreachable_api_server_and_prometheus_end_with_one_line(tmp_path: Path, cluster: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    set_log(fake, PREFILL, dpd_cluster.PREFILL_STARTUP)  # no store line: the Prometheus is asked
    with prometheus.serve() as gone:
        url = gone.url  # stopped when the block ends: nothing listens there any more
    code = main(verify(kubeconfig, "--prometheus", url))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"cannot reach {url}" in err
    closed = kube_api.FakeKube(url=url).kubeconfig(tmp_path / "closed")
    code = main(verify(closed))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot reach the Kubernetes API server" in err


# ---- --probe: fi_info and fi_pingpong where EFA devices are free, and inside the running workers -----------------


@pytest.fixture
def probed(cluster: Any) -> tuple[kube_api.FakeKube, str, dpd_cluster.ProbeKubelet, dpd_cluster.WorkerShell]:
    """The healthy endpoint, a free node in each GPU group, a kubelet for the probe pods, a shell in the workers."""
    fake, kubeconfig = cluster
    dpd_cluster.add_free_nodes(fake)
    kubelet, shell = dpd_cluster.ProbeKubelet(), dpd_cluster.WorkerShell()
    fake.on_pod_created, fake.exec = kubelet, shell
    return fake, kubeconfig, kubelet, shell


def probe_pods(fake: kube_api.FakeKube) -> list[str]:
    return [p["metadata"]["name"] for p in fake.pods if p["metadata"]["name"].startswith("hpdpd-probe-")]


def test_the_probe_passes_on_the_efa_provider_near_line_rate(probed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig, kubelet, shell = probed
    # GIVEN libfabric listing efa everywhere and fi_pingpong measuring 11.5 GB/s (p5: 12.5 GB/s per EFA device)
    code, data, _ = run_json(capsys, verify(kubeconfig, "--probe"))
    checks = rows(data)
    # THEN the probe rows pass and say where they measured
    assert code == 0 and {n: c["status"] for n, c in checks.items() if n.startswith("probe:")} == {
        "probe:provider:prefill": "pass", "probe:provider:decode": "pass", "probe:bandwidth": "pass"}
    assert "inside running worker" in checks["probe:provider:prefill"]["detail"]
    assert "in probe pod hpdpd-probe-" in checks["probe:provider:prefill"]["detail"]
    assert checks["probe:bandwidth"]["detail"].startswith(
        "11.50 GB/s between probe pods on p5-prefill-1 (prefill group) and p5-decode-1 (decode group)")
    assert "92% of one EFA device's 12.5 GB/s (a GPU's share is 50 GB/s over 4 device(s))" in \
        checks["probe:bandwidth"]["detail"]
    # AND the workers' effective environment proves the provider: the transfer row passes on it
    assert checks["transfer-backend"]["status"] == "pass" and "(effective env)" in checks["transfer-backend"]["detail"]
    probe = data["endpoints"][0]["probe"]
    assert all("HF_TOKEN" not in p.get("effective_env", {}) for p in probe["providers"])  # only fabric variables
    # AND the probe pods ran on the free nodes, from the workers' image, and are gone
    assert {d["spec"]["nodeName"] for d in kubelet.created} == {"p5-prefill-1", "p5-decode-1"}
    assert {d["spec"]["containers"][0]["image"] for d in kubelet.created} == {ENDPOINT.worker_image}
    assert len(probe["created"]) == 2 and probe["left_behind"] == [] and probe_pods(fake) == []


@pytest.mark.parametrize(("kubelet", "check", "status", "cause"), [
    ({"server_fi_info": dpd_cluster.FI_INFO_NONE, "server_fi_exit": 61}, "probe:provider:decode", "fail",
     "libfabric lists no efa provider in probe pod"),
    ({"rate": 2000.0}, "probe:bandwidth", "fail", "far below line rate"),
    ({"server_fi_info": dpd_cluster.NOT_FOUND, "server_fi_exit": 127}, "probe:bandwidth", "warn",
     "--probe-image"),
    ({"client_exit": 1}, "probe:bandwidth", "fail", "EFA security group must allow all traffic"),
], ids=["no-efa-provider-in-image", "two-gigabytes-per-second", "no-fi-info-in-image", "pingpong-fails"])
def test_the_probe_fails_or_warns_naming_the_cause(probed: Any, capsys: pytest.CaptureFixture[str],
                                                   kubelet: dict[str, Any], check: str, status: str,
                                                   cause: str) -> None:
    fake, kubeconfig, fake_kubelet, _ = probed
    # GIVEN what libfabric lists or measures in the image on the free nodes
    for key, value in kubelet.items():
        setattr(fake_kubelet, key, value)
    code, data, _ = run_json(capsys, verify(kubeconfig, "--probe"))
    # THEN the row fails or warns with the cause, and the probe pods are gone
    assert rows(data)[check]["status"] == status and cause in rows(data)[check]["cause"]
    assert code == (1 if status == "fail" else 0) and probe_pods(fake) == []


def test_a_probe_that_times_out_warns_and_leaves_no_pod(probed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig, kubelet, _ = probed
    # GIVEN a server pod that never starts (its image still pulling)
    kubelet.start = False
    code, data, _ = run_json(capsys, verify(kubeconfig, "--probe", "--probe-timeout", "0.3"))
    bandwidth = rows(data)["probe:bandwidth"]
    # THEN the bandwidth row warns with the pod's waiting reason, and the pod was deleted
    assert code == 0 and bandwidth["status"] == "warn" and "did not start in 0.3 s: ContainerCreating" in \
        bandwidth["detail"] and "--probe-timeout" in bandwidth["cause"]
    assert len(kubelet.created) == 1 and probe_pods(fake) == []


def test_sigterm_during_the_probe_deletes_its_pods(probed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import signal

    fake, kubeconfig, kubelet, _ = probed
    # GIVEN a SIGTERM arriving while the client pod is being created
    kubelet.on_client = lambda: os.kill(os.getpid(), signal.SIGTERM)
    previous = signal.getsignal(signal.SIGTERM)
    code = main(verify(kubeconfig, "--probe"))
    # THEN the command ends as interrupted, both probe pods are gone, and SIGTERM's handler is restored
    assert code == 130 and "interrupted" in capsys.readouterr().err
    assert len(kubelet.created) == 2 and probe_pods(fake) == [] and signal.getsignal(signal.SIGTERM) is previous


def test_without_free_devices_only_the_workers_are_probed(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN the serving pods hold every EFA device of their groups' nodes, and a worker image without the EFA provider
    fake.exec = dpd_cluster.WorkerShell(fi_info=dpd_cluster.FI_INFO_NONE, fi_exit=61)
    code, data, _ = run_json(capsys, verify(kubeconfig, "--probe"))
    checks = rows(data)
    # THEN the provider check inside the workers fails the transfer row, and the bandwidth row says why it did not run
    assert code == 1 and checks["transfer-backend"]["status"] == "fail"
    assert "lists no efa provider inside the worker" in checks["transfer-backend"]["cause"]
    assert checks["probe:provider:decode"]["status"] == "fail" and checks["probe:bandwidth"]["status"] == "warn"
    assert "every EFA device of its nodes is held" in checks["probe:bandwidth"]["detail"]
    assert "checked inside the running workers only" in checks["probe:bandwidth"]["detail"]
    assert probe_pods(fake) == []


def test_a_probe_that_may_not_exec_ends_with_one_line(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster  # no exec callback: the fake refuses pods/exec as RBAC would
    code = main(verify(kubeconfig, "--probe"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "; needs create on pods/exec in namespace llm-serving" in err


def test_a_probe_timeout_that_is_not_positive_is_refused(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    code = main(verify(kubeconfig, "--probe", "--probe-timeout", "0"))
    err = capsys.readouterr().err
    assert code == 2 and err == "hpdpd: error: --probe-timeout: 0 is not allowed; give a positive number of seconds\n"
    assert fake.requests == []  # refused before the cluster is asked


def test_efa_listed_only_by_another_probe_image_does_not_pass_the_workers(
        probed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig, kubelet, shell = probed
    # GIVEN workers whose image has no fi_info, and probe pods of another image (--probe-image) that list efa
    shell.fi_info, shell.fi_exit = dpd_cluster.NOT_FOUND, 127
    code, data, _ = run_json(capsys, verify(kubeconfig, "--probe", "--probe-image", "example.com/efa-tools:1"))
    checks = rows(data)
    # THEN the provider rows warn: the probe image's libfabric is not the workers'
    for role in ("prefill", "decode"):
        row = checks[f"probe:provider:{role}"]
        assert row["status"] == "warn" and "not of the workers' image" in row["cause"]
    assert probe_pods(fake) == []
