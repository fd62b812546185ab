"""``hpdpd smoke``: one prompt under the routing threshold and one above it, with TTFT and TPOT for each.

Under the threshold the router sends the request straight to the decoder; at or above it the prefiller computes
the KV cache and ships it to the decoder (SageMaker HyperPod DPD documentation). The router compares its *estimated* token count with
the threshold, so the long prompt is sized from a lower bound: every word of the filler text is at least one
token, and the prompt has 10 % more words than the threshold plus a margin. A fresh nonce opens the long prompt
so a prefix cache cannot serve it.

Streaming responses are OpenAI-style server-sent events (``data: {...}`` lines, ``data: [DONE]`` at the end) from
vLLM, read from SageMaker runtime (``InvokeEndpointWithResponseStream``), from an HTTP URL (the in-cluster router, or
a port-forward of it), or from the router through the Kubernetes API server's service proxy
(:func:`hyperpod_dpd.ops.workloads.service_proxy_sender`). TTFT is the time from sending to the first generated text; TPOT is
the time between the first and the last token divided by the tokens after the first.

A stream passes only when it ends with its final event: vLLM's OpenAI server ends every stream, an error included,
with ``data: [DONE]`` (vllm-project/vllm@003fe59 ``vllm/entrypoints/openai/serving_chat.py``
``chat_completion_stream_generator``, @00463e6 ``serving_completion.py`` ``completion_stream_generator``: "Send the
final done message after all response.n are finished"). Through SageMaker the payload parts carry the container's
bytes as they are, so the same event closes the stream there; a stream that stops before it was cut short (a
dropped connection, a proxy's timeout, an event stream whose last frame never came: botocore's ``EventStream``
drops an unfinished frame silently) and fails, whatever text it carried. With a deadline (``--timeout``) a stream
still running when it passes fails too, and no request starts after it (:class:`~hyperpod_dpd.ops.deadline.OutOfTime`
ends the command).
"""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from hyperpod_dpd.aws import describe_client_error, is_client_error, is_credentials_error
from hyperpod_dpd.ops.canary import CanaryLogs, LogSource, SentPrompts, canary_checks
from hyperpod_dpd.ops.checks import Check
from hyperpod_dpd.ops.deadline import Deadline, OutOfTime
from hyperpod_dpd.ops.kube import KubeError

Case = Literal["short", "long"]
SHORT_PROMPT = "In one short sentence, what does a large language model do?"
SHORT_PROMPT_MAX_TOKENS = 32  # generous upper bound of the short prompt with a chat template
FILLER = "Sentence {i}: the quick brown fox jumps over the lazy dog near the river bank."
LONG_INSTRUCTION = "Summarise the numbered sentences above in one sentence."
LONG_MARGIN_WORDS = 32
FINAL_EVENT = b"[DONE]"  # the data of the last server-sent event of a vLLM stream (see the module's docstring)

Sender = Callable[[bytes], Iterable[bytes]]


@dataclass(frozen=True, kw_only=True)
class PromptCase:
    case: Case
    prompt: str
    expected_route: str
    words: int


@dataclass(frozen=True, kw_only=True)
class Measurement:
    case: Case
    expected_route: str
    prompt_tokens_estimate: int
    prompt_tokens: int | None
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None
    total_ms: float
    ok: bool
    error: str | None = None
    text: str | None = None  # the generated text (for the canary's determinism check; not in the JSON)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("text")
        for key in ("ttft_ms", "tpot_ms", "total_ms"):
            if data[key] is not None:
                data[key] = round(data[key], 1)
        return data


@dataclass(frozen=True, kw_only=True)
class SmokeReport:
    endpoint: str
    transport: str
    target: str
    threshold: int
    results: tuple[Measurement, ...]
    skipped: tuple[str, ...] = ()
    canary: tuple[Check, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(m.ok for m in self.results) and not any(
            c.status == "fail" for c in self.canary)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "endpoint": self.endpoint, "transport": self.transport, "target": self.target,
                "threshold": self.threshold, "results": [m.to_json() for m in self.results],
                "skipped": list(self.skipped), "canary": [c.to_json() for c in self.canary]}


def _words(text: str) -> int:
    return len(text.split())


