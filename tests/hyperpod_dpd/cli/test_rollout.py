"""``hpdpd rollout status|promote|abort``: blue/green IEC generations against the fake API server.

The serving generation ``llama-3-3-70b-01d000`` runs on one node per role, with the router NetworkPolicy (and, where
the configuration has one, the Ingress) the endpoints chart renders, re-named to it; the configuration renders a new
generation (its ``resource_name``), for which the fake cluster has a second, free node per role.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.ops.rollout_lease import LEASE_ANNOTATION, LeaseRecord
from tests.fakes import dpd_cluster, kube_api, prometheus
from tests.hyperpod_dpd.cli.test_smoke import Router
from tests.hyperpod_dpd.ops import rollout_cluster as rc

ENV = load_environment("dev")
ENDPOINT = ENV.endpoints[0]
OLD = rc.old_name(ENDPOINT)
NEW = ENDPOINT.resource_name
NS = ENDPOINT.namespace
IEC_PATH = f"{kube_api.IEC_PREFIX}{NS}/inferenceendpointconfigs"
SERVICE_PATH = f"/api/v1/namespaces/{NS}/services/{ENDPOINT.name}"


def exposed(data: dict[str, Any]) -> None:
    """dev with a SageMaker endpoint name, an Ingress and a one-second drain."""
    data["endpoints"][0].update({"sagemaker_endpoint_name": "llama-sm", "rollout": {"drain_seconds": 1},
                                 "router": {"allowed_cidrs": ["10.192.0.0/16"], "ingress": {"host": "llama.example.com"}}})


def fixed(data: dict[str, Any]) -> None:
    """dev with one SageMaker endpoint name for every generation (and no Ingress)."""
    data["endpoints"][0].update({"sagemaker_endpoint_name": "llama-sm", "router": {},
                                 "rollout": {"fixed_sagemaker_endpoint_name": True}})


@pytest.fixture(scope="module")
def charts() -> dict[str, dict[str, dict[str, Any]]]:
    """The chart objects of the configured generation, per configuration variant (each synthesized once)."""
    from tests.hyperpod_dpd.ops.rollout_cluster import environment

    return {"dev": rc.chart_objects(ENV, ENDPOINT),
            "exposed": rc.chart_objects(environment(exposed), ENDPOINT),
            "fixed": rc.chart_objects(environment(fixed), ENDPOINT)}


@pytest.fixture
def start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, charts: dict[str, Any], write_config: Callable[..., Path],
          ) -> Iterator[Callable[..., tuple[kube_api.FakeKube, list[str]]]]:
    """``start(variant)``: the fake cluster mid-rollout, and the arguments that reach it (kubeconfig, config dir)."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("HPDPD_PROMETHEUS_URL", raising=False)
    with kube_api.serve() as fake:
        def begin(variant: str = "dev") -> tuple[kube_api.FakeKube, list[str]]:
            endpoint = ENDPOINT if variant == "dev" else rc.environment(exposed if variant == "exposed" else fixed)\
                .endpoints[0]
            rc.seed(fake, endpoint, charts[variant])
            args = ["--kubeconfig", fake.kubeconfig(tmp_path / "kubeconfig")]
            if variant != "dev":
                args += ["--config-dir", str(write_config(exposed if variant == "exposed" else fixed))]
            return fake, args

        yield begin


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


def rollout(action: str, cluster: list[str], *extra: str, output: str = "json", drain: str | None = "0") -> list[str]:
    return ["rollout", action, "--env", "dev", "--endpoint", ENDPOINT.name, *cluster, "--output", output,
            "--interval", "0.05", "--lease-seconds", "60", *(["--drain", drain] if drain is not None else []), *extra]


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, dict[str, Any], str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def index(fake: kube_api.FakeKube, method: str, path: str, body: Callable[[Any], bool] = lambda b: True,
          after: int = -1) -> int:
    """Where the first matching request (after ``after``) is in the fake's log."""
    return next(i for i, (m, p, b) in enumerate(fake.requests) if i > after and m == method and p == path and body(b))


