"""``hpdpd smoke`` as a command: JSON for pipelines against an HTTP router, and one-line refusals."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main


class Router(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(3):
            self.wfile.write(f'data: {{"choices":[{{"delta":{{"content":"w{i}"}}}}]}}\n\n'.encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def router_url() -> Iterator[str]:
    Router.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    """dev with its first declared endpoint only, so no --endpoint is needed."""
    return write_config(lambda d: d.__setitem__("endpoints", d["endpoints"][:1]))


def test_json_report_from_the_router(config_dir: Path, router_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the environment's endpoint is smoke-tested through a router URL with a small threshold
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", router_url, "--threshold", "128", "--no-canary",
                 "--max-tokens", "3", "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN both prompts streamed and the report names the transport, threshold and timings
    assert code == 0 and data["ok"] is True
    assert (data["transport"], data["target"], data["threshold"]) == ("http", router_url, 128)
    assert [r["case"] for r in data["results"]] == ["short", "long"]
    assert all(r["ok"] and r["output_tokens"] == 3 and r["ttft_ms"] is not None for r in data["results"])
    assert data["results"][1]["prompt_tokens_estimate"] > 128
    assert len(Router.bodies[1]["messages"][0]["content"].split()) > 128


def test_the_table_report(config_dir: Path, router_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", router_url, "--threshold", "64",
                 "--no-canary"])
    out = capsys.readouterr().out
    assert code == 0 and "TTFT ms" in out and "prefill -> decode" in out and "decode only" in out


def test_without_a_cluster_to_reach_the_default_transport_is_one_line(config_dir: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN dev's endpoint without a SageMaker endpoint name, and an API server that refuses connections
    from tests.fakes import kube_api

    with kube_api.serve() as gone:
        kubeconfig = gone.kubeconfig(tmp_path / "gone")
    # WHEN smoke runs with its default target (the router through the API server's service proxy) and waits first
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--kubeconfig", kubeconfig,
                 "--wait-ready", "1"])
    err = capsys.readouterr().err
    # THEN it could not run: exit 2, one line naming the IEC it waited for and why
    assert code == 2 and err.count("\n") == 1
    assert "IEC llm-serving/" in err and "is not ready after 1 s" in err and "cannot reach" in err


def test_an_unknown_endpoint_is_one_line(config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--endpoint", "nope", "--url", "http://x"])
    err = capsys.readouterr().err
    assert code == 2 and "no endpoint named 'nope'" in err


# ---- the silent-failure canary -------------------------------------------------------------------------------------


class VaryingRouter(Router):
    """A router whose generated text changes from one request to the next (seeded: greedy outputs differ)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = len(type(self).bodies)
        self.wfile.write(f'data: {{"choices":[{{"delta":{{"content":"answer {n}"}}}}]}}\n\n'.encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    from hyperpod_dpd.config import load_environment
    from tests.fakes import dpd_cluster, kube_api

    monkeypatch.delenv("KUBECONFIG", raising=False)
    with kube_api.serve() as fake:
        dpd_cluster.healthy(fake, load_environment("dev").endpoints[0])
        yield fake, fake.kubeconfig(tmp_path / "kubeconfig")


def _canary(config_dir: Path, url: str, kubeconfig: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", url, "--threshold", "64",
                 "--kubeconfig", kubeconfig, "--output", "json"])
    return code, json.loads(capsys.readouterr().out)


def _logs(fake: Any, role: str) -> tuple[Any, ...]:
    return next(k for k in fake.logs if k[1].startswith(role))


