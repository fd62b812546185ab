"""Seeded failures and healthy series for every alert of a rule file, and the promtool unit-test file they make.

Every scenario names one alert and the groups it must fire in (none: it must stay silent); the expected labels and
annotations come from the rule file itself (the same ``rule_groups`` document promtool loads), so the tests cannot
drift from the rules. Thresholds come from the environment's configuration; seeded values are chosen relative to
them and checked against the PromQL oracle (:func:`promtool.histogram_quantile`) before any file is written.

Series are shaped as the exporters emit them: HyperPod's labels on every model-pod metric (``cluster_id``,
``namespace``, ``resource_name``, ``resource_type``, ``pod_name``, ``node_name``; HyperPod inference observability
page, "Metric dimensions"), operator pod names ``prefill-<iec>-…`` and ``decode-<iec>-…``, vLLM's ``model_name`` and
``engine`` labels (vllm ``vllm/v1/metrics/loggers.py``), LMCache's per-rank ``worker_id`` (LMCache
``lmcache/observability.py``), DCGM's ``gpu``/``UUID``/``Hostname`` labels (NVIDIA/dcgm-exporter README; AWS's
``alert-rules.yaml`` reads ``gpu`` and ``Hostname``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.monitoring.alerts import EndpointTarget, endpoint_targets
from hyperpod_dpd.monitoring.metrics import METRICS, Metric
from hyperpod_dpd.monitoring.signals import HOP_QUANTILE
from tests.hyperpod_dpd.monitoring.promtool import (
    STEPS,
    Series,
    counter,
    gauge,
    histogram,
    histogram_quantile,
    render,
    stepped,
)

# AWS publishes no bucket layout for model_ttfb_milliseconds; these bounds (ms) only give the seeded series a shape.
TTFB_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 1500, 2000, 2500, 5000, 10000, 30000, 60000)
OTHER_GENERATION = "0a1b2c"  # a generation hash that is not the rendered one: the old IEC still serving
# A scenario's series run at a constant rate from the first minute (those that change say when, with their own
# eval_time), so an alert has settled once its longest range and its ``for`` have passed: evaluated then, plus a
# margin for the first samples a rate needs, a silent alert is silent for good and a firing one fires. Each minute
# evaluated costs promtool every rule of the file again, so no case is evaluated longer than its alert needs.
SETTLE_MARGIN_MINUTES = 5
_DURATION = re.compile(r"(\d+)([smh])")
RANGE_SELECTOR = re.compile(r"\[(\d+[smh])(?::\d*[smh]?)?\]")
CLUSTER_ID = "a1b2c3d4e5f6"


@dataclass(frozen=True, kw_only=True)
class Firing:
    """One expected alert: its group, the labels of the expression's sample, and ``$value``."""

    group: str
    labels: Mapping[str, str] = field(default_factory=dict)
    value: float | None = None


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    alert: str
    series: tuple[Series, ...]
    firing: tuple[Firing, ...] = ()
    eval_time: str | None = None  # None: once the alert has settled (settled_eval_time)


# -- exporters ----------------------------------------------------------------------------------------------------------

def _pod(target: EndpointTarget, hop: str, *, generation: str | None = None, replica: int = 0,
         name: str | None = None) -> dict[str, str]:
    resource = f"{name or target.name}-{generation}" if generation else target.resource_name
    return {"cluster_id": CLUSTER_ID, "namespace": target.namespace, "resource_name": resource,
            "resource_type": "InferenceEndpointConfig", "pod_name": f"{hop}-{resource}-6d5f8c7b9-q{replica}x7z",
            "node_name": f"hyperpod-i-0{replica}{hop[0]}4e5d6c7b8a9f0"}


def _vllm(pod: Mapping[str, str]) -> dict[str, str]:
    return {**pod, "model_name": "Llama-3.3-70B-Instruct", "engine": "0"}


def ttfb(pod: Mapping[str, str], observations_ms: Sequence[float], *, method: str = "POST",
         status: str = "200") -> list[Series]:
    labels = {**pod, "method": method, "status": status, "uri": "/v1/chat/completions" if method == "POST" else "/health"}
    return histogram(METRICS["ttfb"].name, labels, TTFB_BUCKETS_MS, observations_ms)


