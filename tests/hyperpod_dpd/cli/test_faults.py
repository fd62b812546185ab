"""Every ``hpdpd`` command against broken peers: moto's server and the fake Kubernetes API server, each behind the
fault proxy (tests/fakes/fault_proxy.py), answering garbage, cut or truncated bodies, an HTML login page, proxy error
pages (403, 404, 409, 429, 500), resets and stalls.

Each run is in-process (``hyperpod_dpd.cli.main.main``) with a small budget (``--timeout`` or ``--request-timeout``
of :data:`BUDGET` seconds, :data:`SHORT_BUDGET` for the faults a command waits out: they take all of it) and asserts what docs/cli.md promises: exit 2 with one line on stderr, or the documented
exit 1 with its reason (in the JSON on stdout, or one line); never 0, never a traceback, and the run ends within the
budget plus :data:`SLACK` seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.cli.main import main
from tests.fakes import dpd_cluster, kube_api
from tests.fakes.fault_proxy import FAULTS, FaultProxy
from tests.fakes.fault_proxy import serve as serve_proxy
from tests.hyperpod_dpd.aws_faults import moto_server, seed_clusters
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT

BUDGET = 3.0
SHORT_BUDGET = 1.5
WAITED_OUT = frozenset({"stall", "429", "500", "reset", "cut"})  # retried or polled until the budget is gone
SLACK = 10.0
GROUPS = [("system", "ml.m5.2xlarge", 2), ("prefill", "ml.p5.48xlarge", 1), ("decode", "ml.p5.48xlarge", 1)]
# What vLLM streams for a chat completion, ending with its final event (hyperpod_dpd.ops.smoke).
STREAM = "".join(f'data: {{"choices":[{{"delta":{{"content":"w{i}"}}}}]}}\n\n' for i in range(3)) + "data: [DONE]\n\n"
MALFORMED = ("garbage", "truncated", "html")
# Slow by intent, though pure Python: the matrix waits out each fault's budget (a stall, a 429 or a 500 takes all of
# it), about two minutes of waiting in all; `make test` runs it, `make test-fast` does not.
pytestmark = pytest.mark.slow


@dataclass
class World:
    moto: str
    config_dir: Path
    kubeconfig: str
    source: Path
    aws: FaultProxy
    kube: FaultProxy
    fake: kube_api.FakeKube
    endpoint: Any


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, base_configs: dict[str, dict[str, Any]]) -> Iterator[World]:
    """dev with one endpoint, its HyperPod and EKS clusters in moto's server, its endpoint healthy in the fake API
    server, and a fault proxy in front of each."""
    from hyperpod_dpd.config.loader import load_environment

    root = tmp_path_factory.mktemp("faults")
    data = json.loads(json.dumps(base_configs["dev"]))
    data["account"] = MOTO_ACCOUNT
    data["hyperpod"]["instance_groups"][0]["instance_type"] = "ml.m5.2xlarge"  # moto's CreateCluster lacks m7i
    data["endpoints"] = data["endpoints"][:1]
    config_dir = root / "config"
    config_dir.mkdir()
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    endpoint = load_environment("dev", config_dir).endpoints[0]
    source = root / "checkout"
    source.mkdir()
    (source / "Makefile").write_text("setup:\n")
    with moto_server() as url, serve_proxy(url) as aws, kube_api.serve() as fake, serve_proxy(fake.url) as kube:
        dpd_cluster.healthy(fake, endpoint)
        fake.proxy = lambda namespace, service, path, body: STREAM
        kubeconfig = kube_api.FakeKube(url=kube.url).kubeconfig(root / "kubeconfig")
        yield World(moto=url, config_dir=config_dir, kubeconfig=kubeconfig, source=source, aws=aws, kube=kube, fake=fake,
                    endpoint=endpoint)


@pytest.fixture
def peers(world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[World]:
    """Fake credentials, every AWS client at the AWS proxy; no fault left behind by the test."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS", "KUBECONFIG", "HPDPD_PROMETHEUS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", world.aws.url)
    seed_clusters(world.moto, GROUPS)
    yield world
    world.aws.set(None)
    world.kube.set(None)
    world.fake.faults.clear()
    world.fake.proxy = lambda namespace, service, path, body: STREAM