def test_the_canary_passes_on_a_healthy_endpoint(config_dir: Path, router_url: str, cluster: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    code, data = _canary(config_dir, router_url, kubeconfig, capsys)
    # THEN the long prompt went twice (the same text both times) and every canary check passed
    assert code == 0 and data["ok"] is True
    assert [c["status"] for c in data["canary"]] == ["pass", "pass", "pass"]
    assert [c["name"] for c in data["canary"]] == ["canary:routing", "canary:decoder-kv", "canary:determinism"]
    assert Router.bodies[1] == Router.bodies[2]  # the same greedy long prompt, twice


@pytest.mark.parametrize(("seed", "check", "cause"), [
    ("fallback", "canary:routing", "lower routing.threshold"),
    ("recompute", "canary:decoder-kv", "PYTHONHASHSEED"),
    ("buffer", "canary:decoder-kv", "PD buffer is full"),
], ids=["fallback-counter", "decoder-recompute", "buffer-overflow"])
def test_the_canary_names_a_silent_failure(config_dir: Path, router_url: str, cluster: Any, seed: str, check: str,
                                           cause: str, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    # GIVEN prompts that stream text although something went wrong underneath
    if seed == "fallback":
        fake.logs[_logs(fake, "llama")] = "".join(
            f"[INFO] Conditional routing: estimated_tokens={n}, threshold=4096, disaggregate=False\n"
            for n in (12, 3900, 3900))
    else:
        line = ("Retrieved 0 out of 6035 required tokens (from 6035 total tokens). size: 0.0000 gb, cost 1.0 ms, "
                "throughput: 0.0000 GB/s;" if seed == "recompute" else
                "[LMCache WARNING] Failed to allocate memory object, retrying...")
        fake.logs[_logs(fake, "decode-")] += line + "\n"
    # WHEN smoke runs with the canary
    code, data = _canary(config_dir, router_url, kubeconfig, capsys)
    # THEN it fails (exit 1) and the failing check names the likely cause
    row = next(c for c in data["canary"] if c["name"] == check)
    assert code == 1 and data["ok"] is False and row["status"] == "fail" and cause in row["cause"]
    assert all(r["ok"] for r in data["results"])  # the prompts themselves streamed text


def test_the_canary_catches_differing_greedy_outputs(config_dir: Path, cluster: Any,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    VaryingRouter.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), VaryingRouter)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
        code, data = _canary(config_dir, url, kubeconfig, capsys)
    finally:
        server.shutdown()
        server.server_close()
    row = next(c for c in data["canary"] if c["name"] == "canary:determinism")
    assert code == 1 and row["status"] == "fail" and "corrupt or partial transfer" in row["cause"]


def test_the_canary_table_and_a_denied_log_read(config_dir: Path, router_url: str, cluster: Any,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", router_url, "--threshold", "64",
                 "--kubeconfig", kubeconfig])
    assert code == 0 and "silent-failure canary" in capsys.readouterr().out
    # GIVEN RBAC that forbids reading pod logs: the canary cannot run, one line, exit 2
    fake.fail("/api/v1/namespaces/hyperpod-inference-system/pods", 403, "pods is forbidden")
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", router_url, "--threshold", "64",
                 "--kubeconfig", kubeconfig])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "403 Forbidden" in err and "(--no-canary skips it)" in err


# ---- through the Kubernetes API server's service proxy (what the pipeline uses without a SageMaker endpoint) ---------


def _stream(*_: Any) -> str:
    return "".join(f'data: {{"choices":[{{"delta":{{"content":"w{i}"}}}}]}}\n\n' for i in range(3)) + "data: [DONE]\n\n"