def finished(pod: Mapping[str, str], per_minute: float) -> Series:
    return counter(METRICS["finished"].name, {**_vllm(pod), "finished_reason": "stop"}, per_minute)


def _call(pod: Mapping[str, str], method: str = "POST") -> dict[str, str]:
    return {**pod, "method": method, "uri": "/v1/chat/completions" if method == "POST" else "/health"}


def invocations(pod: Mapping[str, str], per_minute: float, *, method: str = "POST") -> Series:
    return counter(METRICS["invocations"].name, _call(pod, method), per_minute)


def errors(pod: Mapping[str, str], per_minute: float, *, status: str = "500") -> Series:
    return counter(METRICS["errors"].name, {**_call(pod), "status": status}, per_minute)


def _seconds(metric: Metric, pod: Mapping[str, str], observations_ms: Sequence[float], *, ranks: int = 1) -> list[Series]:
    """A histogram in seconds, one copy per tensor-parallel rank (LMCache observes per ``worker_id``)."""
    series: list[Series] = []
    for rank in range(ranks):
        labels = {**pod, **({"worker_id": str(rank)} if ranks > 1 else {})}
        series += histogram(metric.name, labels, metric.buckets, [o / 1000 for o in observations_ms])
    return series


def _unambiguous(value: float, decimals: int) -> bool:
    scaled = value * 10 ** decimals
    return abs(scaled - math.floor(scaled) - 0.5) > 1e-3


def _pick(metric: Metric, threshold_ms: float, factors: Sequence[float], *, above: bool,
          decimals: int) -> tuple[list[float], float]:
    """Observations (ms; most a quarter of the largest, so the P99 interpolates inside the largest one's bucket)
    whose P99 lands above (or below) ``threshold_ms`` and renders with ``decimals`` without a rounding tie."""
    for factor in factors:
        observations = [threshold_ms * factor] * 3 + [threshold_ms * factor / 4] * 7
        value = histogram_quantile(0.99, metric.buckets, [o / 1000 for o in observations]) * 1000
        if (value > threshold_ms) == above and _unambiguous(value, decimals):
            return observations, value
    raise ValueError(f"no seeded value for {metric.name} against {threshold_ms} ms")


# -- endpoint scenarios -------------------------------------------------------------------------------------------------

def _bound(prefill_ms: Sequence[float], decode_ms: Sequence[float]) -> float:
    hop = [histogram_quantile(HOP_QUANTILE, TTFB_BUCKETS_MS, o) for o in (prefill_ms, decode_ms)]
    return (0.0 if math.isnan(hop[0]) else hop[0]) + hop[1]


def _ttft(target: EndpointTarget, name: str, series: Sequence[Series], value: float, *, fires: bool) -> Scenario:
    """A TTFT-bound scenario whose intent (fire or stay silent) the oracle must confirm."""
    if (value > target.slo.ttft_ms) != fires:
        raise ValueError(f"{name}: the bound {value} ms does not {'exceed' if fires else 'stay under'} "
                         f"{target.slo.ttft_ms} ms; choose other seeded values")
    return Scenario(name=name, alert="DpdE2eTtftP99BoundAboveSlo", series=tuple(series),
                    firing=(Firing(group=_group(target), value=value),) if fires else ())


def two_hop_scenario(target: EndpointTarget, prefill_ms: float, decode_ms: float, *, name: str, fires: bool,
                     generation: str | None = None) -> Scenario:
    """Disaggregated requests (a prefill hop and a decode hop each, ten a minute) at the given TTFBs, and the
    decoder's health probes."""
    series = [*ttfb(_pod(target, "prefill", generation=generation), [prefill_ms] * 10),
              *ttfb(_pod(target, "decode", generation=generation), [decode_ms] * 10),
              *ttfb(_pod(target, "decode", generation=generation), [2.0] * 12, method="GET")]
    return _ttft(target, name, series, _bound([prefill_ms] * 10, [decode_ms] * 10), fires=fires)


def _group(target: EndpointTarget) -> str:
    return f"hyperpod-dpd-{target.name}"


