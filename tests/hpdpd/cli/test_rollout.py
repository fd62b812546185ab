"""``hpdpd rollout status|promote|abort``: blue/green IEC generations against the fake API server.

The serving generation ``llama-3-3-70b-0ld000`` runs on one node per role; dev's configuration renders a new
generation (its ``resource_name``), for which the fake cluster has a second, free node per role.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main
from hyperpod_dpd.config import load_environment
from tests.fakes import dpd_cluster, kube_api, prometheus
from tests.hpdpd.cli.test_smoke import Router

ENDPOINT = load_environment("dev").endpoints[0]
OLD = f"{ENDPOINT.name}-0ld000"
NEW = ENDPOINT.resource_name
NS = ENDPOINT.namespace


def host(iec: str) -> str:
    return f"{iec}-{NS}-routing-service.hyperpod-inference-system.svc.cluster.local"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[kube_api.FakeKube, str]]:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("HPDPD_PROMETHEUS_URL", raising=False)
    with kube_api.serve() as fake:
        dpd_cluster.healthy(fake, ENDPOINT, iec=OLD)
        fake.nodes += [kube_api.node("p5-prefill-1", role="prefill"), kube_api.node("p5-decode-1", role="decode")]

        def start(fake: kube_api.FakeKube, document: dict[str, Any]) -> None:
            # the operator brings the new generation up on the free nodes
            name = document["metadata"]["name"]
            del fake.iecs[(NS, name)]
            dpd_cluster.add_generation(fake, iec=name, namespace=NS, endpoint=ENDPOINT.name,
                                       prefill_node="p5-prefill-1", decode_node="p5-decode-1")

        fake.on_iec_created = start
        yield fake, fake.kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def checks() -> Iterator[tuple[str, str]]:
    """A router that streams the same text to every prompt, and metrics of a healthy transfer."""
    Router.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    with prometheus.serve() as metrics:
        metrics.series = {"vllm:nixl_bytes_transferred_sum": 60e9, "vllm:nixl_xfer_time_seconds_sum": 1.0}
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions", metrics.url
    server.shutdown()
    server.server_close()


def rollout(action: str, kubeconfig: str, *extra: str, output: str = "json") -> list[str]:
    return ["rollout", action, "--env", "dev", "--endpoint", ENDPOINT.name, "--kubeconfig", kubeconfig,
            "--output", output, "--interval", "0.05", *extra]


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, dict[str, Any], str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def test_promote_switches_the_client_service_only_after_readiness_and_checks(
        cluster: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    url, metrics = checks
    # WHEN the configured generation is promoted
    code, data, err = run_json(capsys, rollout("promote", kubeconfig, "--url", url, "--prometheus", metrics))
    # THEN it was created beside the old one, became ready, passed smoke and verify, took the client Service, and
    # only then was the old generation deleted
    assert code == 0 and data["ok"] is True and data["outcome"] == "promoted", err
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == host(NEW)
    assert set(fake.iecs) == {(NS, NEW)}
    methods = [(m, path) for m, path, _ in fake.requests]
    create = methods.index(("POST", f"{kube_api.IEC_PREFIX}{NS}/inferenceendpointconfigs"))
    patch = methods.index(("PATCH", f"/api/v1/namespaces/{NS}/services/{ENDPOINT.name}"))
    delete = methods.index(("DELETE", f"{kube_api.IEC_PREFIX}{NS}/inferenceendpointconfigs/{OLD}"))
    ready = min(i for i, (m, p) in enumerate(methods) if p.endswith(f"inferenceendpointconfigs/{NEW}") and m == "GET")
    log_reads = [i for i, (_, p) in enumerate(methods) if "/log" in p]
    assert create < ready < min(log_reads) and max(log_reads) < patch < delete
    assert len(Router.bodies) == 3  # the short prompt and the long one twice, to the new generation
    assert data["steps"][0] == f"created {NEW}" and data["steps"][-1] == f"deleted {OLD}"
    # AND the created IEC is the one the endpoints chart renders
    (posted,) = [b for m, _, b in fake.requests if m == "POST"]
    assert posted["kind"] == "InferenceEndpointConfig" and posted["metadata"]["labels"]["hyperpod-dpd/endpoint"] == \
        ENDPOINT.name


def test_without_a_url_the_new_router_is_smoked_through_the_api_servers_service_proxy(
        cluster: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    _, metrics = checks
    proxied: list[tuple[str, str, str]] = []

    def router(namespace: str, service: str, path: str, body: Any) -> str:
        proxied.append((namespace, service, path))
        return "".join(f'data: {{"choices":[{{"delta":{{"content":"w{i}"}}}}]}}\n\n' for i in range(3)) + \
            "data: [DONE]\n\n"

    fake.proxy = router
    # WHEN the configured generation is promoted from outside the cluster (no --url, as the pipeline runs it)
    code, data, err = run_json(capsys, rollout("promote", kubeconfig, "--prometheus", metrics))
    # THEN its router was reached through the API server, at the new generation's routing Service, and it was promoted
    assert code == 0 and data["outcome"] == "promoted", err
    assert len(proxied) == 3 and {p[:2] for p in proxied} == {
        ("hyperpod-inference-system", f"http:{NEW}-{NS}-routing-service:443")}
    assert proxied[0][2] == ENDPOINT.invocation_path.lstrip("/")


def test_a_generation_that_fails_its_checks_is_not_promoted(cluster: Any, checks: tuple[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    url, metrics = checks
    fake.nodes[-1]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-west-2b"  # the new decoder's node
    code, data, err = run_json(capsys, rollout("promote", kubeconfig, "--url", url, "--prometheus", metrics))
    assert code == 1 and data["outcome"] == "failed" and f"{OLD} keeps serving" in data["message"]
    assert any(f.startswith("verify same-az") for f in data["failures"])
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == host(OLD)
    assert (NS, OLD) in fake.iecs


def test_abort_leaves_the_old_generation_serving(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN the new generation runs beside the old one
    dpd_cluster.add_generation(fake, iec=NEW, namespace=NS, endpoint=ENDPOINT.name, prefill_node="p5-prefill-1",
                               decode_node="p5-decode-1")
    code, data, _ = run_json(capsys, rollout("status", kubeconfig))
    assert code == 1 and data["phase"] == "in-progress" and data["serving"] == OLD and data["desired"] == NEW
    # WHEN the rollout is aborted
    code, data, _ = run_json(capsys, rollout("abort", kubeconfig))
    # THEN the new generation is gone and the old one still serves through the unchanged client Service
    assert code == 0 and data["outcome"] == "aborted" and set(fake.iecs) == {(NS, OLD)}
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == host(OLD)
    assert fake.calls("PATCH") == []


def test_a_rollout_without_room_is_refused(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN no free GPUs beside the serving generation (one node per role, fully requested)
    fake.nodes = [n for n in fake.nodes if not n["metadata"]["name"].endswith("-1")]
    code = main(rollout("promote", kubeconfig, output="table"))
    captured = capsys.readouterr()
    # THEN nothing is created and one line says why, with the way out
    assert code == 1 and fake.calls("POST") == []
    assert "no room for a second generation beside the serving one (prefill: 0 free GPU(s) on 1 node(s), 1 pod(s) of " \
           "8 GPU(s) needed" in captured.err and "--in-place" in captured.err
    assert "room for the new generation" in captured.out


def test_status_of_a_steady_endpoint(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    fake.iecs.clear()
    dpd_cluster.add_generation(fake, iec=NEW, namespace=NS, endpoint=ENDPOINT.name)
    fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] = host(NEW)
    code, data, _ = run_json(capsys, rollout("status", kubeconfig))
    assert code == 0 and data["phase"] == "steady" and data["serving"] == NEW
    code = main(rollout("status", kubeconfig, output="table"))
    assert code == 0 and "Generation" in capsys.readouterr().out


@pytest.mark.parametrize("action", ["status", "promote", "abort"])
def test_a_denied_or_unreachable_cluster_ends_with_one_line(cluster: Any, tmp_path: Path, action: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    fake.fail(kube_api.IEC_PREFIX.removesuffix("namespaces/"), 403, "inferenceendpointconfigs is forbidden")
    code = main(rollout(action, kubeconfig))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "403 Forbidden" in captured.err and "; needs list on inferenceendpointconfigs" in captured.err
    with kube_api.serve() as gone:
        url = gone.url
    code = main(rollout(action, kube_api.FakeKube(url=url).kubeconfig(tmp_path / "gone"), "--request-timeout", "1"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot reach the Kubernetes API server" in err
