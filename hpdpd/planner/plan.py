"""One sizing plan: recommendations, predictions for both serving modes at every load, and the verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE, DEFAULT_ROUTING_THRESHOLD, MAX_DECODE_REPLICAS
from hyperpod_dpd.planner import recommend
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.formulas import efa_bytes_per_s, free_bytes_per_gpu, kv_transfer_seconds
from hyperpod_dpd.planner.recommend import PlanError, Verdict
from hyperpod_dpd.planner.serving import Colocated, Disaggregated, Point
from hyperpod_dpd.planner.workload import Workload

_UNBOUNDED_PREFILL = 10_000  # prefill replicas that never queue: isolates what one decoder can serve


@dataclass(frozen=True)
class Layout:
    prefill_nodes: int
    decode_nodes: int
    baseline_nodes: int


@dataclass(frozen=True)
class Recommendation:
    prefill_replicas: int
    decode_replicas: int
    routing_threshold: int
    break_even_tokens: int | None
    pd_buffer_size_bytes: int
    tensor_parallel_size: int
    max_model_len: int
    routing_strategy: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Prediction:
    load: float
    colocated: Point
    disaggregated: Point


@dataclass(frozen=True)
class Plan:
    model: ModelSpec
    instance: InstanceSpec
    workload: Workload
    layout: Layout
    kv_bytes_per_token: int
    kv_transfer_s: float
    efa_gbytes_per_s: float
    recommendation: Recommendation
    predictions: tuple[Prediction, ...]
    verdict: Verdict
    warnings: tuple[str, ...]

    @property
    def load_name(self) -> str:
        return "concurrency" if self.workload.closed_loop else "request rate"

    def to_dict(self) -> dict[str, Any]:
        r = self.recommendation
        return {
            "model": self.model.name,
            "instance_type": self.instance.name,
            "workload": {
                "input_tokens": self.workload.inputs.describe(),
                "output_tokens": self.workload.outputs.describe(),
                "mean_input_tokens": round(self.workload.inputs.mean, 1),
                "mean_output_tokens": round(self.workload.outputs.mean, 1),
            },
            "layout": {"prefill_nodes": self.layout.prefill_nodes, "decode_nodes": self.layout.decode_nodes,
                       "baseline_nodes": self.layout.baseline_nodes},
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_per_rank": self.model.kv_bytes_per_token_per_rank(r.tensor_parallel_size),
            "kv_transfer_ms": round(self.kv_transfer_s * 1e3, 3),
            "efa_effective_gbytes_per_s": round(self.efa_gbytes_per_s, 2),
            "recommendation": {
                "prefill_replicas": r.prefill_replicas,
                "decode_replicas": r.decode_replicas,
                "routing_threshold": r.routing_threshold,
                "break_even_tokens": r.break_even_tokens,
                "pd_buffer_size_bytes": r.pd_buffer_size_bytes,
                "tensor_parallel_size": r.tensor_parallel_size,
                "max_model_len": r.max_model_len,
                "routing_strategy": r.routing_strategy,
                "reasons": list(r.reasons),
            },
            "predictions": [self._prediction(p) for p in self.predictions],
            "verdict": {"decision": self.verdict.decision, "pays_off": self.verdict.pays_off,
                        "reasons": list(self.verdict.reasons)},
            "warnings": list(self.warnings),
        }

    def _prediction(self, prediction: Prediction) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.workload.closed_loop:
            out["concurrency"] = int(prediction.load)
        else:
            out["request_rate_per_s"] = prediction.load
            out["concurrency"] = None
        for mode, point in (("colocated", prediction.colocated), ("disaggregated", prediction.disaggregated)):
            out[mode] = _point_dict(point)
        return out


def _finite(value: float, digits: int) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else round(value, digits)


def _point_dict(point: Point) -> dict[str, Any]:
    return {
        "ttft_ms": _finite(point.ttft_s * 1e3, 1),
        "tpot_ms": _finite(point.tpot_s * 1e3, 2),
        "output_tokens_per_s": round(point.output_tokens_per_s, 1),
        "max_itl_ms": _finite(point.max_itl_s * 1e3, 1),
        "request_rate_per_s": round(point.request_rate, 3),
        "mean_concurrency": _finite(point.concurrency, 1),
        "decode_batch": _finite(point.decode_batch, 1),
        "prefill_utilization": round(point.prefill_utilization, 3),
        "saturated": point.saturated,
    }


class _Planner:
    """Builds the serving systems once per layout and threshold, so a plan solves each closed loop only once."""

    def __init__(self, model: ModelSpec, instance: InstanceSpec, workload: Workload, tp: int,
                 calibration: Calibration):
        self.model, self.instance, self.workload, self.tp, self.calibration = (
            model, instance, workload, tp, calibration)
        self._points: dict[tuple[Any, ...], Point] = {}

    def colocated(self, nodes: int, load: float) -> Point:
        key = ("c", nodes, load)
        if key not in self._points:
            system = Colocated(model=self.model, instance=self.instance, tensor_parallel=self.tp, nodes=nodes,
                               workload=self.workload, calibration=self.calibration)
            self._points[key] = self._solve(system, load)
        return self._points[key]

    def disaggregated(self, prefill: int, decode: int, threshold: int, buffer: float, load: float) -> Point:
        key = ("d", prefill, decode, threshold, buffer, load)
        if key not in self._points:
            system = self.dpd_system(prefill, decode, threshold, buffer)
            self._points[key] = self._solve(system, load)
        return self._points[key]

    def dpd_system(self, prefill: int, decode: int, threshold: int, buffer: float) -> Disaggregated:
        return Disaggregated(model=self.model, instance=self.instance, tensor_parallel=self.tp, prefill=prefill,
                             decode=decode, threshold=threshold, workload=self.workload,
                             calibration=self.calibration, pd_buffer_bytes=buffer)

    def _solve(self, system: Colocated | Disaggregated, load: float) -> Point:
        return system.at_concurrency(load) if self.workload.closed_loop else system.at_rate(load)


def make_plan(*, model: ModelSpec, instance: InstanceSpec, workload: Workload, prefill_nodes: int | None = None,
              decode_nodes: int | None = None, baseline_nodes: int | None = None,
              calibration: Calibration = DEFAULT_CALIBRATION) -> Plan:
    """Recommend a DPD layout for ``workload`` and predict it against colocated serving on the same node count."""
    if not instance.is_gpu:
        raise PlanError(f"{instance.name} has no GPUs; plan on a DPD GPU instance type")
    for name, value in (("prefill nodes", prefill_nodes), ("decode nodes", decode_nodes),
                        ("baseline nodes", baseline_nodes)):
        if value is not None and value < 1:
            raise PlanError(f"{name} must be at least 1, got {value}")
    tp_decision = recommend.tensor_parallel_size(model=model, instance=instance, calibration=calibration)
    tp = tp_decision.value
    length = recommend.max_model_len(model=model, peak_tokens=workload.peak_tokens)
    recommend.require_decoder_room(model=model, instance=instance, tensor_parallel=tp,
                                   peak_tokens=workload.peak_tokens, calibration=calibration)
    planner = _Planner(model, instance, workload, tp, calibration)
    peak = max(workload.loads)
    decode = decode_nodes or 1
    warnings: list[str] = []

    def ratio(threshold: int) -> recommend.Decision:
        system = planner.dpd_system(_UNBOUNDED_PREFILL, decode, threshold, DEFAULT_PD_BUFFER_SIZE)
        limited = planner.disaggregated(_UNBOUNDED_PREFILL, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
        share = system.remote_share
        service = system.service / share if share else 0.0
        if limited.saturated:  # open loop past the decoder: size prefill for the offered rate
            rate = 0.0 if workload.closed_loop else peak
        else:
            rate = limited.request_rate
        return recommend.prefill_replicas(decode_limited_rate=rate, remote_share=share, mean_service_s=service,
                                          calibration=calibration)

    # 1. ratio and operating point at the measured default threshold, 2. the break-even there, 3. the final ratio
    first = ratio(DEFAULT_ROUTING_THRESHOLD)
    prefill = prefill_nodes or first.value
    operating = planner.disaggregated(prefill, decode, DEFAULT_ROUTING_THRESHOLD, DEFAULT_PD_BUFFER_SIZE, peak)
    system = planner.dpd_system(prefill, decode, DEFAULT_ROUTING_THRESHOLD, DEFAULT_PD_BUFFER_SIZE)
    batch = operating.decode_batch if not operating.saturated else system.kv_slots / workload.decode_context
    break_even = recommend.break_even_tokens(model=model, instance=instance, tensor_parallel=tp, costs=system.costs,
                                             batch=batch, decode_context=workload.decode_context,
                                             limit=model.max_context,
                                             calibration=calibration)
    threshold = recommend.routing_threshold(break_even, limit=model.max_context)
    final = ratio(threshold.value) if threshold.value != DEFAULT_ROUTING_THRESHOLD else first
    prefill = prefill_nodes or final.value
    layout = Layout(prefill, decode, baseline_nodes or prefill + decode)

    remote = [(n, p) for n, p in workload.inputs.points if n >= threshold.value]
    share = sum(p for _, p in remote)
    in_flight = peak * share if workload.closed_loop else _rate_in_flight(planner, layout, threshold.value, peak,
                                                                           share)
    decoder_free = free_bytes_per_gpu(model=model, instance=instance, tensor_parallel=tp,
                                      utilization=calibration.dpd_memory_utilization, calibration=calibration)
    buffer = recommend.pd_buffer_size(in_flight=in_flight if share else 0.0,
                                      prompt_tokens=max((n for n, _ in remote), default=workload.inputs.maximum),
                                      bytes_per_token_per_rank=model.kv_bytes_per_token_per_rank(tp),
                                      decoder_free_bytes=decoder_free)

    predictions = tuple(
        Prediction(load, planner.colocated(layout.baseline_nodes, load),
                   planner.disaggregated(layout.prefill_nodes, layout.decode_nodes, threshold.value, buffer.value,
                                         load))
        for load in workload.loads)

    warnings.extend(_warnings(model, layout, predictions, buffer.value, planner, threshold.value, workload))
    context = _context(model, share, threshold.value, workload)
    result = recommend.verdict(loads=workload.loads, pairs=[(p.colocated, p.disaggregated) for p in predictions],
                               remote_share=share, threshold=threshold.value,
                               load_name="concurrency" if workload.closed_loop else "request rate",
                               context=context)
    strategy_reason = ("routing strategy prefixaware (operator default, right for one prefiller)" if prefill == 1 else
                       "routing strategy prefixaware keeps shared prefixes on one prefiller; the DPD page suggests "
                       "roundrobin with several prefillers when prompts share little")
    recommendation = Recommendation(
        prefill_replicas=final.value, decode_replicas=MAX_DECODE_REPLICAS, routing_threshold=threshold.value,
        break_even_tokens=break_even, pd_buffer_size_bytes=buffer.value, tensor_parallel_size=tp,
        max_model_len=length, routing_strategy="prefixaware",
        reasons=(*final.reasons,
                 f"1 decode replica: the operator supports {MAX_DECODE_REPLICAS} decoder per endpoint today",
                 *threshold.reasons, *buffer.reasons, *tp_decision.reasons,
                 f"max_model_len {length:,}: the longest request is {workload.peak_tokens:,} tokens",
                 strategy_reason))
    return Plan(
        model=model, instance=instance, workload=workload, layout=layout,
        kv_bytes_per_token=model.kv_bytes_per_token,
        kv_transfer_s=kv_transfer_seconds(model=model, instance=instance, tensor_parallel=tp,
                                          tokens=workload.inputs.mean, calibration=calibration),
        efa_gbytes_per_s=efa_bytes_per_s(instance=instance, tensor_parallel=tp, calibration=calibration) / 1e9,
        recommendation=recommendation, predictions=predictions, verdict=result, warnings=tuple(warnings))


def _rate_in_flight(planner: _Planner, layout: Layout, threshold: int, rate: float, share: float) -> float:
    """Requests resident in DPD at the highest rate; past saturation, as many as the decoders' KV cache holds."""
    point = planner.disaggregated(layout.prefill_nodes, layout.decode_nodes, threshold, DEFAULT_PD_BUFFER_SIZE, rate)
    if point.saturated:
        system = planner.dpd_system(layout.prefill_nodes, layout.decode_nodes, threshold, DEFAULT_PD_BUFFER_SIZE)
        return system.kv_slots / planner.workload.decode_context * layout.decode_nodes * share
    return point.concurrency * share