def ttft_scenarios(target: EndpointTarget) -> list[Scenario]:
    slo = target.slo.ttft_ms
    idle, decode = _pod(target, "prefill"), _pod(target, "decode")
    decode_only = [slo * 1.2] * 8 + [slo * 0.1] * 2  # requests under the routing threshold: the decoder alone
    probed = [*ttfb(idle, [slo * 0.95]), *ttfb(decode, [slo * 0.15]),  # one request a minute, 250 probes
              *ttfb(idle, [1.0] * 250, method="GET"), *ttfb(decode, [1.0] * 250, method="GET")]
    canary = f"{target.name}-canary"
    return [
        two_hop_scenario(target, slo * 0.95, slo * 0.15, fires=True, name="TTFT bound: two hops over the objective"),
        two_hop_scenario(target, slo * 0.45, slo * 0.15, fires=False, name="TTFT bound: healthy two hops"),
        two_hop_scenario(target, slo * 0.95, slo * 0.15, fires=True, generation=OTHER_GENERATION,
                         name="TTFT bound: the old generation serves while the rendered one has no pods"),
        _ttft(target, "TTFT bound: no disaggregated request in the window (prefill term empty)",
              [*ttfb(idle, []), *ttfb(decode, decode_only)], _bound([], decode_only), fires=True),
        _ttft(target, "TTFT bound: health probes (GET) do not dilute the hops", probed,
              _bound([slo * 0.95], [slo * 0.15]), fires=True),
        _ttft(target, "TTFT bound: no traffic at all", [*ttfb(idle, []), *ttfb(decode, [])], math.nan, fires=False),
        _ttft(target, "TTFT bound: another endpoint whose name starts with this one's",
              [*ttfb(_pod(target, "prefill", name=canary, generation="abcdef"), [slo] * 10),
               *ttfb(_pod(target, "decode", name=canary, generation="abcdef"), [slo] * 10)], math.nan, fires=False),
    ]


def latency_scenarios(target: EndpointTarget, kv_threshold_ms: int) -> list[Scenario]:
    tpot, store, load = METRICS["tpot"], METRICS["kv_store"], METRICS["kv_retrieve"]
    slow_tpot, tpot_value = _pick(tpot, target.slo.tpot_ms, (2, 3, 4, 1.5), above=True, decimals=1)
    fast_tpot, _ = _pick(tpot, target.slo.tpot_ms, (0.3, 0.2, 0.1), above=False, decimals=1)
    slow_kv, kv_value = _pick(store, kv_threshold_ms, (3, 2, 4, 1.5), above=True, decimals=0)
    fast_kv, _ = _pick(store, kv_threshold_ms, (0.2, 0.1, 0.3), above=False, decimals=0)
    prefill, decode, group = _pod(target, "prefill"), _pod(target, "decode"), _group(target)
    return [
        Scenario(name="TPOT: the decoder is slow", alert="DpdTpotP99AboveSlo",
                 series=tuple(_seconds(tpot, _vllm(decode), slow_tpot)),
                 firing=(Firing(group=group, value=tpot_value),)),
        Scenario(name="TPOT: slow prefillers do not count, a fast decoder is healthy", alert="DpdTpotP99AboveSlo",
                 series=(*_seconds(tpot, _vllm(decode), fast_tpot), *_seconds(tpot, _vllm(prefill), slow_tpot))),
        Scenario(name="KV transfer: the prefillers' stores are slow", alert="DpdKvTransferSlow",
                 series=tuple(_seconds(store, _vllm(prefill), slow_kv, ranks=2)),
                 firing=(Firing(group=group, value=kv_value),)),
        Scenario(name="KV transfer: a slow decoder load is not the fabric", alert="DpdKvTransferSlow",
                 series=(*_seconds(store, _vllm(prefill), fast_kv, ranks=2),
                         *_seconds(load, _vllm(decode), slow_kv, ranks=2))),
    ]


