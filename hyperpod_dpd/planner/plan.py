"""One sizing plan: recommendations, predictions for both serving modes at every load, cost and the SLA verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE, DEFAULT_ROUTING_THRESHOLD, MAX_DECODE_REPLICAS
from hyperpod_dpd.planner import recommend
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.capacity import Capacity
from hyperpod_dpd.planner.cost import CostSummary, summarize
from hyperpod_dpd.planner.formulas import (
    efa_bytes_per_s,
    exposed_transfer_seconds,
    kv_transfer_seconds,
    prefill_seconds,
    rank_line_rate,
    step_costs,
)
from hyperpod_dpd.planner.precision import served
from hyperpod_dpd.planner.recommend import PlanError
from hyperpod_dpd.planner.serving import Point
from hyperpod_dpd.planner.systems import Planner, colocated_layout, pd_buffer, prefill_busy, prefill_pool
from hyperpod_dpd.planner.threshold import Candidate, Choice, choose
from hyperpod_dpd.planner.verdict import OperatingPoint, Slo, Verdict, operating_point, verdict
from hyperpod_dpd.planner.workload import Workload

MODES = ("both", "colocated", "disaggregated")  # what a plan reports; both are always predicted for the verdict
_UNBOUNDED_PREFILL = 10_000  # prefill replicas that never queue: isolates what one decoder can serve


@dataclass(frozen=True)
class Layout:
    prefill_nodes: int
    decode_nodes: int
    baseline_nodes: int
    colocated_tp: int = 0  # tensor parallelism of the best colocated layout (0: not chosen yet)
    colocated_replicas: int = 0
    what_if: tuple[str, ...] = ()  # labels for roles beyond the environment's instance groups (capacity.py)
    prefill_tp: int = 0  # tensor parallelism of each prefill and decode replica (0: one replica per node)
    decode_tp: int = 0
    prefill_per_node: int = 1  # replicas of each role on one node
    decode_per_node: int = 1


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
    sized_prefill_replicas: int = 0  # what the workload alone wants (prefill_replicas is the layout planned)


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
    mode: str = "both"  # which predictions the report shows (MODES)

    @property
    def load_name(self) -> str:
        return "concurrency" if self.workload.closed_loop else "request rate"

    @property
    def curve(self) -> tuple[Prediction, ...]:
        """Every predicted load, sweep and requested, in order of load."""
        merged = {p.load: p for p in (*self.sweep, *self.predictions)}
        return tuple(merged[load] for load in sorted(merged))


def make_plan(*, model: ModelSpec, instance: InstanceSpec, workload: Workload, prefill_nodes: int | None = None,
              decode_nodes: int | None = None, baseline_nodes: int | None = None,
              calibration: Calibration = DEFAULT_CALIBRATION, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
              max_model_len: int | None = None, slo: Slo = Slo(), sweep: tuple[float, ...] = (),
              prices: Mapping[str, float] | None = None, capacity: Capacity | None = None,
              prefill_tp: int | None = None, decode_tp: int | None = None, colocated_tp: int | None = None,
              colocated_replicas: int | None = None, mode: str = "both", prefill_per_node: int | None = None,
              decode_per_node: int | None = None, routing_threshold: int | None = None) -> Plan:
    """Recommend a DPD layout for ``workload`` and predict it against colocated serving on the same node count.

    The recommended prefill replicas are the ones the predictions and the verdict use: ``prefill_nodes`` when given,
    else the sizing's, within ``capacity`` when an environment is given. ``routing_threshold`` plans the router's
    threshold as given (prompts of at least that many tokens disaggregate; 0: every prompt) instead of choosing it."""
    if not instance.is_gpu:
        raise PlanError(f"{instance.name} has no GPUs; plan on a DPD GPU instance type")
    if routing_threshold is not None and routing_threshold < 0:
        raise PlanError(f"routing threshold must be at least 0 tokens, got {routing_threshold}")
    for name, value in (("prefill nodes", prefill_nodes), ("decode nodes", decode_nodes),
                        ("baseline nodes", baseline_nodes)):
        if value is not None and value < 1:
            raise PlanError(f"{name} must be at least 1, got {value}")
    try:
        model = served(model, instance, weights=weight_dtype, kv=kv_dtype)
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    if mode not in MODES:
        raise PlanError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    if workload.start == "together" and mode != "colocated":
        raise PlanError("users that start together are modelled for colocated replicas only: plan with mode "
                        "colocated (--mode colocated)")
    for role, value, utilization in (
            ("prefill", prefill_tp, calibration.dpd_memory_utilization),
            ("decode", decode_tp, calibration.dpd_memory_utilization),
            ("colocated", colocated_tp, calibration.colocated_memory_utilization)):
        if value is not None:
            recommend.given_tensor_parallel(model=model, instance=instance, tp=value, role=role,
                                            utilization=utilization, calibration=calibration)
    if colocated_replicas is not None and colocated_replicas < 1:
        raise PlanError(f"colocated replicas must be at least 1, got {colocated_replicas}")
    if decode_tp is None:
        tp_decision = recommend.tensor_parallel_size(model=model, instance=instance, calibration=calibration)
    else:
        tp_decision = recommend.Decision(decode_tp, (
            f"TP={decode_tp} for the decoders as asked: {instance.gpu_count // decode_tp} decode replica(s) per "
            f"{instance.name} node",))
    tp = tp_decision.value
    for role, value, role_tp in (("prefill", prefill_per_node, prefill_tp or tp), ("decode", decode_per_node, tp)):
        if value is not None and not 1 <= value <= instance.gpu_count // role_tp:
            raise PlanError(f"{value} {role} replicas per node do not fit: {instance.name} holds 1 to "
                            f"{instance.gpu_count // role_tp} replicas of TP{role_tp}")
    length = recommend.max_model_len(model=model, peak_tokens=workload.peak_tokens, given=max_model_len)
    recommend.require_decoder_room(model=model, instance=instance, tensor_parallel=tp, peak_tokens=length.value
                                   if max_model_len else workload.peak_tokens, calibration=calibration)
    planner = Planner(model, instance, workload, tp, calibration, prefill_tp=prefill_tp,
                      prefill_per_node=prefill_per_node, decode_per_node=decode_per_node)
    peak = max(workload.loads)
    decode = decode_nodes or 1
    load_label = f"{'concurrency' if workload.closed_loop else 'request rate'} {peak:g}"

    def ratio(threshold: int) -> recommend.Decision:
        share = workload.inputs.share_at_least(threshold)
        if share <= 0:
            return recommend.prefill_replicas(decode_limited_rate=0.0, remote_share=0.0, mean_service_s=0.0,
                                              calibration=calibration)
        if workload.closed_loop and prefill_busy(planner, 1, decode, threshold, peak) <= \
                calibration.prefill_target_utilization:
            return prefill_pool(planner, decode, threshold, peak, 1, load_label)
        system = planner.dpd_system(_UNBOUNDED_PREFILL, decode, threshold, DEFAULT_PD_BUFFER_SIZE)
        limited = planner.disaggregated(_UNBOUNDED_PREFILL, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
        service = system.service / share / planner.prefill_per_node  # a node's replicas share its prompts
        if limited.saturated:  # open loop past the decoder: size prefill for the offered rate
            rate = 0.0 if workload.closed_loop else peak
        else:
            rate = limited.request_rate
        estimate = recommend.prefill_replicas(decode_limited_rate=rate, remote_share=share, mean_service_s=service,
                                              calibration=calibration)
        if not workload.closed_loop:
            return estimate
        return prefill_pool(planner, decode, threshold, peak, estimate.value, load_label)

    ratios: dict[int, recommend.Decision] = {}

    def within(wanted: int) -> int:
        return capacity.sized(wanted) if capacity is not None else wanted

    def score(threshold: int) -> Candidate:
        ratios[threshold] = ratio(threshold)
        prefill = prefill_nodes or within(ratios[threshold].value)
        point = planner.disaggregated(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
        share = planner.dpd_system(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE).remote_share
        return Candidate(threshold, share, prefill, point.goodput(slo.ttft_s, slo.tpot_s) / (prefill + decode),
                         point.saturated)

    lengths = sorted(n for n, _ in workload.inputs.points)
    if routing_threshold is None:
        choice = choose(lengths, DEFAULT_ROUTING_THRESHOLD, score, load_label=load_label)
    else:
        given = score(routing_threshold)
        choice = Choice(given, (given,), (f"routing_threshold {routing_threshold:,} as given: {given.remote_share:.0%} "
                                          "of prompts disaggregate",))
    threshold = choice.chosen.threshold
    final = ratios[threshold]
    prefill = prefill_nodes or within(final.value)
    baseline = baseline_nodes or prefill + decode
    remote = [(n, p) for n, p in workload.inputs.points if n >= threshold]
    share = sum(p for _, p in remote)
    buffer = pd_buffer(planner, prefill, decode, threshold, peak, share, remote)
    colo_tp, replicas = colocated_layout(planner, baseline, peak, slo, length.value, tp=colocated_tp,
                                         replicas=colocated_replicas)
    what_if = capacity.what_if(prefill=prefill, decode=decode, baseline=baseline) if capacity else ()
    if replicas * colo_tp > baseline * instance.gpu_count:
        raise PlanError(f"{replicas} colocated replicas x TP{colo_tp} need {replicas * colo_tp} GPUs, more than "
                        f"{baseline} x {instance.name} have ({baseline * instance.gpu_count})")
    layout = Layout(prefill, decode, baseline, colo_tp, replicas, what_if, prefill_tp=planner.prefill_tp,
                    decode_tp=tp, prefill_per_node=planner.prefill_per_node, decode_per_node=planner.decode_per_node)

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
    if (planner.prefill_tp, tp, planner.prefill_per_node, planner.decode_per_node) != (
            instance.gpu_count, instance.gpu_count, 1, 1):
        dpd_label += (f" ({prefill * planner.prefill_per_node} x TP{planner.prefill_tp} prefill, "
                      f"{decode * planner.decode_per_node} x TP{tp} decode)")
    result = verdict(loads=workload.loads, pairs=[(p.colocated, p.disaggregated) for p in predictions],
                     colocated=colo_op, disaggregated=dpd_op, slo=slo, remote_share=share, threshold=threshold,
                     load_name="concurrency" if workload.closed_loop else "request rate",
                     colocated_label=colo_label, dpd_label=dpd_label,
                     context=_context(model, share, threshold, workload),
                     rejected=next((c for c in choice.candidates if c.threshold == DEFAULT_ROUTING_THRESHOLD), None))
    cost = summarize(instance_type=instance.name, overrides=prices,
                     colocated=(colo_label, baseline, curve[colo_op.load].colocated, colo_op.load),
                     disaggregated=(dpd_label, prefill + decode, curve[dpd_op.load].disaggregated, dpd_op.load))
    strategy_reason = ("routing strategy prefixaware (operator default, right for one prefiller)" if prefill == 1 else
                       "routing strategy prefixaware keeps shared prefixes on one prefiller; the DPD page suggests "
                       "roundrobin with several prefillers when prompts share little")
    recommendation = Recommendation(
        prefill_replicas=prefill, sized_prefill_replicas=final.value, decode_replicas=MAX_DECODE_REPLICAS,
        routing_threshold=threshold,
        pd_buffer_size_bytes=buffer.value, tensor_parallel_size=tp, max_model_len=length.value,
        routing_strategy="prefixaware", threshold_candidates=choice.candidates,
        reasons=(*final.reasons, *_layout_reasons(prefill, final.value, prefill_nodes, capacity),
                 f"1 decode replica: the operator supports {MAX_DECODE_REPLICAS} decoder per endpoint today",
                 *choice.reasons, *buffer.reasons, *tp_decision.reasons, *length.reasons, strategy_reason))
    mean_tokens = workload.inputs.mean
    link_tp = min(tp, planner.prefill_tp)
    bulk = kv_transfer_seconds(model=model, instance=instance, tensor_parallel=link_tp, tokens=mean_tokens,
                               calibration=calibration)
    costs = step_costs(model=model, instance=instance, tensor_parallel=planner.prefill_tp, calibration=calibration)
    exposed = exposed_transfer_seconds(
        bulk_s=bulk, prefill_s=prefill_seconds(costs, tokens=max(1, round(mean_tokens)),
                                               chunk_tokens=calibration.chunk_tokens),
        layers=model.layers, layerwise=calibration.transfer_layerwise)
    warnings = [*what_if, *_warnings(model, layout, predictions, buffer.value, planner, threshold, workload)]
    return Plan(
        model=model, instance=instance, workload=workload, layout=layout, kv_bytes_per_token=model.kv_bytes_per_token,
        kv_transfer_s=bulk, kv_exposed_s=exposed,
        efa_gbytes_per_s=efa_bytes_per_s(instance=instance, tensor_parallel=link_tp, calibration=calibration,
                                         model=model) / 1e9,
        line_rate_gbytes_per_s=rank_line_rate(instance) * min(link_tp, instance.gpu_count) / 1e9,
        recommendation=recommendation, predictions=predictions, sweep=swept, slo=slo, operating=(colo_op, dpd_op),
        verdict=result, cost=cost, warnings=tuple(warnings), calibration=calibration, mode=mode)


def _layout_reasons(prefill: int, sized: int, given: int | None, capacity: Capacity | None) -> tuple[str, ...]:
    """Why the planned prefill replicas differ from the sizing's, when they do."""
    if prefill == sized:
        return ()
    if given is not None:
        return (f"{prefill} prefill replica(s) as asked (--prefill-nodes); the workload alone would want {sized}",)
    assert capacity is not None  # prefill differs from sized only when given or capped by an environment
    return (f"{prefill} prefill replica(s): all that environment {capacity.environment} has of "
            f"{capacity.instance_type}; the workload would want {sized} (plan with --prefill-nodes {sized} to see "
            "that layout as a what-if)",)


def _warnings(model: ModelSpec, layout: Layout, predictions: tuple[Prediction, ...], buffer: float,
              planner: Planner, threshold: int, workload: Workload) -> list[str]:
    out = []
    system = planner.dpd_system(layout.prefill_nodes, layout.decode_nodes, threshold, buffer)
    if system.decode > MAX_DECODE_REPLICAS:
        out.append(f"{system.decode} decode replicas ({layout.decode_nodes} node(s)): the operator supports "
                   f"{MAX_DECODE_REPLICAS} decode replica per endpoint today; these predictions assume a future "
                   "multi-decoder release")
    if planner.prefill_tp * planner.prefill_per_node != planner.instance.gpu_count or system.decode > 1:
        out.append(f"{planner.prefill_per_node} TP{planner.prefill_tp} prefill and {planner.decode_per_node} "
                   f"TP{planner.tp} decode replica(s) per node: the operator "
                   "runs one pod per role and node today; this layout is what published benchmarks run, not what "
                   "the endpoint block deploys")
    streams = system.kv_slots / workload.decode_context
    peak = predictions[-1].disaggregated
    if workload.closed_loop and streams < max(workload.loads) / system.decode:
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