def _warnings(model: ModelSpec, layout: Layout, predictions: tuple[Prediction, ...], buffer: float,
              planner: _Planner, threshold: int, workload: Workload) -> list[str]:
    out = []
    if layout.decode_nodes > MAX_DECODE_REPLICAS:
        out.append(f"{layout.decode_nodes} decode nodes: the operator supports {MAX_DECODE_REPLICAS} decode "
                   "replica per endpoint today; these predictions assume a future multi-decoder release")
    system = planner.dpd_system(layout.prefill_nodes, layout.decode_nodes, threshold, buffer)
    streams = system.kv_slots / workload.decode_context
    peak = predictions[-1].disaggregated
    if workload.closed_loop and streams < max(workload.loads) / layout.decode_nodes:
        out.append(f"the decoder's KV cache holds about {streams:.0f} decoding requests of this size, fewer than "
                   f"{max(workload.loads):g} concurrent; the rest wait for a slot. More decode capacity would help, "
                   f"but the operator supports {MAX_DECODE_REPLICAS} decoder: lower concurrency, max_model_len or "
                   "the PD buffer instead")
    if peak.saturated:
        out.append("DPD saturates at the highest load: add prefill nodes or lower the load")
    elif peak.prefill_utilization > 0.9:
        out.append(f"prefill is {peak.prefill_utilization:.0%} busy at the highest load: TTFT is mostly queueing; "
                   "add prefill nodes")
    if model.is_moe:
        out.append(f"{model.key} is a mixture of experts: the DPD page expects little gain for MoE models, and the "
                   "planner's MoE prefill efficiency rests on a single public measurement")
    return out


def _context(model: ModelSpec, share: float, threshold: int, workload: Workload) -> list[str]:
    notes = [f"{share:.0%} of prompts reach the routing threshold ({threshold:,} tokens)"]
    if model.active_parameters < 70e9 and not model.is_moe:
        notes.append(f"{model.key} is below the 70B dense models the DPD page names as the clear case")
    if workload.outputs.mean < 256:
        notes.append(f"outputs average {workload.outputs.mean:,.0f} tokens; the DPD page expects gains from 256 up")
    return notes


__all__ = ["Layout", "Plan", "PlanError", "Prediction", "Recommendation", "make_plan"]