def test_promote_moves_the_policy_the_service_and_the_ingress_drains_then_deletes(
        start: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start("exposed")
    url, metrics = checks
    # WHEN the configured generation of an endpoint with an Ingress and a SageMaker endpoint name is promoted
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics, drain=None))
    assert code == 0 and data["ok"] is True and data["outcome"] == "promoted", err
    # THEN the new generation was created with its own SageMaker endpoint name, became ready and passed its checks
    (posted,) = [b for m, p, b in fake.requests if m == "POST" and p == IEC_PATH]
    assert posted["spec"]["endpointName"] == f"llama-sm-{ENDPOINT.generation}" != f"llama-sm-{rc.OLD_GENERATION}"
    created = index(fake, "POST", IEC_PATH)
    ready = index(fake, "GET", f"{IEC_PATH}/{NEW}", after=created)
    assert len(Router.bodies) == 3  # the short prompt and the long one twice, to the new generation
    # AND then, in this order: the router policy took both routers, the Service and the Ingress moved, the old
    # generation drained (rollout.drain_seconds: 1), was deleted, and the policy was narrowed to the new router
    policy = f"{rc.POLICIES}/{ENDPOINT.router_policy_name}"
    widen = index(fake, "PATCH", policy, lambda b: b["spec"]["podSelector"]["matchExpressions"] == [
        {"key": "app", "operator": "In", "values": [f"{OLD}-{NS}-router", f"{NEW}-{NS}-router"]}], after=ready)
    switch = index(fake, "PATCH", SERVICE_PATH, lambda b: "spec" in b, after=widen)
    ingress = index(fake, "PATCH", f"{rc.INGRESSES}/{ENDPOINT.ingress_name}", after=switch)
    delete = index(fake, "DELETE", f"{IEC_PATH}/{OLD}", after=ingress)
    index(fake, "PATCH", policy, lambda b: b["spec"]["podSelector"]["matchExpressions"] is None, after=delete)
    assert f"draining {OLD} for 1 s (open requests finish on the old router)" in data["steps"]
    # AND while the checks ran the lease was renewed before every prompt (each may wait longer than its 60 s)
    renewals = [i for i, (m, p, b) in enumerate(fake.requests) if ready < i < widen and m == "PATCH"
                and p == SERVICE_PATH and "spec" not in b and LEASE_ANNOTATION in b["metadata"]["annotations"]]
    assert len(renewals) >= len(Router.bodies) + 1  # and once more right before the policy moved
    # AND everything ends on the new generation, the lease released
    assert set(fake.iecs) == {(NS, NEW)} and data["serving_sagemaker_endpoint_name"] == posted["spec"]["endpointName"]
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(NEW, NS)
    assert rc.ingress_backends(fake, ENDPOINT) == [f"{NEW}-{NS}-routing-service"]
    assert rc.policy_selector(fake, ENDPOINT) == {"matchLabels": {"app": f"{NEW}-{NS}-router"}}
    assert rc.lease_text(fake, ENDPOINT) is None
    code, data, _ = run_json(capsys, rollout("status", cluster))
    assert code == 0 and data["phase"] == "steady"


