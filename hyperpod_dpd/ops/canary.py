"""The silent-failure canary of ``hpdpd smoke``: a long prompt can stream text and still have gone wrong.

Three checks, over the logs written while the smoke prompts ran:

- ``canary:routing``: the router's DPD counter moved for the long prompt, not its fallback counter. The operator's
  router metric names are not published, so the router's own decision line is counted: ``Conditional routing:
  estimated_tokens=<n>, threshold=<t>, disaggregate=True|False`` (DPD documentation, "Verify KV transfer").
- ``canary:decoder-kv``: the decoder loaded the prefiller's KV instead of recomputing it: LMCache's ``Retrieved N out
  of M required tokens (from T total tokens)`` with N > 0 (LMCache 0.4.3 ``lmcache/v1/cache_engine.py:887``), and none
  of the known failure lines: ``Retrieved 0 out of M`` (the decoder recomputed; DPD troubleshooting) and ``Failed to
  allocate memory object, retrying...`` (the PD buffer is full; LMCache ``lmcache/v1/storage_backend/pd_backend.py``).
- ``canary:determinism``: the same greedy long prompt, sent twice, gives the same text.

Whose lines. An endpoint may serve other clients while the smoke runs, so a line counts only when it can be the
smoke's own:

- The router logs one decision per request it routes (the DPD documentation shows one a prompt). When it logged no
  more decisions than the smoke sent prompts, the endpoint was idle and every line is the smoke's: the checks count
  them all (as on an idle endpoint they always did).
- The router's line names no request, and its estimator is not published: the DPD documentation's long example (600
  sentences, 27,000 characters, logged as ``estimated_tokens=6750``, while the decoder's LMCache counted 6035 tokens)
  fits characters / 4, its short example (53 characters logged as 12) does not. Unconfirmed, so the estimate is not
  compared with the prompt and the router's lines alone cannot be attributed.
- The decoder's line can be: the decoder retrieves ``tokens[:lmcache_cached_tokens]`` (LMCache 0.4.3
  ``lmcache/integration/vllm/vllm_v1_adapter.py:838-842``), so on a full hit T is the prompt's length in the decoder's
  tokens, which is the ``prompt_tokens`` of the stream's usage event (vLLM ``vllm/entrypoints/openai/serving_chat.py``
  ``chat_completion_stream_generator``: ``len(res.prompt_token_ids)``). M is T less vLLM's own prefix-cache hit
  rounded down to LMCache's chunk (adapter :801-806, ``cache_engine.py:796``), so the second run of the same prompt
  may need fewer tokens, or load none. A line whose T (M where a wording has no T) equals the long prompt's
  ``prompt_tokens`` is the smoke's; another prompt of exactly that length would pass for it.

With other traffic (more decisions than prompts; without the router's log, decoder lines of another length):
``canary:decoder-kv`` fails on the smoke's own ``Retrieved 0`` line and passes on its own hit (WARN when other
traffic's lines show a recompute or a full buffer); ``canary:routing`` fails when fewer decisions disaggregated than
the smoke sent long prompts (those lines include the smoke's) and passes when the decoder loaded the long prompt's
KV (the PD receiver holds only KV a prefiller sent, LMCache 0.4.3 ``cache_engine.py:181`` removes it once retrieved;
both long prompts are the same text, so the router's estimate of them is one number). Otherwise each WARNs: "other
traffic during the smoke: N decisions for M prompts, cannot attribute". No line at all still fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.ops.checks import Check

ROUTING = re.compile(r"Conditional routing: estimated_tokens=(\d+), threshold=(\d+), disaggregate=(True|False)")
# LMCache 0.4.3 cache_engine.py:887 "[req_id=%s] Retrieved %d out of %d required tokens (from %d total tokens). ..."
RETRIEVED = re.compile(r"Retrieved (\d+) out of (\d+) required tokens(?: \(from (\d+) total tokens\))?")
BUFFER_FULL = "Failed to allocate memory object, retrying"
RECOMPUTE_CAUSE = ("the decoder recomputed the prefill instead of loading the transferred KV (DPD troubleshooting, "
                   "'Retrieved 0 out of N'): wrong roles, different prefill and decode images, or PYTHONHASHSEED "
                   "missing")
BUFFER_CAUSE = ("the decoder's PD buffer is full (PD_BUFFER_SIZE): raise pd_buffer_size (16 or 32 GiB), lower "
                "concurrency, or lower the decoder's --gpu-memory-utilization to make room")
UNATTRIBUTED_CAUSE = ("the endpoint served other clients while the smoke ran and their lines cannot be told from the "
                      "smoke's: run the smoke while the endpoint is idle")


@dataclass(frozen=True, kw_only=True)
class CanaryLogs:
    """The router's and the decoder's log lines written since the smoke started (None: not readable)."""

    router: str | None
    decoder: str | None


LogSource = Callable[[float], CanaryLogs]  # seconds since the smoke started -> logs


@dataclass(frozen=True, kw_only=True)
class SentPrompts:
    """What the smoke sent: its long and short prompts, and the long prompt's length as vLLM counted it (the
    ``prompt_tokens`` of its usage event; None when the stream reported none)."""

    long: int
    short: int
    long_tokens: int | None = None

    @property
    def sent(self) -> int:
        return self.long + self.short


@dataclass(frozen=True)
class Retrieval:
    retrieved: int
    required: int
    total: int | None  # None: a wording without "(from T total tokens)"

    def of(self, tokens: int | None) -> bool:
        """This line is of a prompt of ``tokens`` tokens (never when the length is not known)."""
        return tokens is not None and (self.total if self.total is not None else self.required) == tokens


def retrievals(decoder_log: str) -> list[Retrieval]:
    return [Retrieval(int(n), int(m), int(t) if t else None) for n, m, t in RETRIEVED.findall(decoder_log)]


def decisions(router_log: str) -> list[tuple[int, int, bool]]:
    return [(int(e), int(t), d == "True") for e, t, d in ROUTING.findall(router_log)]


def other_traffic(router_log: str | None, prompts: SentPrompts) -> str | None:
    """How the router's log shows other clients' requests (None: it shows none, or cannot be read)."""
    count = len(decisions(router_log)) if router_log is not None else 0
    return f"{count} decisions for {prompts.sent} prompts" if count > prompts.sent else None


def long_prompt_loaded(decoder_log: str | None, prompts: SentPrompts) -> bool:
    """The decoder's log has a KV hit of the long prompt's length (see the module's docstring)."""
    return decoder_log is not None and any(r.retrieved > 0 and r.of(prompts.long_tokens)
                                           for r in retrievals(decoder_log))


def routing_check(router_log: str | None, *, prompts: SentPrompts, long_prompt_loaded: bool = False) -> Check:
    """``long_prompt_loaded``: the decoder loaded KV attributed to the long prompt (:func:`long_prompt_loaded`)."""
    if router_log is None:
        return Check(name="canary:routing", status="warn", detail="no router pod to read",
                     cause="the router of this IEC was not found in hyperpod-inference-system")
    found = decisions(router_log)
    dpd = sum(1 for *_, d in found if d)
    fallback = len(found) - dpd
    detail = f"DPD routing counter +{dpd}, fallback counter +{fallback} for {prompts.long} long prompt(s)"
    busy = other_traffic(router_log, prompts)
    if busy is not None:
        detail = f"{detail}; other traffic during the smoke: {busy}"
        if dpd < prompts.long:
            return Check(name="canary:routing", status="fail",
                         detail=f"{detail}: fewer decisions disaggregated than long prompts were sent",
                         cause="a long prompt took the fallback path (the router's token estimate is under "
                               "routing.threshold: lower it, platform docs section 19) or bypassed the router")
        if long_prompt_loaded:
            return Check(name="canary:routing", status="pass",
                         detail=f"{detail}; the decoder loaded the KV of a prompt of the long prompt's "
                                f"{prompts.long_tokens} tokens, so the router disaggregated it")
        return Check(name="canary:routing", status="warn", detail=f"{detail}, cannot attribute",
                     cause=UNATTRIBUTED_CAUSE + " (the router's line names no request)")
    if dpd >= prompts.long:
        return Check(name="canary:routing", status="pass", detail=detail)
    if fallback > prompts.short:
        estimate, threshold, _ = max((d for d in found if not d[2]), key=lambda d: d[0])
        return Check(name="canary:routing", status="fail",
                     detail=f"{detail}: the long prompt took the fallback path (estimated_tokens={estimate}, "
                            f"threshold={threshold})",
                     cause="the router's token estimate of the long prompt is under routing.threshold (its "
                           "tokenizer counts fewer tokens than the model's): lower routing.threshold (platform "
                           "docs section 19, 'Long prompts never disaggregate')")
    return Check(name="canary:routing", status="fail", detail=detail,
                 cause="the router logged no decision for the long prompt: the request bypassed the router (a URL "
                       "straight to a pod?) or the router's log level hides INFO lines")


def decoder_check(decoder_log: str | None, *, prompts: SentPrompts | None = None,
                  router_log: str | None = None) -> Check:
    """Without ``router_log`` (not readable), decoder lines of another length than the long prompt's show other
    traffic; without ``prompts`` every line counts."""
    if decoder_log is None:
        return Check(name="canary:decoder-kv", status="warn", detail="no decode pod to read",
                     cause="the decode pod of this IEC was not found")
    tokens = prompts.long_tokens if prompts is not None else None
    found = retrievals(decoder_log)
    others = [r for r in found if not r.of(tokens)]
    busy = other_traffic(router_log, prompts) if prompts is not None else None
    if busy is None and router_log is None and tokens is not None and others:
        busy = f"{len(others)} 'Retrieved' line(s) of prompts other than the long prompt's {tokens} tokens"
    if busy is None or not found:  # idle, or no prompt's KV loaded at all (the smoke's included)
        return _idle_decoder_check(decoder_log, found)
    busy = f"other traffic during the smoke: {busy}"
    own = [r for r in found if r.of(tokens)]
    own_misses = [r for r in own if r.retrieved == 0 and r.required > 0]
    if own_misses:
        return Check(name="canary:decoder-kv", status="fail",
                     detail=f"'Retrieved 0 out of {own_misses[0].required} required tokens' for the long prompt's "
                            f"{tokens} tokens ({len(own_misses)} line(s); {busy})", cause=RECOMPUTE_CAUSE)
    own_hits = [r for r in own if r.retrieved > 0]
    if not own_hits:
        why = "the long prompt's usage event carried no prompt_tokens" if tokens is None else \
            f"no line of the long prompt's {tokens} tokens"
        return Check(name="canary:decoder-kv", status="warn",
                     detail=f"{busy}, cannot attribute ({len(found)} 'Retrieved' line(s), {why})",
                     cause=UNATTRIBUTED_CAUSE)
    hit = own_hits[-1]
    detail = (f"decoder-side KV hit for the long prompt: 'Retrieved {hit.retrieved} out of {hit.required} required "
              f"tokens (from {hit.total or hit.required} total tokens)' ({len(own_hits)} line(s)); {busy}")
    trouble = sum(1 for r in others if r.retrieved == 0 and r.required > 0)
    full = decoder_log.count(BUFFER_FULL)
    if trouble or full:
        causes = [RECOMPUTE_CAUSE] * bool(trouble) + [BUFFER_CAUSE] * bool(full)
        return Check(name="canary:decoder-kv", status="warn",
                     detail=f"{detail}; the other lines hold {trouble} 'Retrieved 0' and {full} '{BUFFER_FULL}' "
                            "line(s), which cannot be attributed", cause="; or ".join(causes))
    return Check(name="canary:decoder-kv", status="pass", detail=detail)


def _idle_decoder_check(decoder_log: str, found: list[Retrieval]) -> Check:
    """Every line is the smoke's (or there is none)."""
    if BUFFER_FULL in decoder_log:
        count = decoder_log.count(BUFFER_FULL)
        return Check(name="canary:decoder-kv", status="fail",
                     detail=f"'{BUFFER_FULL}...' {count} time(s) in the decoder's log", cause=BUFFER_CAUSE)
    misses = [r for r in found if r.retrieved == 0 and r.required > 0]
    if misses:
        return Check(name="canary:decoder-kv", status="fail",
                     detail=f"'Retrieved 0 out of {misses[0].required} required tokens' ({len(misses)} line(s))",
                     cause=RECOMPUTE_CAUSE)
    hits = [r for r in found if r.retrieved > 0]
    if not hits:
        return Check(name="canary:decoder-kv", status="fail", detail="no 'Retrieved N out of M' line since the smoke "
                                                                     "started",
                     cause="no decoder-side KV hit: the long prompt was not disaggregated (see canary:routing) or "
                           "LMCache's INFO lines are not logged")
    return Check(name="canary:decoder-kv", status="pass",
                 detail=f"decoder-side KV hit: 'Retrieved {hits[-1].retrieved} out of {hits[-1].required} required "
                        f"tokens' ({len(hits)} line(s)); no recompute or buffer-full line")


def determinism_check(first: str | None, second: str | None, *, second_error: str | None = None) -> Check:
    """``first`` and ``second``: the texts of the two runs of the long prompt (None: that run failed; the first run's
    failure is in the prompts' results, the second run is the canary's own request, so its failure fails here)."""
    if first is None:
        return Check(name="canary:determinism", status="warn", detail="a long prompt failed; nothing to compare",
                     cause="see the prompts' results")
    if second is None:
        return Check(name="canary:determinism", status="fail",
                     detail=f"the second run of the long prompt failed: {second_error or 'no text'}",
                     cause="the disaggregated path fails intermittently: check the router's, prefill's and "
                           "decoder's logs around the failure")
    if first == second:
        return Check(name="canary:determinism", status="pass",
                     detail=f"the greedy long prompt gave the same {len(first)} characters twice")
    at = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b), min(len(first), len(second)))
    return Check(name="canary:determinism", status="fail",
                 detail=f"the greedy long prompt gave different text on the second run (from character {at}: "
                        f"{first[at:at + 24]!r} vs {second[at:at + 24]!r})",
                 cause="the decoder did not continue from the same KV both times: a corrupt or partial transfer, "
                       "or prefill and decode running different images, model revisions or PYTHONHASHSEED")