def command(name: str, world: World, budget: float = BUDGET) -> list[str]:
    """The command line of ``name``, with the small budget and JSON output."""
    b, e, kc = f"{budget:g}", world.endpoint.name, ["--kubeconfig", world.kubeconfig]
    common = ["--env", "dev", "--config-dir", str(world.config_dir)]
    rollout = ["--endpoint", e, "--request-timeout", b, "--interval", "0.5", "--lease-seconds", "5", *kc]
    lines = {
        "preflight": ["preflight", *common, "--timeout", b],
        "status": ["status", *common, "--timeout", b, *kc],
        "wait": ["wait", "--for", "cluster", *common, "--timeout", b, "--interval", "0.5"],
        "wait-endpoint": ["wait", "--for", "endpoint", *common, "--timeout", b, "--interval", "0.5", *kc],
        "smoke": ["smoke", *common, "--timeout", b, "--service-proxy", "--threshold", "64", "--max-tokens", "3", *kc],
        "verify": ["verify", *common, "--timeout", b, "--request-timeout", b, *kc],
        "rollout-status": ["rollout", "status", *common, *rollout],
        "rollout-promote": ["rollout", "promote", *common, *rollout, "--timeout", b],
        "rollout-abort": ["rollout", "abort", *common, *rollout],
    }
    if name == "checks-run":
        return ["checks", "run", *common, "--timeout", b, "--interval", "0.5", "--source", str(world.source), "--",
                "status", "--env", "dev"]
    return [*lines[name], "--output", "json"]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    lines: list[str]  # stderr without the wait's progress lines
    seconds: float


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Run:
    started = time.monotonic()
    code = main(argv)
    seconds = time.monotonic() - started
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip() and not line.startswith("waiting for ")]
    return Run(code=code, out=captured.out, lines=lines, seconds=seconds)


# The peers each command talks to in these runs (a kubeconfig is given, so no EKS authentication through AWS).
SIDES = {"preflight": ("aws",), "status": ("aws", "kube"), "wait": ("aws",), "wait-endpoint": ("kube",),
         "smoke": ("kube",), "verify": ("kube",), "rollout-status": ("kube",), "rollout-promote": ("kube",),
         "rollout-abort": ("kube",), "checks-run": ("aws",)}
CASES = [(name, side, fault) for name, sides in SIDES.items() for side in sides for fault in FAULTS]


@pytest.mark.parametrize(("name", "side", "fault"), CASES, ids=[f"{n}-{s}-{f}" for n, s, f in CASES])
def test_every_command_ends_in_time_with_one_line_and_never_succeeds(peers: World, capsys: pytest.CaptureFixture[str],
                                                                      name: str, side: str, fault: str) -> None:
    # GIVEN every answer of one peer broken the same way
    proxy = peers.aws if side == "aws" else peers.kube
    proxy.set(fault)
    # WHEN the command runs with a budget of a few seconds
    budget = SHORT_BUDGET if fault in WAITED_OUT else BUDGET
    result = run(command(name, peers, budget), capsys)
    proxy.set(None)
    # THEN it ends within the budget plus SLACK, neither passing nor crashing
    assert result.seconds <= budget + SLACK, result
    assert result.code in (1, 2), result
    if result.code == 2:
        # could not run: one line, saying why, and nothing on stdout
        assert len(result.lines) == 1 and result.lines[0].startswith("hpdpd: "), result
        assert result.out == "", result
    else:
        # the documented 1: the reason is in the report (JSON on stdout), or the one line on stderr
        assert len(result.lines) <= 1, result
        assert result.lines or _reason_in(json.loads(result.out)), result
    if fault in MALFORMED:
        # AND an answer that is not the peer's is never taken for one: exit 2, naming where it came from; or, on a
        # machine so loaded that the budget ran out before the answer arrived, the documented timeout (exit 1,
        # still not an answer)
        timed_out = (result.code == 1 and result.seconds >= budget and not result.lines
                     and json.loads(result.out).get("outcome") == "timeout")
        assert timed_out or (result.code == 2 and proxy.url.removeprefix("http://") in result.lines[0]), result


def _reason_in(report: dict[str, Any]) -> bool:
    """A report of exit 1 says why: warnings (status), a timed-out wait's state, a failed row or prompt."""
    return bool(report.get("warnings") or report.get("outcome") == "timeout" and report.get("state")
                or report.get("message") or any(r.get("error") for r in report.get("results", [])))


# ---- what must not fail open -----------------------------------------------------------------------------------------


def _iec_paths(method: str, path: str) -> bool:
    return path.startswith("/apis/inference.sagemaker.aws.amazon.com/")


@pytest.mark.parametrize("name", ["status", "rollout-status", "rollout-promote", "verify", "wait-endpoint"])
def test_an_html_login_page_for_the_iec_is_never_nothing_there(peers: World, capsys: pytest.CaptureFixture[str],
                                                               name: str) -> None:
    # GIVEN an authenticating proxy answering the IEC's API with its login page, 200 OK, and every other call fine
    peers.kube.set("html", when=_iec_paths)
    # WHEN the command reads the IEC
    result = run(command(name, peers), capsys)
    # THEN it ends with one line naming the API server, never "healthy", "nothing to do" or a pending generation
    assert result.code == 2 and len(result.lines) == 1, result
    assert f"the answer of {peers.kube.url} is not the Kubernetes API's" in result.lines[0]