def test_without_a_sagemaker_name_smoke_reaches_the_router_through_the_service_proxy(
        config_dir: Path, cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.config import load_environment

    fake, kubeconfig = cluster
    endpoint = load_environment("dev", config_dir).endpoints[0]
    proxied: list[tuple[str, str, str, Any]] = []
    fake.proxy = lambda namespace, service, path, body: proxied.append((namespace, service, path, body)) or _stream()
    # WHEN dev's endpoint (no sagemaker_endpoint_name) is smoke-tested with no target given, after waiting for its IEC
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--kubeconfig", kubeconfig,
                 "--threshold", "64", "--max-tokens", "3", "--wait-ready", "5", "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN every prompt went through the API server to the IEC's routing Service on the operator's port, at the
    # endpoint's invocation path, and the canary passed on the logs
    assert code == 0 and data["ok"] is True
    iec = endpoint.resource_name
    assert (data["transport"], data["target"]) == (
        "kubernetes-api",
        f"http://{iec}-llm-serving-routing-service.hyperpod-inference-system.svc.cluster.local:443/"
        f"{endpoint.invocation_path.lstrip('/')}")
    assert {p[:3] for p in proxied} == {("hyperpod-inference-system", f"http:{iec}-llm-serving-routing-service:443",
                                         endpoint.invocation_path.lstrip("/"))}
    assert len(proxied) == 3 and all(p[3]["stream"] is True and p[3]["model"] == endpoint.model.name for p in proxied)
    assert [c["status"] for c in data["canary"]] == ["pass", "pass", "pass"]
    # AND it read the IEC's state before the first prompt (--wait-ready)
    gets = [i for i, (m, path, _) in enumerate(fake.requests) if m == "GET" and path.endswith(f"/{iec}")]
    first_proxy = next(i for i, (m, path, _) in enumerate(fake.requests) if m == "POST" and "/proxy/" in path)
    assert gets and gets[0] < first_proxy


def test_a_denied_service_proxy_fails_the_prompts_naming_the_permission(
        config_dir: Path, cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake, kubeconfig = cluster
    fake.proxy = _stream
    # GIVEN RBAC that forbids the service proxy in the operator's namespace
    fake.fail("/api/v1/namespaces/hyperpod-inference-system/services", 403, "services is forbidden")
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--kubeconfig", kubeconfig,
                 "--service-proxy", "--threshold", "64", "--no-canary", "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN no prompt passes, and each says what the role lacks (what infra/operations_access.py grants)
    assert code == 1 and data["ok"] is False
    assert all("403" in r["error"] and "needs create on services/proxy in namespace hyperpod-inference-system"
               in r["error"] for r in data["results"])


def test_an_iec_that_is_not_ready_stops_smoke_before_any_prompt(config_dir: Path, cluster: Any,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.config import load_environment

    fake, kubeconfig = cluster
    fake.proxy = _stream
    endpoint = load_environment("dev", config_dir).endpoints[0]
    fake.iecs[(endpoint.namespace, endpoint.resource_name)]["status"] = {
        "state": "DeploymentFailed", "conditions": [{"message": "prefill pods CrashLoopBackOff"}]}
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--kubeconfig", kubeconfig,
                 "--wait-ready", "30"])
    err = capsys.readouterr().err
    # THEN one line with the IEC's state and message, exit 2, and nothing was sent
    assert code == 2 and err.count("\n") == 1
    assert f"IEC {endpoint.namespace}/{endpoint.resource_name} is not ready after 30 s (DeploymentFailed: prefill " \
           "pods CrashLoopBackOff)" in err
    assert not [path for m, path, _ in fake.requests if m == "POST"]


def test_an_endpoint_with_a_sagemaker_name_is_invoked_as_its_configured_generation(
        write_config: Callable[..., Path], moto_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from botocore.stub import ANY, Stubber

    from hyperpod_dpd.cli import smoke as smoke_cli
    from hyperpod_dpd.config import load_environment

    # GIVEN dev's endpoint with a SageMaker endpoint name, whose generations render <name>-<generation>
    def named(data: dict[str, Any]) -> None:
        data["endpoints"] = data["endpoints"][:1]
        data["endpoints"][0]["sagemaker_endpoint_name"] = "llama"

    config_dir = write_config(named)
    endpoint = load_environment("dev", config_dir).endpoints[0]
    rendered = endpoint.rendered_sagemaker_endpoint_name
    assert rendered == f"llama-{endpoint.generation}"
    # AND SageMaker runtime (botocore's Stubber checks each request against the service model) refusing both prompts
    clients = moto_factory(smoke_cli)
    runtime = clients.client("sagemaker-runtime")
    with Stubber(runtime) as stub:
        for _ in range(2):
            stub.add_client_error("invoke_endpoint_with_response_stream", service_error_code="ValidationException",
                                  service_message=f"Endpoint {rendered} not found.", http_status_code=400,
                                  expected_params={"EndpointName": rendered, "Body": ANY,
                                                   "ContentType": "application/json", "Accept": "text/event-stream"})
        # WHEN smoke runs with no target
        code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--no-canary", "--output", "json"])
        stub.assert_no_pending_responses()
    data = json.loads(capsys.readouterr().out)
    # THEN both prompts went to the configured generation's SageMaker endpoint, and each failure says why
    assert code == 1 and (data["transport"], data["target"]) == ("sagemaker", rendered)
    assert all("ValidationException" in r["error"] and rendered in r["error"] for r in data["results"])