def canary_checks(logs: CanaryLogs, *, first: str | None, second: str | None, prompts: SentPrompts,
                  second_error: str | None = None) -> tuple[Check, ...]:
    loaded = long_prompt_loaded(logs.decoder, prompts)
    return (routing_check(logs.router, prompts=prompts, long_prompt_loaded=loaded),
            decoder_check(logs.decoder, prompts=prompts, router_log=logs.router),
            determinism_check(first, second, second_error=second_error))


def cluster_logs(kube: Any, *, namespace: str, iec: str) -> LogSource:
    """Read the router's and the decoder's log lines of the last ``seconds`` (plus a margin) through the API."""
    from hyperpod_dpd.ops.workloads import ROUTER_CONTAINER, dpd_pods, pod_log, router_pods

    def read(seconds: float) -> CanaryLogs:
        since = int(seconds) + 5
        routers = router_pods(kube, namespace=namespace, iec=iec)
        decoders = [p for p in dpd_pods(kube, namespace=namespace, iec=iec) if p.role == "decode"]
        router = "\n".join(pod_log(kube, p, container=ROUTER_CONTAINER, since_seconds=since) for p in routers) \
            if routers else None
        decoder = "\n".join(pod_log(kube, p, since_seconds=since) for p in decoders) if decoders else None
        return CanaryLogs(router=router, decoder=decoder)

    return read
