"""The silent-failure canary of ``hpdpd smoke``: a long prompt can stream text and still have gone wrong.

Three checks, over the logs written while the smoke prompts ran:

- ``canary:routing``: the router's DPD counter moved for the long prompt, not its fallback counter. The operator's
  router metric names are not published, so the router's own decision line is counted: ``Conditional routing:
  estimated_tokens=<n>, threshold=<t>, disaggregate=True|False`` (DPD documentation, "Verify KV transfer").
- ``canary:decoder-kv``: the decoder loaded the prefiller's KV instead of recomputing it: LMCache's ``Retrieved N out
  of M required tokens`` with N > 0 (LMCache ``lmcache/v1/cache_engine.py``), and none of the known failure lines:
  ``Retrieved 0 out of M`` (the decoder recomputed; DPD troubleshooting) and ``Failed to allocate memory object,
  retrying...`` (the PD buffer is full; LMCache ``lmcache/v1/storage_backend/pd_backend.py``).
- ``canary:determinism``: the same greedy long prompt, sent twice, gives the same text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.ops.checks import Check

ROUTING = re.compile(r"Conditional routing: estimated_tokens=(\d+), threshold=(\d+), disaggregate=(True|False)")
RETRIEVED = re.compile(r"Retrieved (\d+) out of (\d+) required tokens")
BUFFER_FULL = "Failed to allocate memory object, retrying"
RECOMPUTE_CAUSE = ("the decoder recomputed the prefill instead of loading the transferred KV (DPD troubleshooting, "
                   "'Retrieved 0 out of N'): wrong roles, different prefill and decode images, or PYTHONHASHSEED "
                   "missing")
BUFFER_CAUSE = ("the decoder's PD buffer is full (PD_BUFFER_SIZE): raise pd_buffer_size (16 or 32 GiB), lower "
                "concurrency, or lower the decoder's --gpu-memory-utilization to make room")


@dataclass(frozen=True, kw_only=True)
class CanaryLogs:
    """The router's and the decoder's log lines written since the smoke started (None: not readable)."""

    router: str | None
    decoder: str | None


LogSource = Callable[[float], CanaryLogs]  # seconds since the smoke started -> logs


def routing_check(router_log: str | None, *, long_prompts: int, short_prompts: int) -> Check:
    if router_log is None:
        return Check(name="canary:routing", status="warn", detail="no router pod to read",
                     cause="the router of this IEC was not found in hyperpod-inference-system")
    decisions = [(int(e), int(t), d == "True") for e, t, d in ROUTING.findall(router_log)]
    dpd = sum(1 for *_, d in decisions if d)
    fallback = len(decisions) - dpd
    detail = f"DPD routing counter +{dpd}, fallback counter +{fallback} for {long_prompts} long prompt(s)"
    if dpd >= long_prompts:
        return Check(name="canary:routing", status="pass", detail=detail)
    if fallback > short_prompts:
        estimate, threshold, _ = max((d for d in decisions if not d[2]), key=lambda d: d[0])
        return Check(name="canary:routing", status="fail",
                     detail=f"{detail}: the long prompt took the fallback path (estimated_tokens={estimate}, "
                            f"threshold={threshold})",
                     cause="the router's token estimate of the long prompt is under routing.threshold (its "
                           "tokenizer counts fewer tokens than the model's): lower routing.threshold (platform "
                           "docs section 19, 'Long prompts never disaggregate')")
    return Check(name="canary:routing", status="fail", detail=detail,
                 cause="the router logged no decision for the long prompt: the request bypassed the router (a URL "
                       "straight to a pod?) or the router's log level hides INFO lines")


def decoder_check(decoder_log: str | None) -> Check:
    if decoder_log is None:
        return Check(name="canary:decoder-kv", status="warn", detail="no decode pod to read",
                     cause="the decode pod of this IEC was not found")
    if BUFFER_FULL in decoder_log:
        count = decoder_log.count(BUFFER_FULL)
        return Check(name="canary:decoder-kv", status="fail",
                     detail=f"'{BUFFER_FULL}...' {count} time(s) in the decoder's log", cause=BUFFER_CAUSE)
    retrieved = [(int(n), int(m)) for n, m in RETRIEVED.findall(decoder_log)]
    misses = [(n, m) for n, m in retrieved if n == 0 and m > 0]
    if misses:
        return Check(name="canary:decoder-kv", status="fail",
                     detail=f"'Retrieved 0 out of {misses[0][1]} required tokens' ({len(misses)} line(s))",
                     cause=RECOMPUTE_CAUSE)
    hits = [(n, m) for n, m in retrieved if n > 0]
    if not hits:
        return Check(name="canary:decoder-kv", status="fail", detail="no 'Retrieved N out of M' line since the smoke "
                                                                     "started",
                     cause="no decoder-side KV hit: the long prompt was not disaggregated (see canary:routing) or "
                           "LMCache's INFO lines are not logged")
    return Check(name="canary:decoder-kv", status="pass",
                 detail=f"decoder-side KV hit: 'Retrieved {hits[-1][0]} out of {hits[-1][1]} required tokens' "
                        f"({len(hits)} line(s)); no recompute or buffer-full line")


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


def canary_checks(logs: CanaryLogs, *, first: str | None, second: str | None, long_prompts: int,
                  short_prompts: int, second_error: str | None = None) -> tuple[Check, ...]:
    return (routing_check(logs.router, long_prompts=long_prompts, short_prompts=short_prompts),
            decoder_check(logs.decoder), determinism_check(first, second, second_error=second_error))


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
