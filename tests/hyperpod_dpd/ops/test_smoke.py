"""Smoke prompts around the routing threshold, TTFT/TPOT from streamed events, over HTTP and SageMaker runtime."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_dpd.ops.smoke import build_prompts, http_sender, read_stream, run_smoke, sagemaker_sender

FIRST_TOKEN_DELAY = 0.08
TOKEN_INTERVAL = 0.01


def sse(tokens: int, *, prompt_tokens: int = 12) -> Iterator[bytes]:
    """vLLM-style chat completion chunks, a usage chunk and ``[DONE]``."""
    yield b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    for i in range(tokens):
        yield f'data: {{"choices":[{{"index":0,"delta":{{"content":"t{i} "}}}}]}}\n\n'.encode()
    yield (f'data: {{"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":{tokens}}}}}\n\n'
           "data: [DONE]\n\n").encode()


class Router(BaseHTTPRequestHandler):
    """A stand-in for the DPD router: streams tokens after a delay, or answers with an error status."""

    requests: list[dict[str, Any]] = []
    status = 200

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body})
        if self.status != 200:
            self.send_response(self.status)
            self.end_headers()
            self.wfile.write(b'{"message":"no healthy upstream"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        words = len(json.dumps(body["messages"]).split())
        for i, chunk in enumerate(sse(body["max_tokens"], prompt_tokens=words)):
            time.sleep(FIRST_TOKEN_DELAY if i == 1 else TOKEN_INTERVAL if i > 1 else 0)
            self.wfile.write(chunk)
            self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def router() -> Iterator[str]:
    Router.requests, Router.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


def test_prompts_sit_on_either_side_of_the_threshold() -> None:
    cases, skipped = build_prompts(4096, nonce="abc")
    short, long = cases
    assert skipped == []
    assert short.case == "short" and short.words < 32 and short.expected_route == "decode only"
    # every filler word is at least one token, so the word count is a lower bound of the router's estimate
    assert long.case == "long" and long.words >= 4096 * 1.1 + 32 and long.words == len(long.prompt.split())
    assert long.prompt.startswith("[smoke abc]") and long.expected_route == "prefill -> decode"


def test_a_zero_threshold_disaggregates_everything_so_only_the_long_prompt_is_sent() -> None:
    cases, skipped = build_prompts(0)
    assert [c.case for c in cases] == ["long"]
    assert skipped == ["short: threshold 0 leaves no prompt safely under it (every prompt is disaggregated)"]


def test_ttft_and_tpot_over_http(router: str) -> None:
    # WHEN both prompts are sent to the router
    report = run_smoke(send=http_sender(router), endpoint="llama", transport="http", target=router, threshold=256,
                       model="Llama-3.3-70B-Instruct", chat=True, max_tokens=8)
    # THEN both streamed, with TTFT at least the router's first-token delay and TPOT near its token interval
    assert report.ok, report.to_json()
    short, long = report.results
    for m in (short, long):
        assert m.output_tokens == 8
        assert m.ttft_ms is not None and m.ttft_ms >= FIRST_TOKEN_DELAY * 1000
        assert m.tpot_ms is not None and TOKEN_INTERVAL * 1000 * 0.5 <= m.tpot_ms < 200
    assert long.prompt_tokens is not None and long.prompt_tokens > 256 > (short.prompt_tokens or 0)
    # AND the requests were OpenAI chat completions with streaming and usage
    sent = Router.requests[1]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "Llama-3.3-70B-Instruct" and sent["max_tokens"] == 8
    data = report.to_json()
    assert set(data) == {"ok", "endpoint", "transport", "target", "threshold", "results", "skipped", "canary"}
    assert data["canary"] == []  # no canary without a log source
    assert set(data["results"][0]) == {"case", "expected_route", "prompt_tokens_estimate", "prompt_tokens",
                                       "output_tokens", "ttft_ms", "tpot_ms", "total_ms", "ok", "error"}


def test_an_error_status_fails_each_prompt_with_one_line(router: str) -> None:
    Router.status = 503
    report = run_smoke(send=http_sender(router), endpoint="llama", transport="http", target=router, threshold=256,
                       model="m", chat=True)
    assert not report.ok
    assert [m.error for m in report.results] == ['HTTP 503 Service Unavailable: {"message":"no healthy upstream"}'] * 2


def test_an_unreachable_router_fails_without_a_trace() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    report = run_smoke(send=http_sender(f"http://127.0.0.1:{port}/v1/chat/completions", timeout_seconds=2),
                       endpoint="llama", transport="http", target="x", threshold=64, model="m", chat=True)
    assert not report.ok and all((m.error or "").startswith("cannot connect:") for m in report.results)


class FakeRuntime:
    """SageMaker runtime's response stream (moto does not implement InvokeEndpointWithResponseStream)."""

    def __init__(self, *, fail: bool = False, payload: bytes | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail
        self.payload = payload

    def invoke_endpoint_with_response_stream(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.fail:
            raise ClientError({"Error": {"Code": "ModelError", "Message": "Received server error (500) from primary"},
                               "ResponseMetadata": {"HTTPStatusCode": 424}}, "InvokeEndpointWithResponseStream")
        payload = b"".join(sse(4)) if self.payload is None else self.payload
        # split mid-line, as the service may: the parser must reassemble lines
        return {"Body": iter([{"PayloadPart": {"Bytes": payload[:37]}}, {"PayloadPart": {"Bytes": payload[37:]}}])}


def test_sagemaker_streaming_is_measured_and_errors_are_reported() -> None:
    runtime = FakeRuntime()
    report = run_smoke(send=sagemaker_sender(runtime, "llama-sm"), endpoint="llama", transport="sagemaker",
                       target="llama-sm", threshold=64, model="m", chat=False, max_tokens=4)
    assert report.ok and [m.output_tokens for m in report.results] == [4, 4]
    assert runtime.calls[0]["EndpointName"] == "llama-sm" and runtime.calls[0]["ContentType"] == "application/json"
    assert "prompt" in json.loads(runtime.calls[0]["Body"])  # completions, not chat
    failing = run_smoke(send=sagemaker_sender(FakeRuntime(fail=True), "llama-sm"), endpoint="llama",
                        transport="sagemaker", target="llama-sm", threshold=64, model="m", chat=True)
    assert failing.results[0].error == ("InvokeEndpointWithResponseStream: ModelError: Received server error (500) "
                                        "from primary")


def test_stream_parsing_counts_text_and_reads_usage_and_errors() -> None:
    ticks = iter(range(100))
    tally = read_stream([b'data: {"choices":[{"text":"a"}]}\n', b'data: {"choices":[{"text":"b"}]}\n',
                         b'data: {"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":9}}\n'],
                        lambda: float(next(ticks)))
    assert (tally.chunks, tally.completion_tokens, tally.prompt_tokens, tally.first, tally.last) == (2, 2, 9, 0.0, 1.0)
    error = read_stream([b'data: {"object":"error","message":"context length exceeded"}\n'], time.perf_counter)
    assert error.error == "context length exceeded"


# ---- a stream passes only when it ends with its final event ----------------------------------------------------------


def _tokens(count: int) -> bytes:
    return b"".join(f'data: {{"choices":[{{"delta":{{"content":"t{i} "}}}}]}}\n\n'.encode() for i in range(count))


def test_a_stream_cut_before_its_final_event_fails_though_it_carried_text() -> None:
    # GIVEN SageMaker's stream of the model server's events that stops after three tokens, without vLLM's closing
    # "data: [DONE]" (a dropped connection, a proxy's timeout, a last event-stream frame that never came)
    runtime = FakeRuntime(payload=_tokens(3))
    # WHEN the prompts are sent
    report = run_smoke(send=sagemaker_sender(runtime, "llama-sm"), endpoint="llama", transport="sagemaker",
                       target="llama-sm", threshold=64, model="m", chat=True, max_tokens=64)
    # THEN each prompt fails, saying the stream was cut short, whatever text it carried
    assert not report.ok
    assert [m.error for m in report.results] == [
        "the stream ended without its final 'data: [DONE]' event after 3 chunk(s): it was cut short"] * 2
    assert all(m.output_tokens == 3 and m.text is None for m in report.results)


def test_the_final_event_closes_an_error_too() -> None:
    # GIVEN vLLM's stream for a request that failed mid-way: an error event, then [DONE] (serving_chat.py)
    runtime = FakeRuntime(payload=_tokens(1) + b'data: {"error": {"message": "KV transfer failed"}}\n\ndata: [DONE]\n\n')
    report = run_smoke(send=sagemaker_sender(runtime, "llama-sm"), endpoint="llama", transport="sagemaker",
                       target="llama-sm", threshold=64, model="m", chat=True)
    # THEN the error is the prompt's failure
    assert [m.error for m in report.results] == ["KV transfer failed"] * 2


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_stream_still_running_when_the_deadline_passes_fails() -> None:
    from hyperpod_dpd.ops.deadline import Deadline

    # GIVEN a 5 s budget and a stream whose chunks arrive while the clock passes it
    clock = Clock()
    deadline = Deadline(seconds=5, clock=clock)

    def chunks() -> Iterator[bytes]:
        for i in range(10):
            clock.now = float(i)
            yield f'data: {{"choices":[{{"delta":{{"content":"t{i} "}}}}]}}\n\n'.encode()

    # WHEN it is read, THEN it ends at the deadline, as an error of that prompt
    tally = read_stream(chunks(), clock, deadline)
    assert tally.chunks == 6 and not tally.done  # t0 to t5: the last one arrived as the time ran out
    assert tally.error == "the stream had not ended when the 5 s of --timeout ran out"


def test_no_prompt_is_sent_once_the_deadline_has_passed(router: str) -> None:
    from hyperpod_dpd.ops.deadline import Deadline, OutOfTime

    clock = Clock()
    deadline = Deadline(seconds=1, option="--timeout", clock=clock)
    clock.now = 2.0
    with pytest.raises(OutOfTime, match="^the short prompt: the 1 s of --timeout ran out"):
        run_smoke(send=http_sender(router, deadline=deadline), endpoint="llama", transport="http", target=router,
                  threshold=256, model="m", chat=True, deadline=deadline)
    assert Router.requests == []


def test_the_canarys_second_long_prompt_failing_fails_the_smoke() -> None:
    from hyperpod_dpd.ops.canary import CanaryLogs

    # GIVEN an endpoint whose disaggregated path fails the canary's second run of the long prompt (the third request),
    # and logs that show both long prompts disaggregated and a decoder-side KV hit
    sent: list[bytes] = []

    def send(body: bytes) -> Iterator[bytes]:
        sent.append(body)
        if len(sent) == 3:
            yield b'data: {"error":{"message":"KV transfer failed"}}\n\ndata: [DONE]\n\n'
            return
        yield from sse(4)

    logs = CanaryLogs(router="Conditional routing: estimated_tokens=5000, threshold=4096, disaggregate=True\n" * 2,
                      decoder="Retrieved 5000 out of 5000 required tokens (from 5000 total tokens). size: 0.2 gb, "
                              "cost 1.0 ms\n")
    # WHEN smoke runs with the canary
    report = run_smoke(send=send, endpoint="llama", transport="http", target="http://router", threshold=4096,
                       model="m", chat=True, canary=lambda seconds: logs)
    # THEN the failed request fails the determinism row and the smoke, with the error it got
    determinism = next(c for c in report.canary if c.name == "canary:determinism")
    assert len(sent) == 3 and all(m.ok for m in report.results)
    assert determinism.status == "fail" and "KV transfer failed" in determinism.detail and not report.ok


def test_the_canary_tells_the_smokes_lines_from_other_traffic_by_the_long_prompts_token_count() -> None:
    from hyperpod_dpd.ops.canary import CanaryLogs

    # GIVEN an endpoint that serves other clients (five router decisions for the smoke's three prompts), whose
    # decoder loaded the KV of another prompt and of one of 5123 tokens
    def send(body: bytes) -> Iterator[bytes]:
        long = len(json.loads(body)["messages"][0]["content"]) > 1000
        yield from sse(4, prompt_tokens=tokens if long else 40)

    line = ("[LMCache INFO] [req_id=cmpl-{r}] Retrieved {n} out of {n} required tokens (from {n} total tokens). "
            "size: 0.2 gb, cost 1.0 ms\n")
    logs = CanaryLogs(router="Conditional routing: estimated_tokens=5000, threshold=4096, disaggregate=True\n" * 5,
                      decoder=line.format(r="a", n=9000) + line.format(r="b", n=5123))
    for tokens, status in ((5123, "pass"), (5124, "warn")):
        # WHEN smoke runs with the canary and vLLM reports the long prompt's prompt_tokens in its usage event
        report = run_smoke(send=send, endpoint="llama", transport="http", target="http://router", threshold=4096,
                           model="m", chat=True, canary=lambda seconds: logs)
        # THEN the decoder's line of that many tokens is the smoke's (pass); of none, nothing can be attributed
        rows = {c.name: c.status for c in report.canary}
        assert rows["canary:decoder-kv"] == rows["canary:routing"] == status, tokens