def traffic_scenarios(target: EndpointTarget, config: EnvironmentConfig) -> list[Scenario]:
    alerts, group = config.alerts, _group(target)
    prefill, decode = _pod(target, "prefill"), _pod(target, "decode")
    spare = _pod(target, "prefill", replica=1)
    depth = alerts.prefill_queue_depth
    waiting = METRICS["waiting"].name
    high, low = (1 + alerts.fallback_ratio) / 2, alerts.fallback_ratio / 2
    return [
        Scenario(name="Prefill queue: both prefillers queue", alert="DpdPrefillQueueHigh",
                 series=(gauge(waiting, _vllm(prefill), depth + 2), gauge(waiting, _vllm(spare), depth + 6)),
                 firing=(Firing(group=group, value=depth + 4),)),
        Scenario(name="Prefill queue: only the decoder queues", alert="DpdPrefillQueueHigh",
                 series=(gauge(waiting, _vllm(prefill), depth // 2), gauge(waiting, _vllm(decode), depth * 10))),
        Scenario(name="Fallback ratio: most requests skip the prefillers", alert="DpdFallbackRatioHigh",
                 series=(finished(prefill, 20 * (1 - high)), finished(decode, 20)),
                 firing=(Firing(group=group, value=high),)),
        Scenario(name="Fallback ratio: most requests are disaggregated", alert="DpdFallbackRatioHigh",
                 series=(finished(prefill, 20 * (1 - low)), finished(decode, 20))),
    ]


def _failing(target: EndpointTarget, name: str, ratio: float, *, threshold: float, fires: bool) -> Scenario:
    """100 disaggregated requests a minute, ``ratio`` of them failing, half on the prefillers (those never reach the
    decoder) and half on the decoder; the intent must hold for the client's share and the plain sum over both roles
    (which counts a disaggregated request twice) must stay under the threshold, so only the client's share can fire."""
    failed = 100 * ratio
    prefill_errors, decode_errors = failed / 2, failed / 2
    plain = failed / (100 + 100 - prefill_errors)
    if (ratio > threshold) != fires or plain >= threshold:
        raise ValueError(f"{name}: {ratio} against {threshold} (plain sum {plain:.3f}); choose another ratio")
    prefill, decode = _pod(target, "prefill"), _pod(target, "decode")
    series = (invocations(prefill, 100), errors(prefill, prefill_errors, status="503"),
              invocations(decode, 100 - prefill_errors), errors(decode, decode_errors),
              invocations(decode, 30, method="GET"))
    return Scenario(name=name, alert="DpdRequestErrorsHigh", series=series,
                    firing=(Firing(group=_group(target), value=ratio),) if fires else ())


def error_scenarios(target: EndpointTarget, threshold: float) -> list[Scenario]:
    group, alert = _group(target), "DpdRequestErrorsHigh"
    prefill, decode = _pod(target, "prefill"), _pod(target, "decode")
    above, below = threshold * 1.6, threshold / 2
    # the decoder fails `onset` of its requests from minute 20: the ratio crosses the threshold by minute 25, so the
    # alert is pending at 24 min (and already above it then) and firing from 30 min (for: 5m)
    onset = (1 + threshold) / 2
    if not 0.8 * onset > threshold:
        raise ValueError(f"the onset ratio {onset} is not above {threshold} at 24 min; choose another")
    started = (invocations(decode, 100), stepped(METRICS["errors"].name, {**_call(decode), "status": "500"},
                                                 [0] * 21 + [onset * 100 * i for i in range(1, 40)]))
    return [
        _failing(target, "Request errors: above the threshold on both hops (the plain sum of invocations is not)",
                 above, threshold=threshold, fires=True),
        _failing(target, "Request errors: below the threshold", below, threshold=threshold, fires=False),
        Scenario(name="Request errors: above the threshold but not yet for the for: duration", alert=alert,
                 series=started, eval_time="24m"),
        Scenario(name="Request errors: above the threshold for the for: duration", alert=alert, series=started,
                 eval_time="30m", firing=(Firing(group=group, value=onset),)),
        Scenario(name="Request errors: every prefill fails, the decoder is never called", alert=alert,
                 series=(invocations(prefill, 20), errors(prefill, 20, status="503")),
                 firing=(Firing(group=group, value=1),)),
        Scenario(name="Request errors: traffic without any error (no model_errors_total series)", alert=alert,
                 series=(invocations(prefill, 100), invocations(decode, 100))),
        Scenario(name="Request errors: no traffic (old counts, zero rates, no division by zero)", alert=alert,
                 series=(gauge(METRICS["invocations"].name, _call(decode), 500),
                         gauge(METRICS["errors"].name, {**_call(decode), "status": "500"}, 400))),
    ]


def companion_scenarios(target: EndpointTarget) -> list[Scenario]:
    """Each "metrics missing" alert: requests flow and its series is missing (fires), the series is there (silent),
    no traffic (silent)."""
    group, prefill, decode = _group(target), _pod(target, "prefill"), _pod(target, "decode")
    store, ttfb_metric, tpot = METRICS["kv_store"], METRICS["ttfb"], METRICS["tpot"]
    waiting, xid, agg = (METRICS[k].name for k in ("waiting", "xid", "ecc_dbe_aggregate"))
    on = {r: Firing(group=group, labels={"role": r}) for r in ("prefill", "decode")}
    answered = (*ttfb(prefill, [300.0] * 10), *ttfb(decode, [50.0] * 10))  # ten successful POSTs a minute on each
    return [
        Scenario(name="KV metrics missing: prefillers finish requests, no lmcache:time_to_store at all",
                 alert="DpdKvTransferMetricsMissing", series=(finished(prefill, 10), finished(decode, 10)),
                 firing=(on["prefill"],)),
        Scenario(name="KV metrics missing: the histogram exists but never observes", alert="DpdKvTransferMetricsMissing",
                 series=(finished(prefill, 10), *_seconds(store, _vllm(prefill), [])),
                 firing=(on["prefill"],)),
        Scenario(name="KV metrics missing: stores observed", alert="DpdKvTransferMetricsMissing",
                 series=(finished(prefill, 10), *_seconds(store, _vllm(prefill), [20.0] * 10, ranks=2))),
        Scenario(name="KV metrics missing: no traffic, no series", alert="DpdKvTransferMetricsMissing",
                 series=(finished(prefill, 0), finished(decode, 0))),
        Scenario(name="TTFT metrics missing: the decoder's hop is not exported", alert="DpdTtftMetricsMissing",
                 series=(finished(prefill, 10), finished(decode, 10), *ttfb(prefill, [100.0] * 10)),
                 firing=(on["decode"],)),
        Scenario(name="TTFT metrics missing: both hops exported", alert="DpdTtftMetricsMissing",
                 series=(finished(prefill, 10), finished(decode, 10), *ttfb(prefill, [100.0] * 10),
                         *ttfb(decode, [50.0] * 10))),
        Scenario(name="TTFT metrics missing: only GET probes observed", alert="DpdTtftMetricsMissing",
                 series=(finished(prefill, 10), *ttfb(prefill, [1.0] * 10, method="GET"),
                         *histogram(ttfb_metric.name, {**prefill, "method": "POST", "status": "200"}, TTFB_BUCKETS_MS, [])),
                 firing=(on["prefill"],)),
        Scenario(name="Request error metrics missing: the decoder finishes requests, no model_invocations_total",
                 alert="DpdRequestErrorsMetricsMissing", series=(finished(prefill, 10), finished(decode, 10)),
                 firing=(on["decode"],)),
        Scenario(name="Request error metrics missing: only GET probes counted", alert="DpdRequestErrorsMetricsMissing",
                 series=(finished(decode, 10), invocations(decode, 30, method="GET"), invocations(decode, 0)),
                 firing=(on["decode"],)),
        Scenario(name="Request error metrics missing: invocations counted", alert="DpdRequestErrorsMetricsMissing",
                 series=(finished(decode, 10), invocations(decode, 10))),
        Scenario(name="TPOT metrics missing: the decoder finishes requests, only the prefillers observe TPOT",
                 alert="DpdTpotMetricsMissing",
                 series=(finished(decode, 10), *_seconds(tpot, _vllm(prefill), [20.0] * 10)), firing=(on["decode"],)),
        Scenario(name="TPOT metrics missing: the decoder observes TPOT", alert="DpdTpotMetricsMissing",
                 series=(finished(decode, 10), *_seconds(tpot, _vllm(decode), [20.0] * 10))),
        Scenario(name="TPOT metrics missing: no traffic, no series", alert="DpdTpotMetricsMissing",
                 series=(finished(decode, 0),)),
        Scenario(name="Prefill queue metrics missing: prefillers finish requests, only the decoder's queue exported",
                 alert="DpdPrefillQueueMetricsMissing",
                 series=(finished(prefill, 10), gauge(waiting, _vllm(decode), 3)), firing=(on["prefill"],)),
        Scenario(name="Prefill queue metrics missing: an empty queue is exported (0 is a value)",
                 alert="DpdPrefillQueueMetricsMissing",
                 series=(finished(prefill, 10), gauge(waiting, _vllm(prefill), 0))),
        Scenario(name="Prefill queue metrics missing: no traffic, no series", alert="DpdPrefillQueueMetricsMissing",
                 series=(finished(prefill, 0),)),
        Scenario(name="Routing metrics missing: the decoder answers POSTs, its engine exports no request counter",
                 alert="DpdFallbackRatioMetricsMissing", series=(*answered, finished(prefill, 10)),
                 firing=(on["decode"],)),
        Scenario(name="Routing metrics missing: the prefillers answer POSTs, no vLLM metrics there",
                 alert="DpdFallbackRatioMetricsMissing", series=(*answered, finished(decode, 10)),
                 firing=(on["prefill"],)),
        Scenario(name="Routing metrics missing: both roles count finished requests",
                 alert="DpdFallbackRatioMetricsMissing",
                 series=(*answered, finished(prefill, 10), finished(decode, 10))),
        Scenario(name="Routing metrics missing: every request fails (no 2xx), an error, not a missing metric",
                 alert="DpdFallbackRatioMetricsMissing",
                 series=(*ttfb(prefill, [5.0] * 10, status="503"), *ttfb(decode, [5.0] * 10, status="500"))),
        Scenario(name="Routing metrics missing: no traffic, only GET probes answered",
                 alert="DpdFallbackRatioMetricsMissing",
                 series=(*ttfb(prefill, [1.0] * 10, method="GET"), *ttfb(decode, [1.0] * 10, method="GET"))),
        Scenario(name="GPU XID metrics missing: the decoder serves, no DCGM series at all",
                 alert="DpdGpuXidMetricsMissing", series=(finished(decode, 10),), firing=(on["decode"],)),
        Scenario(name="GPU XID metrics missing: the XID gauge is exported (0: no error)",
                 alert="DpdGpuXidMetricsMissing",
                 series=(finished(decode, 10), gauge(xid, GPU, 0))),
        Scenario(name="GPU XID metrics missing: no traffic", alert="DpdGpuXidMetricsMissing",
                 series=(finished(decode, 0),)),
        Scenario(name="GPU ECC metrics missing: DCGM exporter on its default counters (XID, no ECC field)",
                 alert="DpdGpuEccMetricsMissing", series=(finished(decode, 10), gauge(xid, GPU, 0)),
                 firing=(on["decode"],)),
        Scenario(name="GPU ECC metrics missing: the lifetime count alone is enough", alert="DpdGpuEccMetricsMissing",
                 series=(finished(decode, 10), gauge(agg, GPU, 0))),
        Scenario(name="GPU ECC metrics missing: no traffic", alert="DpdGpuEccMetricsMissing",
                 series=(finished(decode, 0), gauge(xid, GPU, 0))),
    ]


# -- node scenarios -----------------------------------------------------------------------------------------------------

GPU = {"gpu": "3", "UUID": "GPU-5f0c1e2a-9b7d-4c3e-8a1f-2d6b7c8e9f01", "device": "nvidia3",
       "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "hyperpod-i-0a1b2c3d4e5f60718"}


def node_scenarios() -> list[Scenario]:
    xid, vol, agg = (METRICS[k].name for k in ("xid", "ecc_dbe_volatile", "ecc_dbe_aggregate"))
    group = "hyperpod-dpd-nodes"
    return [
        Scenario(name="GPU XID: error 79 reported", alert="GPUXidError",
                 series=(stepped(xid, GPU, [0] * 10 + [79] * 10),), eval_time="15m",
                 firing=(Firing(group=group, labels=GPU, value=79),)),
        Scenario(name="GPU XID: none", alert="GPUXidError", series=(gauge(xid, GPU, 0),), eval_time="15m"),
        Scenario(name="GPU ECC: volatile double-bit errors", alert="GPUMemoryErrorDetected",
                 series=(gauge(vol, GPU, 2), gauge(agg, GPU, 2)), eval_time="15m",
                 firing=(Firing(group=group, labels=GPU),)),
        Scenario(name="GPU ECC: the lifetime count grew", alert="GPUMemoryErrorDetected",
                 series=(gauge(vol, GPU, 0), stepped(agg, GPU, [4] * 10 + [5] * 10)), eval_time="12m",
                 firing=(Firing(group=group, labels=GPU),)),
        Scenario(name="GPU ECC: old lifetime errors, none new", alert="GPUMemoryErrorDetected",
                 series=(gauge(vol, GPU, 0), gauge(agg, GPU, 4)), eval_time="15m"),
    ]


def scenarios(config: EnvironmentConfig) -> list[Scenario]:
    """Every alert of the environment's rule file, firing and silent."""
    found: list[Scenario] = []
    for target in endpoint_targets(config):
        found += ttft_scenarios(target) + latency_scenarios(target, config.alerts.kv_transfer_p99_ms)
        found += traffic_scenarios(target, config) + error_scenarios(target, config.alerts.error_ratio)
        found += companion_scenarios(target)
    return found + node_scenarios()


# -- the promtool unit-test file ----------------------------------------------------------------------------------------

def duration_minutes(duration: str) -> float:
    parts = _DURATION.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration this suite reads: {duration!r}")
    return sum(int(n) * {"s": 1 / 60, "m": 1, "h": 60}[u] for n, u in parts)


def settled_eval_time(rules: Sequence[Mapping[str, Any]]) -> str:
    """The minute by which every one of ``rules`` (one alert, per endpoint) has settled over constant series: its
    ``for`` plus its longest range selector (subqueries included) plus the margin. An ``offset`` would look further
    back than the ranges say, so such a rule is refused rather than evaluated too early."""
    longest = 0.0
    for rule in rules:
        if re.search(r"\boffset\b", rule["expr"]):
            raise ValueError(f"{rule['alert']}: an offset needs an explicit eval_time")
        ranges = [duration_minutes(r) for r in RANGE_SELECTOR.findall(rule["expr"])]
        longest = max(longest, duration_minutes(rule.get("for", "0m")) + max(ranges, default=0.0))
    minutes = math.ceil(longest + SETTLE_MARGIN_MINUTES)
    if minutes > STEPS:  # the seeded series end after STEPS minutes: an alert judged later sees none and stays silent
        raise ValueError(f"{rules[0]['alert']} settles at {minutes}m, after the {STEPS}-minute series end")
    return f"{minutes}m"


def unit_tests(rule_file: Mapping[str, Any], rules_path: str, cases: Sequence[Scenario],
               *, check: Callable[[Scenario], None] | None = None) -> dict[str, Any]:
    """promtool's test file for ``cases`` against ``rule_file`` (the parsed document written to ``rules_path``)."""
    rules = {(g["name"], r["alert"]): r for g in rule_file["groups"] for r in g["rules"]}
    by_alert: dict[str, list[Mapping[str, Any]]] = {}
    for (_, alert), rule in rules.items():
        by_alert.setdefault(alert, []).append(rule)
    tests = []
    for case in cases:
        if check is not None:
            check(case)
        expected = []
        for firing in case.firing:
            rule = rules[(firing.group, case.alert)]
            expected.append({
                "exp_labels": {**firing.labels, **rule["labels"]},
                "exp_annotations": {k: render(v, firing.labels, firing.value) for k, v in rule["annotations"].items()}})
        tests.append({"name": case.name, "interval": "1m", "input_series": [s.to_input() for s in case.series],
                      "alert_rule_test": [{"eval_time": case.eval_time or settled_eval_time(by_alert[case.alert]),
                                           "alertname": case.alert,
                                           "exp_alerts": expected}]})
    return {"rule_files": [rules_path], "evaluation_interval": "1m", "tests": tests}
