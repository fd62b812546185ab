"""The human-readable ``hpdpd plan`` report: transfer, predictions (P50/P99), sweep, recommendation, cost, verdict."""

from __future__ import annotations

from typing import Any, TextIO

from hyperpod_dpd.cli.output import print_table

GIB = 1024**3


def _ms(value: float | None) -> str:
    return "saturated" if value is None else f"{value:,.1f}"


def _pair(point: dict[str, Any], metric: str) -> str:
    return f"{_ms(point[f'{metric}_p50_ms'])} / {_ms(point[f'{metric}_p99_ms'])}"


def _rows(predictions: list[dict[str, Any]], closed_loop: bool) -> list[tuple[Any, ...]]:
    rows = []
    for prediction in predictions:
        c, d = prediction["colocated"], prediction["disaggregated"]
        label = prediction["concurrency"] if closed_loop else prediction["request_rate_per_s"]
        rows.append((label, _pair(c, "ttft"), _pair(d, "ttft"), _pair(c, "tpot"), _pair(d, "tpot"),
                     f"{c['output_tokens_per_s']:,.0f}", f"{d['output_tokens_per_s']:,.0f}",
                     f"{c['goodput_per_s']:.2f} ({c['slo_attainment']:.0%})",
                     f"{d['goodput_per_s']:.2f} ({d['slo_attainment']:.0%})"))
    return rows


def _headers(load: str) -> tuple[str, ...]:
    return (load, "TTFT ms P50/P99 colo", "TTFT ms P50/P99 DPD", "TPOT ms P50/P99 colo", "TPOT ms P50/P99 DPD",
            "tok/s colo", "tok/s DPD", "goodput req/s colo", "goodput req/s DPD")


def print_report(plan: Any, notes: list[str], stream: TextIO) -> None:
    from hyperpod_dpd.planner.report import plan_dict  # here: `hpdpd --help` imports no planner module

    data = plan_dict(plan)
    r = data["recommendation"]
    layout = plan.layout
    precision = data["precision"]
    stream.write(f"{plan.model.name} on {plan.instance.name}: prompts {data['workload']['input_tokens']}, outputs "
                 f"{data['workload']['output_tokens']} tokens; weights {precision['weights'].upper()}, KV "
                 f"{precision['kv_cache'].upper()}; DPD {layout.prefill_nodes} prefill + {layout.decode_nodes} decode "
                 f"vs {layout.baseline_nodes} colocated node(s) ({layout.colocated_replicas} x TP"
                 f"{layout.colocated_tp})\n")
    if plan.workload.prefix_hit_rate:
        stream.write(f"Prefix cache: {plan.workload.prefix_hit_rate:.0%} of prompt tokens are not recomputed in either "
                     "mode\n")
    stream.write(f"KV cache {data['kv_bytes_per_token']:,} bytes per token ({data['kv_bytes_per_token_per_rank']:,} "
                 f"per TP rank); moving a {plan.workload.inputs.mean:,.0f}-token prompt takes "
                 f"{data['kv_transfer_ms']:,.2f} ms at {data['efa_effective_gbytes_per_s']:.1f} GB/s (EFA line rate "
                 f"{data['efa_line_rate_gbytes_per_s']:.1f} GB/s); {data['kv_transfer_exposed_ms']:,.2f} ms of it "
                 f"after the prefill, plus {data['kv_transfer_fixed_ms']:,.1f} ms hand-off\n")
    constants = data["calibration"]["constants"]
    for name in data["calibration"]["measured_overrides"]:
        stream.write(f"Calibration: {name} = {constants[name]['value']:g}, {constants[name]['basis']}\n")
    closed = plan.workload.closed_loop
    load = "concurrency" if closed else "req/s"
    print_table(_headers(load), _rows(data["predictions"], closed), title="Predictions", stream=stream)
    if data["sweep"]:
        print_table(_headers(load), _rows(data["sweep"], closed), title="Sweep", stream=stream)
    stream.write(f"Recommendation: prefill_replicas {r['prefill_replicas']}, decode_replicas {r['decode_replicas']}, "
                 f"routing_threshold {r['routing_threshold']}, PD_BUFFER_SIZE {r['pd_buffer_size_bytes']} "
                 f"({r['pd_buffer_size_bytes'] // GIB} GiB per rank), tensor_parallel_size "
                 f"{r['tensor_parallel_size']}, max_model_len {r['max_model_len']}\n")
    for reason in r["reasons"]:
        stream.write(f"  - {reason}\n")
    operating = data["operating_point"]
    key = "concurrency" if closed else "request_rate_per_s"
    stream.write("Operating point (most goodput with at least "
                 f"{data['slo']['attainment_target']:.0%} of requests within SLO): colocated at {load} "
                 f"{operating['colocated'][key]:g}, DPD at {load} {operating['disaggregated'][key]:g}\n")
    cost = data["cost"]
    if cost is not None:
        stream.write(f"Cost at ${cost['usd_per_instance_hour']:,.2f} per {cost['instance_type']} hour "
                     f"({cost['price_basis']}, {cost['price_as_of']}, confidence {cost['price_confidence']}):\n")
        for mode in ("colocated", "disaggregated"):
            entry = cost[mode]
            per_million = entry["usd_per_million_output_tokens"]
            tokens = "n/a (saturated)" if per_million is None else f"${per_million:,.2f} per million output tokens"
            stream.write(f"  - {mode} ({entry['layout']}): ${entry['usd_per_hour']:,.2f}/hour, {tokens} at {load} "
                         f"{entry['at_load']:g}\n")
    stream.write(f"Verdict: {data['verdict']['decision']}\n")
    for reason in data["verdict"]["reasons"]:
        stream.write(f"  - {reason}\n")
    if notes:
        stream.write("Warnings:\n")
        for note in notes:
            stream.write(f"  - {note}\n")
