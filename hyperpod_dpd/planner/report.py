"""A plan as plain data (``hpdpd plan --output json``): finite numbers or ``null``, milliseconds, requests per second."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.planner.serving import Point
from hyperpod_dpd.planner.user_calibration import calibration_dict
from hyperpod_dpd.planner.verdict import OperatingPoint, Slo

if TYPE_CHECKING:
    from hyperpod_dpd.planner.plan import Plan, Prediction


def _finite(value: float, digits: int) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else round(value, digits)


def point_dict(point: Point, slo: Slo) -> dict[str, Any]:
    return {
        "ttft_ms": _finite(point.ttft_s * 1e3, 1),
        "ttft_p50_ms": _finite(point.ttft_p50_s * 1e3, 1),
        "ttft_p95_ms": _finite(point.ttft_p95_s * 1e3, 1),
        "ttft_p99_ms": _finite(point.ttft_p99_s * 1e3, 1),
        "tpot_ms": _finite(point.tpot_s * 1e3, 2),
        "tpot_p50_ms": _finite(point.tpot_p50_s * 1e3, 2),
        "tpot_p99_ms": _finite(point.tpot_p99_s * 1e3, 2),
        "itl_p50_ms": _finite(point.itl_p50_s * 1e3, 2),
        "e2e_p50_ms": _finite(point.e2e_p50_s * 1e3, 1),
        "e2e_p99_ms": _finite(point.e2e_p99_s * 1e3, 1),
        "output_tokens_per_s": round(point.output_tokens_per_s, 1),
        "max_itl_ms": _finite(point.max_itl_s * 1e3, 1),
        "request_rate_per_s": round(point.request_rate, 3),
        "mean_concurrency": _finite(point.concurrency, 1),
        "decode_batch": _finite(point.decode_batch, 1),
        "prefill_utilization": round(point.prefill_utilization, 3),
        "slo_attainment": round(point.attainment(slo.ttft_s, slo.tpot_s), 4),
        "goodput_per_s": round(point.goodput(slo.ttft_s, slo.tpot_s), 3),
        "saturated": point.saturated,
    }


def prediction_dict(plan: Plan, prediction: Prediction) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if plan.workload.closed_loop:
        out["concurrency"] = int(prediction.load)
    else:
        out["request_rate_per_s"] = prediction.load
        out["concurrency"] = None
    for mode, point in (("colocated", prediction.colocated), ("disaggregated", prediction.disaggregated)):
        if plan.mode in ("both", mode):
            out[mode] = point_dict(point, plan.slo)
    return out


def _operating(op: OperatingPoint, closed_loop: bool) -> dict[str, Any]:
    return {"concurrency" if closed_loop else "request_rate_per_s": op.load, "goodput_per_s": round(op.goodput_rps, 3),
            "goodput_per_node_per_s": round(op.per_node, 4), "slo_attainment": round(op.attainment, 4),
            "meets_attainment_target": op.meets_target, "nodes": op.nodes}


def _cost(plan: Plan) -> dict[str, Any] | None:
    cost = plan.cost
    if cost is None:
        return None
    layouts = {}
    for mode, layout in (("colocated", cost.colocated), ("disaggregated", cost.disaggregated)):
        per_million = layout.usd_per_million_output_tokens
        layouts[mode] = {"layout": layout.label, "nodes": layout.nodes, "usd_per_hour": round(layout.usd_per_hour, 2),
                         "usd_per_million_output_tokens": None if per_million is None else round(per_million, 3),
                         "at_load": layout.load}
    return {"instance_type": cost.price.instance_type, "usd_per_instance_hour": cost.price.usd_per_hour,
            "price_basis": cost.price.basis, "price_source": cost.price.source, "price_as_of": cost.price.as_of,
            "price_confidence": cost.price.confidence, **layouts}


def _trade(plan: Plan) -> dict[str, Any] | None:
    """The open latency that kept DPD from being called a win (verdict.py), or None."""
    t = plan.verdict.trade
    if t is None:
        return None
    key = "concurrency" if plan.workload.closed_loop else "request_rate_per_s"
    return {"metric": f"{t.metric}_{t.quantile}_ms", key: int(t.load) if plan.workload.closed_loop else t.load, "colocated": round(t.colocated_s * 1e3, 1),
            "disaggregated": round(t.disaggregated_s * 1e3, 1), "change": round(t.change, 4)}


def plan_dict(plan: Plan) -> dict[str, Any]:
    r = plan.recommendation
    slo = plan.slo
    return {
        "model": plan.model.name,
        "mode": plan.mode,
        "instance_type": plan.instance.name,
        "precision": {"weights": plan.model.weight_dtype, "kv_cache": plan.model.kv_dtype},
        "workload": {
            "input_tokens": plan.workload.inputs.describe(),
            "output_tokens": plan.workload.outputs.describe(),
            "mean_input_tokens": round(plan.workload.inputs.mean, 1),
            "mean_output_tokens": round(plan.workload.outputs.mean, 1),
            "prefix_hit_rate": plan.workload.prefix_hit_rate,
            "offline": plan.workload.offline,
            "start": plan.workload.start,
        },
        "layout": {"prefill_nodes": plan.layout.prefill_nodes, "decode_nodes": plan.layout.decode_nodes,
                   "baseline_nodes": plan.layout.baseline_nodes,
                   "colocated_tensor_parallel_size": plan.layout.colocated_tp,
                   "colocated_replicas": plan.layout.colocated_replicas,
                   "prefill_tensor_parallel_size": plan.layout.prefill_tp,
                   "decode_tensor_parallel_size": plan.layout.decode_tp,
                   "prefill_replicas_per_node": plan.layout.prefill_per_node,
                   "decode_replicas_per_node": plan.layout.decode_per_node,
                   "what_if": list(plan.layout.what_if)},
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_token_per_rank": plan.model.kv_bytes_per_token_per_rank(r.tensor_parallel_size),
        "kv_transfer_ms": round(plan.kv_transfer_s * 1e3, 3),
        "kv_transfer_exposed_ms": round(plan.kv_exposed_s * 1e3, 3),
        "kv_transfer_fixed_ms": round(plan.calibration.transfer_fixed_s * 1e3, 3),
        "calibration": calibration_dict(plan.calibration),
        "efa_effective_gbytes_per_s": round(plan.efa_gbytes_per_s, 2),
        "efa_line_rate_gbytes_per_s": round(plan.line_rate_gbytes_per_s, 2),
        "slo": {"ttft_ms": None if slo.ttft_s is None else slo.ttft_s * 1e3,
                "tpot_ms": None if slo.tpot_s is None else slo.tpot_s * 1e3,
                "attainment_target": plan.calibration.slo_attainment_target},
        "recommendation": {
            "prefill_replicas": r.prefill_replicas,
            "sized_prefill_replicas": r.sized_prefill_replicas,
            "decode_replicas": r.decode_replicas,
            "routing_threshold": r.routing_threshold,
            "pd_buffer_size_bytes": r.pd_buffer_size_bytes,
            "tensor_parallel_size": r.tensor_parallel_size,
            "max_model_len": r.max_model_len,
            "routing_strategy": r.routing_strategy,
            "threshold_candidates": [
                {"threshold": c.threshold, "remote_share": round(c.remote_share, 4),
                 "prefill_replicas": c.prefill_replicas, "goodput_per_node_per_s": round(c.goodput_per_node, 4),
                 "saturated": c.saturated} for c in r.threshold_candidates],
            "reasons": list(r.reasons),
        },
        "predictions": [prediction_dict(plan, p) for p in plan.predictions],
        "sweep": [prediction_dict(plan, p) for p in plan.sweep],
        "operating_point": {"colocated": _operating(plan.operating[0], plan.workload.closed_loop),
                            "disaggregated": _operating(plan.operating[1], plan.workload.closed_loop)},
        "cost": _cost(plan),
        "verdict": {"decision": plan.verdict.decision, "pays_off": plan.verdict.pays_off,
                    "goodput_gain_per_node": None if plan.verdict.gain is None else round(plan.verdict.gain, 4),
                    "latency_trade": _trade(plan), "reasons": list(plan.verdict.reasons)},
        "warnings": list(plan.warnings),
    }


def one_mode_table(plan: Plan) -> tuple[str, tuple[str, ...], list[tuple[Any, ...]]]:
    """Title line, headers and rows of one mode's predictions (``hpdpd plan --mode colocated|disaggregated``)."""
    data = plan_dict(plan)
    mode, layout = plan.mode, plan.layout
    shape = (f"{layout.baseline_nodes} node(s), {layout.colocated_replicas} x TP{layout.colocated_tp}"
             if mode == "colocated" else
             f"{layout.prefill_nodes} prefill node(s) of {layout.prefill_per_node} x TP{layout.prefill_tp} + "
             f"{layout.decode_nodes} decode node(s) of {layout.decode_per_node} x TP{layout.decode_tp}")
    title = (f"{plan.model.name} on {plan.instance.name}, {mode}: {shape}; prompts "
             f"{data['workload']['input_tokens']}, outputs {data['workload']['output_tokens']} tokens")
    load = "offline in flight" if plan.workload.offline else plan.load_name
    rows = []
    for prediction in data["predictions"]:
        point = prediction[mode]
        label = prediction["concurrency"] if plan.workload.closed_loop else prediction["request_rate_per_s"]
        rows.append((label, *("saturated" if point[k] is None else f"{point[k]:,.1f}" for k in (
            "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms")),
            f"{point['output_tokens_per_s']:,.0f}", f"{point['goodput_per_s']:.2f} ({point['slo_attainment']:.0%})"))
    headers = (load, "TTFT P50 ms", "TTFT P99 ms", "TPOT P50 ms", "TPOT P99 ms", "E2E P50 ms", "output tok/s",
               "goodput req/s")
    return title, headers, rows