def build_prompts(threshold: int, *, nonce: str | None = None) -> tuple[list[PromptCase], list[str]]:
    """The short and long prompt for ``threshold``, and why a case was skipped (threshold 0 disaggregates all)."""
    cases: list[PromptCase] = []
    skipped: list[str] = []
    if threshold > SHORT_PROMPT_MAX_TOKENS:
        cases.append(PromptCase(case="short", prompt=SHORT_PROMPT, expected_route="decode only",
                                words=_words(SHORT_PROMPT)))
    else:
        skipped.append(f"short: threshold {threshold} leaves no prompt safely under it "
                       f"({'every prompt is disaggregated' if threshold == 0 else 'too small'})")
    target_words = math.ceil(threshold * 1.1) + LONG_MARGIN_WORDS
    lines = [f"[smoke {nonce or uuid.uuid4().hex[:12]}]"]
    words = _words(lines[0]) + _words(LONG_INSTRUCTION)
    i = 0
    while words < target_words:
        i += 1
        sentence = FILLER.format(i=i)
        lines.append(sentence)
        words += _words(sentence)
    lines.append(LONG_INSTRUCTION)
    cases.append(PromptCase(case="long", prompt="\n".join(lines), expected_route="prefill -> decode", words=words))
    return cases, skipped


def request_body(prompt: str, *, model: str, chat: bool, max_tokens: int) -> bytes:
    """An OpenAI-compatible streaming request (chat or completions), asking for usage in the last event."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                            "stream_options": {"include_usage": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return json.dumps(body).encode()


# ---- stream parsing -------------------------------------------------------------------------------------------------


@dataclass
class _Tally:
    first: float | None = None
    last: float | None = None
    chunks: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    texts: list[str] = field(default_factory=list)
    done: bool = False  # the final event arrived


def _text_of(event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    if choices and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta") or choice.get("message") or {}
        return str(delta.get("content") or delta.get("reasoning_content") or choice.get("text") or "")
    token = event.get("token")  # text-generation-inference style
    if isinstance(token, dict):
        return str(token.get("text") or "")
    return ""


def _consume(line: bytes, tally: _Tally, now: float) -> None:
    text = line.strip()
    if not text or text.startswith(b":"):
        return
    if text.startswith(b"data:"):
        text = text[5:].strip()
    if text == FINAL_EVENT:
        tally.done = True
        return
    try:
        event = json.loads(text)
    except ValueError:
        return
    if not isinstance(event, dict):
        return
    if "error" in event or event.get("object") == "error":
        error = event.get("error", event)
        tally.error = str(error.get("message") if isinstance(error, dict) else error)
        return
    if _text_of(event):
        tally.texts.append(_text_of(event))
        tally.chunks += 1
        tally.first = now if tally.first is None else tally.first
        tally.last = now
    usage = event.get("usage") or {}
    if usage.get("completion_tokens") is not None:
        tally.completion_tokens = int(usage["completion_tokens"])
    if usage.get("prompt_tokens") is not None:
        tally.prompt_tokens = int(usage["prompt_tokens"])


def read_stream(chunks: Iterable[bytes], clock: Callable[[], float], deadline: Deadline | None = None) -> _Tally:
    """Split raw chunks into lines and tally the generated text as it arrives (until the deadline, if any)."""
    tally, buffer = _Tally(), b""
    for chunk in chunks:
        now = clock()
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            _consume(line, tally, now)
        if deadline is not None and deadline.expired and not tally.done:
            tally.error = f"the stream had not ended when {deadline.describe()} ran out"
            return tally
    if buffer:
        _consume(buffer, tally, clock())
    return tally


def measure(case: PromptCase, send: Sender, *, model: str, chat: bool, max_tokens: int,
            clock: Callable[[], float] = time.perf_counter, deadline: Deadline | None = None) -> Measurement:
    body = request_body(case.prompt, model=model, chat=chat, max_tokens=max_tokens)
    if deadline is not None and deadline.expired:
        raise deadline.out_of_time(f"the {case.case} prompt")
    start = clock()
    error: str | None = None
    try:
        tally = read_stream(send(body), clock, deadline)
    except Exception as exc:  # this case failed; the other case still runs
        if is_credentials_error(exc) or isinstance(exc, OutOfTime):
            raise  # no request can succeed (or start); the command ends with one line
        tally, error = _Tally(), _describe_send_error(exc)
    end = clock()
    error = error or tally.error
    tokens = tally.completion_tokens if tally.completion_tokens is not None else tally.chunks
    ttft = (tally.first - start) * 1000 if tally.first is not None else None
    tpot = None
    if tally.first is not None and tally.last is not None and tokens > 1:
        tpot = (tally.last - tally.first) * 1000 / (tokens - 1)
    if error is None and tally.first is None:
        error = "the response carried no generated text"
    if error is None and not tally.done:
        error = (f"the stream ended without its final 'data: {FINAL_EVENT.decode()}' event after {tally.chunks} "
                 "chunk(s): it was cut short")
    return Measurement(case=case.case, expected_route=case.expected_route, prompt_tokens_estimate=case.words,
                       prompt_tokens=tally.prompt_tokens, output_tokens=tokens, ttft_ms=ttft, tpot_ms=tpot,
                       total_ms=(end - start) * 1000, ok=error is None, error=error,
                       text="".join(tally.texts) if error is None else None)


def _describe_send_error(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        detail = " ".join(exc.read(300).decode("utf-8", "replace").split())
        return f"HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else "")
    if isinstance(exc, urllib.error.URLError):
        return f"cannot connect: {exc.reason}"
    if is_client_error(exc):
        return describe_client_error(exc)
    if isinstance(exc, KubeError):  # the service proxy: the API server's answer, with the permission a 403 needs
        return exc.reason
    return " ".join(f"{type(exc).__name__}: {exc}".split())


# ---- transports ---------------------------------------------------------------------------------------------------


def sagemaker_sender(runtime: Any, endpoint_name: str) -> Sender:
    """Stream from a SageMaker endpoint (``InvokeEndpointWithResponseStream``)."""

    def send(body: bytes) -> Iterator[bytes]:
        response = runtime.invoke_endpoint_with_response_stream(
            EndpointName=endpoint_name, Body=body, ContentType="application/json", Accept="text/event-stream")
        for event in response["Body"]:
            if "PayloadPart" in event:
                yield event["PayloadPart"].get("Bytes", b"")
            elif "ModelStreamError" in event or "InternalStreamFailure" in event:
                failure = event.get("ModelStreamError") or event.get("InternalStreamFailure") or {}
                raise RuntimeError(f"stream failed: {failure.get('ErrorCode', '')} {failure.get('Message', '')}".strip())

    return send


def http_sender(url: str, *, timeout_seconds: float = 300.0, insecure: bool = False,
                deadline: Deadline | None = None) -> Sender:
    """Stream from an HTTP(S) URL, such as the in-cluster router or a port-forward of it (each read waits at most
    ``timeout_seconds``, or what is left of ``deadline``)."""
    context = ssl._create_unverified_context() if insecure else None  # noqa: S323 - opt-in, self-signed router certs

    def send(body: bytes) -> Iterator[bytes]:
        request = urllib.request.Request(url, data=body, method="POST",  # noqa: S310 - the user names the URL
                                         headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        timeout = deadline.bound(timeout_seconds, what=f"POST {url}") if deadline is not None else timeout_seconds
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            while True:
                line = response.readline()
                if not line:
                    return
                yield line

    return send


def run_smoke(*, send: Sender, endpoint: str, transport: str, target: str, threshold: int, model: str, chat: bool,
              max_tokens: int = 64, clock: Callable[[], float] = time.perf_counter,
              canary: LogSource | None = None, deadline: Deadline | None = None) -> SmokeReport:
    """The prompts; with ``canary`` (a reader of the router's and decoder's logs) the long prompt is sent a second
    time and the silent-failure checks run over the logs written meanwhile (:mod:`hyperpod_dpd.ops.canary`), told
    how many prompts were sent and the long prompt's ``prompt_tokens`` (vLLM's exact count, from the usage event
    the request asks for) so that they can tell the smoke's lines from other traffic's."""
    cases, skipped = build_prompts(threshold)
    started = time.monotonic()
    results = tuple(measure(c, send, model=model, chat=chat, max_tokens=max_tokens, clock=clock, deadline=deadline)
                    for c in cases)
    checks: tuple[Check, ...] = ()
    if canary is not None:
        long_case = next(c for c in cases if c.case == "long")
        again = measure(long_case, send, model=model, chat=chat, max_tokens=max_tokens, clock=clock,
                        deadline=deadline)
        first = next(m for m in results if m.case == "long")
        logs: CanaryLogs = canary(time.monotonic() - started)
        prompts = SentPrompts(long=2, short=sum(1 for c in cases if c.case == "short"),
                              long_tokens=first.prompt_tokens if first.prompt_tokens is not None else
                              again.prompt_tokens)
        checks = canary_checks(logs, first=first.text, second=again.text, prompts=prompts, second_error=again.error)
    return SmokeReport(endpoint=endpoint, transport=transport, target=target, threshold=threshold, results=results,
                       skipped=tuple(skipped), canary=checks)