def test_without_a_url_the_new_router_is_smoked_through_the_api_servers_service_proxy(
        start: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    _, metrics = checks
    proxied: list[tuple[str, str, str]] = []

    def router(namespace: str, service: str, path: str, body: Any) -> str:
        proxied.append((namespace, service, path))
        return "".join(f'data: {{"choices":[{{"delta":{{"content":"w{i}"}}}}]}}\n\n' for i in range(3)) + \
            "data: [DONE]\n\n"

    fake.proxy = router
    # WHEN the configured generation is promoted from outside the cluster (no --url, as the pipeline runs it)
    code, data, err = run_json(capsys, rollout("promote", cluster, "--prometheus", metrics))
    # THEN its router was reached through the API server, at the new generation's routing Service, and it was promoted
    assert code == 0 and data["outcome"] == "promoted", err
    assert len(proxied) == 3 and {p[:2] for p in proxied} == {
        ("hyperpod-inference-system", f"http:{NEW}-{NS}-routing-service:443")}
    assert proxied[0][2] == ENDPOINT.invocation_path.lstrip("/")


def test_a_generation_that_fails_its_checks_is_not_promoted(start: Any, checks: tuple[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    url, metrics = checks
    fake.nodes[-1]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-west-2b"  # the new decoder's node
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics))
    assert code == 1 and data["outcome"] == "failed" and f"{OLD} keeps serving" in data["message"]
    assert any(f.startswith("verify same-az") for f in data["failures"])
    # AND nothing that names the old generation moved, and no lease is left
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(OLD, NS)
    assert rc.policy_selector(fake, ENDPOINT) == {"matchLabels": {"app": f"{OLD}-{NS}-router"}}
    assert (NS, OLD) in fake.iecs and rc.lease_text(fake, ENDPOINT) is None


def test_abort_leaves_the_old_generation_serving(start: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fakes import dpd_cluster

    fake, cluster = start()
    # GIVEN the new generation runs beside the old one
    dpd_cluster.add_generation(fake, iec=NEW, namespace=NS, endpoint=ENDPOINT.name, prefill_node="p5-prefill-1",
                               decode_node="p5-decode-1")
    code, data, _ = run_json(capsys, rollout("status", cluster))
    assert code == 1 and data["phase"] == "in-progress" and data["serving"] == OLD and data["desired"] == NEW
    # WHEN the rollout is aborted
    code, data, _ = run_json(capsys, rollout("abort", cluster))
    # THEN the new generation is gone and the old one still serves through the unchanged client Service
    assert code == 0 and data["outcome"] == "aborted" and set(fake.iecs) == {(NS, OLD)}
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(OLD, NS)
    # AND the Service was written only for the lease, which is released
    assert [b for m, p, b in fake.requests if m == "PATCH" and p == SERVICE_PATH and "spec" in b] == []
    assert rc.lease_text(fake, ENDPOINT) is None


def test_a_rollout_without_room_is_refused(start: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    # GIVEN no free GPUs beside the serving generation (one node per role, fully requested)
    fake.nodes = [n for n in fake.nodes if not n["metadata"]["name"].endswith("-1")]
    code = main(rollout("promote", cluster, output="table"))
    captured = capsys.readouterr()
    # THEN nothing is created and one line says why, with the way out
    assert code == 1 and fake.calls("POST") == []
    assert "no room for a second generation beside the serving one (prefill: 0 free GPU(s) on 1 node(s), 1 pod(s) of " \
           "8 GPU(s) needed" in captured.err and "--in-place" in captured.err
    assert "room for the new generation" in captured.out


def test_status_of_a_steady_endpoint(start: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fakes import dpd_cluster

    fake, cluster = start()
    fake.iecs.clear()
    dpd_cluster.add_generation(fake, iec=NEW, namespace=NS, endpoint=ENDPOINT.name)
    fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] = rc.host(NEW, NS)
    code, data, _ = run_json(capsys, rollout("status", cluster))
    assert code == 0 and data["phase"] == "steady" and data["serving"] == NEW
    code = main(rollout("status", cluster, output="table"))
    assert code == 0 and "Generation" in capsys.readouterr().out


def test_a_second_promote_is_refused_while_another_holds_the_lease(start: Any,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    # GIVEN a promote from elsewhere holds the lease for ten more minutes
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    record = LeaseRecord(holder="build-7@ci pid 41", expires=expires, source=OLD, target=NEW, mode="blue-green",
                         step=f"created {NEW}")
    fake.services[(NS, ENDPOINT.name)]["metadata"]["annotations"] = {LEASE_ANNOTATION: record.to_text()}
    until = expires.strftime("%Y-%m-%dT%H:%M:%S")
    # WHEN promote, abort and status run
    for action in ("promote", "abort"):
        code = main(rollout(action, cluster, output="table"))
        err = capsys.readouterr().err
        # THEN promote and abort are refused with one line naming the holder and the expiry, and change nothing
        assert code == 1 and f"build-7@ci pid 41 holds its lease until {until}" in err, err
    assert fake.calls("POST") == [] and fake.calls("DELETE") == [] and (NS, OLD) in fake.iecs
    code, data, _ = run_json(capsys, rollout("status", cluster))
    assert code == 1 and data["phase"] == "in-progress" and "build-7@ci pid 41 holds the rollout lease" in data["message"]


def test_an_in_place_promote_stopped_after_its_delete_is_reported_and_finished(
        start: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    url, metrics = checks
    # GIVEN an in-place promote that stops after deleting the serving generation (the create fails)
    fake.fail(IEC_PATH, 500, "etcdserver: request timed out", methods=("POST",))
    code = main(rollout("promote", cluster, "--in-place", "--url", url, "--prometheus", metrics))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "500" in err and fake.iecs == {}
    # THEN status does not call that "nothing": it names the stopped promote and what to run
    code, data, _ = run_json(capsys, rollout("status", cluster))
    assert code == 1 and data["phase"] == "down" and data["lease"]["mode"] == "in-place"
    assert f"in-place promote from {OLD} to {NEW}" in data["message"] and "hpdpd rollout promote" in data["message"]
    # AND abort explains that nothing is left to fall back to
    code, data, _ = run_json(capsys, rollout("abort", cluster))
    assert code == 1 and data["outcome"] == "refused" and "nothing to fall back to" in data["message"]
    # WHEN promote runs again (without --in-place) once the API server recovers
    fake.faults.clear()
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics))
    # THEN it creates the configured generation, switches to it and leaves no record
    assert code == 0 and data["outcome"] == "promoted", err
    assert set(fake.iecs) == {(NS, NEW)} and fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == \
        rc.host(NEW, NS) and rc.lease_text(fake, ENDPOINT) is None


def test_an_ingress_that_cannot_be_patched_stops_the_promote_before_anything_is_deleted(
        start: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start("exposed")
    url, metrics = checks
    # GIVEN the caller may read the endpoint's Ingress but not patch it
    fake.fail(rc.INGRESSES, 403, "ingresses.networking.k8s.io is forbidden", methods=("PATCH",))
    code = main(rollout("promote", cluster, "--url", url, "--prometheus", metrics))
    err = capsys.readouterr().err
    # THEN promote stops with one line naming the permission, and the old generation is still there
    assert code == 2 and err.count("\n") == 1
    assert "needs patch on ingresses.networking.k8s.io in namespace hyperpod-inference-system" in err
    assert (NS, OLD) in fake.iecs and fake.calls("DELETE") == []
    assert rc.ingress_backends(fake, ENDPOINT) == [f"{OLD}-{NS}-routing-service"]
    # AND status says the promote stopped before it finished; once the grant exists, promote finishes it
    code, data, _ = run_json(capsys, rollout("status", cluster))
    assert code == 1 and data["phase"] == "interrupted" and "stopped before it finished" in data["message"]
    fake.faults.clear()
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics))
    assert code == 0 and data["outcome"] == "promoted", err
    assert set(fake.iecs) == {(NS, NEW)} and rc.ingress_backends(fake, ENDPOINT) == [f"{NEW}-{NS}-routing-service"]


def test_a_fixed_sagemaker_name_refuses_blue_green_and_is_replaced_in_place(
        start: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start("fixed")
    url, metrics = checks
    # WHEN a new generation would run beside one that holds the same SageMaker endpoint name
    code = main(rollout("promote", cluster, output="table"))
    err = capsys.readouterr().err
    # THEN blue/green is refused with the reason, before anything is created
    assert code == 1 and "would both hold the SageMaker endpoint name 'llama-sm'" in err and "--in-place" in err
    assert fake.calls("POST") == []
    # AND in place, the old generation is deleted and gone before the new one, with the same name, is created
    code, data, err = run_json(capsys, rollout("promote", cluster, "--in-place", "--url", url, "--prometheus", metrics))
    assert code == 0 and data["outcome"] == "promoted", err
    assert index(fake, "DELETE", f"{IEC_PATH}/{OLD}") < index(fake, "GET", f"{IEC_PATH}/{OLD}") < \
        index(fake, "POST", IEC_PATH)
    assert fake.iecs[(NS, NEW)]["spec"]["endpointName"] == "llama-sm"


def test_bad_options_end_with_one_line(start: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, cluster = start()
    code = main([*rollout("promote", cluster, drain="-1")])
    assert code == 2 and capsys.readouterr().err.strip() == "hpdpd: error: --drain: -1: must be 0 or more seconds"
    code = main([*rollout("promote", cluster), "--lease-seconds", "0.1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--lease-seconds: 0.1: must be more than twice --interval" in err


@pytest.mark.parametrize("action", ["status", "promote", "abort"])
def test_a_denied_or_unreachable_cluster_ends_with_one_line(start: Any, tmp_path: Path, action: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    fake.fail(kube_api.IEC_PREFIX.removesuffix("namespaces/"), 403, "inferenceendpointconfigs is forbidden")
    code = main(rollout(action, cluster))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "403 Forbidden" in captured.err and "; needs list on inferenceendpointconfigs" in captured.err
    with kube_api.serve() as gone:
        url = gone.url
    code = main(rollout(action, ["--kubeconfig", kube_api.FakeKube(url=url).kubeconfig(tmp_path / "gone")],
                        "--request-timeout", "1"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot reach the Kubernetes API server" in err


# ---- --probe: the EFA path of the nodes a new generation will take, before it is created there --------------------

def _probe_pods(fake: kube_api.FakeKube) -> list[str]:
    return [p["metadata"]["name"] for p in fake.pods if "hyperpod-dpd/probe-role" in (p["metadata"].get("labels") or {})]


def test_a_probe_that_measures_a_slow_fabric_stops_the_promote_before_anything_is_created(
        start: Any, checks: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    url, metrics = checks
    # GIVEN the free nodes the new generation would take move 2 GB/s between them (fi_pingpong, 2,000 MB/s)
    kubelet = dpd_cluster.ProbeKubelet(rate=2000.0)
    fake.on_pod_created, fake.exec = kubelet, dpd_cluster.WorkerShell()
    # WHEN it is promoted with --probe
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics, "--probe"))
    # THEN the promote failed on the probe's bandwidth row, and no IEC was created: the old generation keeps serving
    assert code == 1 and data["outcome"] == "failed" and "was not created" in data["message"], err
    assert any(f.startswith("probe probe:bandwidth") for f in data["failures"]), data["failures"]
    assert not [b for m, p, b in fake.requests if m == "POST" and p == IEC_PATH]
    assert set(fake.iecs) == {(NS, OLD)} and fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == \
        rc.host(OLD, NS)
    # AND the probe ran on the two free nodes, and its pods are gone; the lease is released
    assert {d["spec"]["nodeName"] for d in kubelet.created} == {"p5-prefill-1", "p5-decode-1"}
    assert _probe_pods(fake) == [] and rc.lease_text(fake, ENDPOINT) is None


def test_a_probe_near_line_rate_lets_the_promote_go_on(start: Any, checks: tuple[str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    url, metrics = checks
    # GIVEN free nodes whose EFA device carries 11.5 GB/s (p5: 12.5 GB/s per device), and workers on libfabric's efa
    kubelet = dpd_cluster.ProbeKubelet()
    fake.on_pod_created, fake.exec = kubelet, dpd_cluster.WorkerShell()
    # WHEN it is promoted with --probe
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics, "--probe"))
    # THEN the probe ran before the new generation was created, and the promote ended promoted
    assert code == 0 and data["outcome"] == "promoted", err
    probed = data["steps"].index(f"probed the EFA path of the nodes {NEW} will use")
    assert probed < data["steps"].index(f"created {NEW}")
    first_probe = next(i for i, (m, p, _) in enumerate(fake.requests) if m == "POST" and p.endswith("/pods"))
    assert first_probe < index(fake, "POST", IEC_PATH)
    # AND its pods are gone, and verify looked inside the new workers once they ran
    assert len(kubelet.created) == 2 and _probe_pods(fake) == []
    assert any(NEW in pod for pod, _, _ in fake.exec.commands)