def test_a_missing_crd_is_not_found_and_unhealthy(peers: World, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an API server that serves no inference.sagemaker.aws.amazon.com group: its own NotFound Status for every
    # path of it (the inference operator is not installed)
    peers.fake.fail("/apis/inference.sagemaker.aws.amazon.com/", 404, "the server could not find the requested resource")
    # WHEN status, verify and rollout status run
    status = run(command("status", peers), capsys)
    verify = run(command("verify", peers), capsys)
    rollout = run(command("rollout-status", peers), capsys)
    # THEN each is the documented 1: the IEC is NotFound and the endpoint is not healthy
    report = json.loads(status.out)
    assert status.code == 1 and report["healthy"] is False and report["endpoints"][0]["iec_state"] == "NotFound"
    assert verify.code == 1 and json.loads(verify.out)["endpoints"][0]["checks"][0]["status"] == "fail"
    assert rollout.code == 1 and rollout.out == "" and len(rollout.lines) == 1
    assert "the server could not find the requested resource" in rollout.lines[0]


def test_a_missing_iec_is_not_healthy(peers: World, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the endpoint's IEC gone from the cluster
    iec = peers.fake.iecs.pop((peers.endpoint.namespace, peers.endpoint.resource_name))
    try:
        result = run(command("status", peers), capsys)
    finally:
        peers.fake.iecs[(peers.endpoint.namespace, peers.endpoint.resource_name)] = iec
    # THEN status exits 1 and says NotFound (it used to report healthy)
    assert result.code == 1 and json.loads(result.out)["endpoints"][0]["iec_state"] == "NotFound"


REJECTED_JSON = (400, "application/x-amz-json-1.1",
                 b'{"__type": "UnrecognizedClientException", "message": "The security token included in the request '
                 b'is invalid."}')
REJECTED_XML = (403, "text/xml", b'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender'
                                 b"</Type><Code>InvalidClientTokenId</Code><Message>The security token included in the "
                                 b"request is invalid.</Message></Error><RequestId>1</RequestId></ErrorResponse>")


@pytest.mark.parametrize(("name", "answer"), [("status", REJECTED_JSON), ("wait", REJECTED_JSON),
                                              ("preflight", REJECTED_XML)])
def test_rejected_credentials_end_every_command_with_2(peers: World, capsys: pytest.CaptureFixture[str], name: str,
                                                       answer: tuple[int, str, bytes]) -> None:
    # GIVEN AWS refusing the credentials themselves on every call (status used to call that "Unknown" and exit 1)
    peers.aws.set("answer", answer=answer)
    result = run(command(name, peers), capsys)
    # THEN the command stops at once with one line saying so
    assert result.code == 2 and len(result.lines) == 1, result
    assert result.lines[0].startswith("hpdpd: error: AWS rejected the credentials: ")


def test_credentials_the_api_server_rejects_end_status_with_2(peers: World, capsys: pytest.CaptureFixture[str]) -> None:
    peers.fake.fail("/apis/", 401, "Unauthorized")
    result = run(command("status", peers), capsys)
    assert result.code == 2 and len(result.lines) == 1 and "401 Unauthorized" in result.lines[0]


def test_a_stream_cut_before_its_final_event_fails_smoke(peers: World, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the router's stream cut after its text, before vLLM's closing "data: [DONE]"
    peers.fake.proxy = lambda namespace, service, path, body: STREAM.removesuffix("data: [DONE]\n\n")
    result = run(command("smoke", peers), capsys)
    # THEN every prompt fails, saying why (it used to pass)
    report = json.loads(result.out)
    assert result.code == 1 and report["ok"] is False
    assert {r["error"] for r in report["results"]} == {
        "the stream ended without its final 'data: [DONE]' event after 3 chunk(s): it was cut short"}


def test_a_canary_log_that_is_an_html_page_does_not_pass(peers: World, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the prompts answered, and the logs the canary reads answered by a login page
    peers.kube.set("html", when=lambda method, path: path.split("?")[0].endswith("/log"))
    result = run(command("smoke", peers), capsys)
    # THEN the canary cannot read them: one line, exit 2
    assert result.code == 2 and len(result.lines) == 1 and "not the text/plain of a log" in result.lines[0]


@pytest.mark.parametrize("name", ["status", "verify", "rollout-status"])
def test_a_kubeconfig_that_is_not_utf8_is_one_line(peers: World, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   name: str) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_bytes(Path(peers.kubeconfig).read_bytes().replace(b"fake", b"f\xe9ke"))
    argv = [str(broken) if arg == peers.kubeconfig else arg for arg in command(name, peers)]
    offset = broken.read_bytes().index(0xE9)
    result = run(argv, capsys)
    assert result.code == 2 and result.lines == [
        f"hpdpd: error: kubeconfig {broken}: not UTF-8 (byte 0xe9 at offset {offset}); a kubeconfig is a UTF-8 YAML "
        "file"]
