"""One sizing plan: recommendations, predictions for both serving modes at every load, cost and the SLA verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE, DEFAULT_ROUTING_THRESHOLD, MAX_DECODE_REPLICAS
from hyperpod_dpd.planner import recommend
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.cost import CostSummary, summarize
from hyperpod_dpd.planner.formulas import (
    efa_bytes_per_s,
    exposed_transfer_seconds,
    free_bytes_per_gpu,
    kv_capacity_tokens,
    kv_transfer_seconds,
    prefill_seconds,
    rank_line_rate,
    step_costs,
    valid_tensor_parallel_sizes,
)
from hyperpod_dpd.planner.precision import served
from hyperpod_dpd.planner.recommend import PlanError
from hyperpod_dpd.planner.serving import Colocated, Disaggregated, Point
from hyperpod_dpd.planner.threshold import Candidate, choose
from hyperpod_dpd.planner.verdict import OperatingPoint, Slo, Verdict, operating_point, verdict
from hyperpod_dpd.planner.workload import Workload

_UNBOUNDED_PREFILL = 10_000  # prefill replicas that never queue: isolates what one decoder can serve


@dataclass(frozen=True)
class Layout:
    prefill_nodes: int
    decode_nodes: int
    baseline_nodes: int
    colocated_tp: int = 0  # tensor parallelism of the best colocated layout (0: not chosen yet)
    colocated_replicas: int = 0


@dataclass(frozen=True)
class Recommendation:
    prefill_replicas: int
    decode_replicas: int
    routing_threshold: int
    pd_buffer_size_bytes: int
    tensor_parallel_size: int
    max_model_len: int
    routing_strategy: str
    reasons: tuple[str, ...]
    threshold_candidates: tuple[Candidate, ...] = ()


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
    kv_transfer_s: float  # bulk transfer of a mean-length prompt
    kv_exposed_s: float  # the part of it that reaches TTFT (layer-wise overlap)
    efa_gbytes_per_s: float  # effective, one role's replica
    line_rate_gbytes_per_s: float  # EFA line rate behind one role's replica
    recommendation: Recommendation
    predictions: tuple[Prediction, ...]
    sweep: tuple[Prediction, ...]
    slo: Slo
    operating: tuple[OperatingPoint, OperatingPoint]  # colocated, disaggregated
    verdict: Verdict
    cost: CostSummary | None
    warnings: tuple[str, ...]
    calibration: Calibration = DEFAULT_CALIBRATION

    @property
    def load_name(self) -> str:
        return "concurrency" if self.workload.closed_loop else "request rate"

    @property
    def curve(self) -> tuple[Prediction, ...]:
        """Every predicted load, sweep and requested, in order of load."""
        merged = {p.load: p for p in (*self.sweep, *self.predictions)}
        return tuple(merged[load] for load in sorted(merged))

    def to_dict(self) -> dict[str, Any]:
        from hyperpod_dpd.planner.report import plan_dict

        return plan_dict(self)


class _Planner:
    """Builds the serving systems once per layout and threshold, so a plan solves each closed loop only once."""

    def __init__(self, model: ModelSpec, instance: InstanceSpec, workload: Workload, tp: int,
                 calibration: Calibration):
        self.model, self.instance, self.workload, self.tp, self.calibration = (
            model, instance, workload, tp, calibration)
        self._points: dict[tuple[Any, ...], Point] = {}
        self._systems: dict[tuple[Any, ...], Disaggregated] = {}

    def colocated(self, replicas: int, tp: int, load: float) -> Point:
        key = ("c", replicas, tp, load)
        if key not in self._points:
            system = Colocated(model=self.model, instance=self.instance, tensor_parallel=tp, nodes=replicas,
                               workload=self.workload, calibration=self.calibration)
            self._points[key] = self._solve(system, load)
        return self._points[key]

    def disaggregated(self, prefill: int, decode: int, threshold: int, buffer: float, load: float) -> Point:
        key = ("d", prefill, decode, threshold, buffer, load)
        if key not in self._points:
            self._points[key] = self._solve(self.dpd_system(prefill, decode, threshold, buffer), load)
        return self._points[key]

    def dpd_system(self, prefill: int, decode: int, threshold: int, buffer: float) -> Disaggregated:
        key = (prefill, decode, threshold, buffer)
        if key not in self._systems:
            self._systems[key] = Disaggregated(
                model=self.model, instance=self.instance, tensor_parallel=self.tp, prefill=prefill, decode=decode,
                threshold=threshold, workload=self.workload, calibration=self.calibration, pd_buffer_bytes=buffer)
        return self._systems[key]

    def _solve(self, system: Colocated | Disaggregated, load: float) -> Point:
        return system.at_concurrency(load) if self.workload.closed_loop else system.at_rate(load)


def make_plan(*, model: ModelSpec, instance: InstanceSpec, workload: Workload, prefill_nodes: int | None = None,
              decode_nodes: int | None = None, baseline_nodes: int | None = None,
              calibration: Calibration = DEFAULT_CALIBRATION, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
              max_model_len: int | None = None, slo: Slo = Slo(), sweep: tuple[float, ...] = (),
              prices: Mapping[str, float] | None = None) -> Plan:
    """Recommend a DPD layout for ``workload`` and predict it against colocated serving on the same node count."""
    if not instance.is_gpu:
        raise PlanError(f"{instance.name} has no GPUs; plan on a DPD GPU instance type")
    for name, value in (("prefill nodes", prefill_nodes), ("decode nodes", decode_nodes),
                        ("baseline nodes", baseline_nodes)):
        if value is not None and value < 1:
            raise PlanError(f"{name} must be at least 1, got {value}")
    try:
        model = served(model, instance, weights=weight_dtype, kv=kv_dtype)
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    tp_decision = recommend.tensor_parallel_size(model=model, instance=instance, calibration=calibration)
    tp = tp_decision.value
    length = recommend.max_model_len(model=model, peak_tokens=workload.peak_tokens, given=max_model_len)
    recommend.require_decoder_room(model=model, instance=instance, tensor_parallel=tp, peak_tokens=length.value
                                   if max_model_len else workload.peak_tokens, calibration=calibration)
    planner = _Planner(model, instance, workload, tp, calibration)
    peak = max(workload.loads)
    decode = decode_nodes or 1
    load_label = f"{'concurrency' if workload.closed_loop else 'request rate'} {peak:g}"

    def ratio(threshold: int) -> recommend.Decision:
        share = workload.inputs.share_at_least(threshold)
        if share <= 0:
            return recommend.prefill_replicas(decode_limited_rate=0.0, remote_share=0.0, mean_service_s=0.0,
                                              calibration=calibration)
        if workload.closed_loop and _prefill_busy(planner, 1, decode, threshold, peak) <= \
                calibration.prefill_target_utilization:
            return _prefill_pool(planner, decode, threshold, peak, 1, load_label)
        system = planner.dpd_system(_UNBOUNDED_PREFILL, decode, threshold, DEFAULT_PD_BUFFER_SIZE)
        limited = planner.disaggregated(_UNBOUNDED_PREFILL, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
        service = system.service / share
        if limited.saturated:  # open loop past the decoder: size prefill for the offered rate
            rate = 0.0 if workload.closed_loop else peak
        else:
            rate = limited.request_rate
        estimate = recommend.prefill_replicas(decode_limited_rate=rate, remote_share=share, mean_service_s=service,
                                              calibration=calibration)
        if not workload.closed_loop:
            return estimate
        return _prefill_pool(planner, decode, threshold, peak, estimate.value, load_label)

    ratios: dict[int, recommend.Decision] = {}

    def score(threshold: int) -> Candidate:
        ratios[threshold] = ratio(threshold)
        prefill = prefill_nodes or ratios[threshold].value
        point = planner.disaggregated(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
        share = planner.dpd_system(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE).remote_share
        return Candidate(threshold, share, prefill, point.goodput(slo.ttft_s, slo.tpot_s) / (prefill + decode),
                         point.saturated)

    lengths = sorted(n for n, _ in workload.inputs.points)
    choice = choose(lengths, DEFAULT_ROUTING_THRESHOLD, score, load_label=load_label)
    threshold = choice.chosen.threshold
    final = ratios[threshold]
    prefill = prefill_nodes or final.value
    baseline = baseline_nodes or prefill + decode
    remote = [(n, p) for n, p in workload.inputs.points if n >= threshold]
    share = sum(p for _, p in remote)
    buffer = _buffer(planner, prefill, decode, threshold, peak, share, remote)
    colo_tp, replicas = _colocated_layout(planner, baseline, peak, slo, length.value)
    layout = Layout(prefill, decode, baseline, colo_tp, replicas)

    def predict(load: float) -> Prediction:
        return Prediction(load, planner.colocated(replicas, colo_tp, load),
                          planner.disaggregated(prefill, decode, threshold, buffer.value, load))

    predictions = tuple(predict(load) for load in workload.loads)
    swept = tuple(predict(load) for load in sweep)
    curve = {p.load: p for p in (*swept, *predictions)}
    loads = sorted(curve)
    target = calibration.slo_attainment_target
    colo_op = operating_point(loads, [curve[x].colocated for x in loads], slo, nodes=baseline, target=target)
    dpd_op = operating_point(loads, [curve[x].disaggregated for x in loads], slo, nodes=prefill + decode,
                             target=target)
    colo_label = f"{baseline} node(s), {replicas} x TP{colo_tp}"
    dpd_label = f"{prefill}P + {decode}D"
    result = verdict(loads=workload.loads, pairs=[(p.colocated, p.disaggregated) for p in predictions],
                     colocated=colo_op, disaggregated=dpd_op, slo=slo, remote_share=share, threshold=threshold,
                     load_name="concurrency" if workload.closed_loop else "request rate",
                     colocated_label=colo_label, dpd_label=dpd_label,
                     context=_context(model, share, threshold, workload))
    cost = summarize(instance_type=instance.name, overrides=prices,
                     colocated=(colo_label, baseline, curve[colo_op.load].colocated, colo_op.load),
                     disaggregated=(dpd_label, prefill + decode, curve[dpd_op.load].disaggregated, dpd_op.load))
    strategy_reason = ("routing strategy prefixaware (operator default, right for one prefiller)" if prefill == 1 else
                       "routing strategy prefixaware keeps shared prefixes on one prefiller; the DPD page suggests "
                       "roundrobin with several prefillers when prompts share little")
    recommendation = Recommendation(
        prefill_replicas=final.value, decode_replicas=MAX_DECODE_REPLICAS, routing_threshold=threshold,
        pd_buffer_size_bytes=buffer.value, tensor_parallel_size=tp, max_model_len=length.value,
        routing_strategy="prefixaware", threshold_candidates=choice.candidates,
        reasons=(*final.reasons,
                 f"1 decode replica: the operator supports {MAX_DECODE_REPLICAS} decoder per endpoint today",
                 *choice.reasons, *buffer.reasons, *tp_decision.reasons, *length.reasons, strategy_reason))
    mean_tokens = workload.inputs.mean
    bulk = kv_transfer_seconds(model=model, instance=instance, tensor_parallel=tp, tokens=mean_tokens,
                               calibration=calibration)
    costs = step_costs(model=model, instance=instance, tensor_parallel=tp, calibration=calibration)
    exposed = exposed_transfer_seconds(
        bulk_s=bulk, prefill_s=prefill_seconds(costs, tokens=max(1, round(mean_tokens)),
                                               chunk_tokens=calibration.chunk_tokens),
        layers=model.layers, layerwise=calibration.transfer_layerwise)
    warnings = _warnings(model, layout, predictions, buffer.value, planner, threshold, workload)
    return Plan(
        model=model, instance=instance, workload=workload, layout=layout, kv_bytes_per_token=model.kv_bytes_per_token,
        kv_transfer_s=bulk, kv_exposed_s=exposed,
        efa_gbytes_per_s=efa_bytes_per_s(instance=instance, tensor_parallel=tp, calibration=calibration) / 1e9,
        line_rate_gbytes_per_s=rank_line_rate(instance) * min(tp, instance.gpu_count) / 1e9,
        recommendation=recommendation, predictions=predictions, sweep=swept, slo=slo, operating=(colo_op, dpd_op),
        verdict=result, cost=cost, warnings=tuple(warnings), calibration=calibration)


def _prefill_pool(planner: _Planner, decode: int, threshold: int, peak: float, estimate: int,
                  load_label: str) -> recommend.Decision:
    """Closed loop: the smallest prefill pool that runs at most ``prefill_target_utilization`` busy at the peak
    load, with its own queue in the loop (the rate one decoder sustains with unlimited prefill, ``estimate``'s basis,
    overstates what the loop delivers once prompts queue)."""
    target = planner.calibration.prefill_target_utilization

    def busy(prefill: int) -> float:
        return _prefill_busy(planner, prefill, decode, threshold, peak)

    prefill = estimate
    while busy(prefill) > target and prefill < 4 * estimate:
        prefill += 1
    while prefill > 1 and busy(prefill - 1) <= target:
        prefill -= 1
    fewer = f"; {prefill - 1} would run {busy(prefill - 1):.0%} busy" if prefill > 1 else ""
    return recommend.Decision(prefill, (
        f"{prefill} prefill : {decode} decode: at {load_label} the prefill pool runs {busy(prefill):.0%} busy "
        f"(sized for at most {target:.0%}, queueing included){fewer}",))


def _prefill_busy(planner: _Planner, prefill: int, decode: int, threshold: int, peak: float) -> float:
    point = planner.disaggregated(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
    return 1.0 if point.saturated else point.prefill_utilization


def _buffer(planner: _Planner, prefill: int, decode: int, threshold: int, peak: float, share: float,
            remote: list[tuple[int, float]]) -> recommend.Decision:
    workload, model, instance, tp, calibration = (planner.workload, planner.model, planner.instance, planner.tp,
                                                  planner.calibration)
    point = planner.disaggregated(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
    if workload.closed_loop:
        in_flight = peak * share
    elif point.saturated:  # past saturation: as many as the decoders' KV cache holds
        system = planner.dpd_system(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE)
        in_flight = system.kv_slots / workload.decode_context * decode * share
    else:
        in_flight = point.concurrency * share
    decoder_free = free_bytes_per_gpu(model=model, instance=instance, tensor_parallel=tp,
                                      utilization=calibration.dpd_memory_utilization, calibration=calibration)
    return recommend.pd_buffer_size(in_flight=in_flight if share else 0.0,
                                    prompt_tokens=max((n for n, _ in remote), default=workload.inputs.maximum),
                                    bytes_per_token_per_rank=model.kv_bytes_per_token_per_rank(tp),
                                    decoder_free_bytes=decoder_free)


def _colocated_layout(planner: _Planner, nodes: int, peak: float, slo: Slo, max_len: int) -> tuple[int, int]:
    """The best colocated layout on ``nodes``: one replica per node (TP = GPUs per node) or as many replicas as fit
    (the smallest TP whose replica holds the weights and one max_model_len request), whichever serves the most goodput
    at the highest load (ties: one replica per node)."""
    instance, model, calibration = planner.instance, planner.model, planner.calibration
    fitting = [tp for tp in valid_tensor_parallel_sizes(model, instance)
               if kv_capacity_tokens(model=model, instance=instance, tensor_parallel=tp,
                                     utilization=calibration.colocated_memory_utilization,
                                     calibration=calibration) >= max_len][:1]
    if planner.tp not in fitting:
        fitting.append(planner.tp)
    best = (planner.tp, nodes * instance.gpu_count // planner.tp)
    if len(fitting) == 1:
        return best
    scores = {}
    for tp in fitting:
        replicas = nodes * instance.gpu_count // tp
        scores[(tp, replicas)] = planner.colocated(replicas, tp, peak).goodput(slo.ttft_s, slo.tpot_s)
    return max(scores, key=lambda key: (scores[key] * (1 - 1e-9), key[0]))


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
    if workload.prefix_hit_rate:
        notes.append(f"{workload.prefix_hit_rate:.0%} of prompt tokens come from the prefix cache in both modes; the "
                     "KV transfer still moves whole prompts")
    if model.active_parameters < 70e9 and not model.is_moe:
        notes.append(f"{model.key} is below the 70B dense models the DPD page names as the clear case")
    if workload.outputs.mean < 256:
        notes.append(f"outputs average {workload.outputs.mean:,.0f} tokens; the DPD page expects gains from 256 up")
    return notes


__all__ = ["Layout", "Plan", "PlanError", "Prediction", "Recommendation", "make_plan"]
