"""``hpdpd plan``: size a DPD endpoint for a workload and predict it against colocated serving on the same nodes.

Every value is checked here so that bad input ends in one line naming the flag; argparse only collects strings.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, INSTANCE_TYPES, InstanceSpec
from hyperpod_dpd.catalogue.models import MODELS, ModelSpec, model
from hyperpod_dpd.catalogue.operator import MAX_DECODE_REPLICAS
from hyperpod_dpd.cli.output import print_json
from hyperpod_dpd.cli.plan_report import print_report
from hyperpod_dpd.cli.plan_values import choice, count, fail, fraction, milliseconds, positive_int, required
from hyperpod_dpd.errors import MISSING

GIB = 1024**3
DEFAULT_SWEEP = "1,2,4,8,16,32,64"
PLOT_FORMATS = (".png", ".svg")
MODES = ("both", "colocated", "disaggregated")  # hyperpod_dpd.planner.plan.MODES, kept here for a fast start-up
STARTS = ("steady", "together")  # hyperpod_dpd.planner.workload.STARTS, likewise
CONNECTORS = ("lmcache", "nixl")


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "plan", parents=[common], help="size a DPD endpoint and compare it with colocated serving",
        description="Predict TTFT, TPOT and throughput of disaggregated and colocated serving for a workload, and "
                    "recommend the prefill:decode ratio, routing threshold, PD_BUFFER_SIZE and tensor parallelism.")
    parser.add_argument("--model", help=f"model: {', '.join(MODELS)} (or --model-config)")
    parser.add_argument("--model-config", metavar="FILE", help="a model outside the catalogue: its Hugging Face "
                        "config.json (layers, hidden size, heads, KV heads, intermediate size, experts)")
    parser.add_argument("--mode", metavar="MODE", help="which serving mode to report: both (default, with the "
                        "verdict), colocated or disaggregated")
    parser.add_argument("--instance", help="instance type, e.g. ml.p5.48xlarge (default with --env: its GPU groups')")
    parser.add_argument("--input-tokens", metavar="N", help="prompt tokens: N, N,M, N:weight,M:weight, MEAN~SPREAD or "
                        "p50=N,p90=M,p99=K")
    parser.add_argument("--output-tokens", metavar="N", help="output tokens, in the same forms as --input-tokens")
    parser.add_argument("--concurrency", metavar="C,...", help="closed-loop concurrent requests, e.g. 8,16,32")
    parser.add_argument("--request-rate", metavar="R,...", help="open-loop requests per second, instead of concurrency")
    parser.add_argument("--offline", metavar="N", help="offline / maximum throughput: a closed loop that keeps N "
                        "requests in flight, instead of --concurrency or --request-rate")
    parser.add_argument("--start", metavar="HOW", help="how the --concurrency users start: steady (default, the "
                        "steady state of a long run) or together (a benchmark's users all start at once with fixed "
                        "lengths and stay in step; colocated only, with --mode colocated)")
    parser.add_argument("--prefill-nodes", metavar="P", help="prefill nodes (default: recommended, or --env's)")
    parser.add_argument("--decode-nodes", metavar="D", help=f"decode nodes (default 1; the operator supports "
                                                            f"{MAX_DECODE_REPLICAS})")
    parser.add_argument("--baseline-nodes", metavar="B", help="nodes of the colocated baseline (default P + D)")
    parser.add_argument("--prefill-tp", metavar="TP", help="tensor parallelism of each prefill replica (default: the "
                        "node's GPUs; below that a node holds GPUs / TP replicas)")
    parser.add_argument("--decode-tp", metavar="TP", help="tensor parallelism of each decode replica (default: the "
                        "node's GPUs)")
    parser.add_argument("--prefill-per-node", metavar="N", help="prefill replicas on each prefill node (default: "
                        "GPUs / --prefill-tp)")
    parser.add_argument("--decode-per-node", metavar="N", help="decode replicas on each decode node (default: "
                        "GPUs / --decode-tp)")
    parser.add_argument("--colocated-tp", metavar="TP", help="tensor parallelism of each colocated replica (default: "
                        "the better of one replica per node and the smallest TP that fits)")
    parser.add_argument("--colocated-replicas", metavar="N", help="colocated replicas on the baseline nodes (default: "
                        "as many as the baseline's GPUs hold at that TP)")
    parser.add_argument("--routing-threshold", metavar="TOKENS", help="the router's threshold as deployed: prompts "
                        "of at least this many tokens are disaggregated, shorter ones go straight to the decoder; 0 "
                        "disaggregates every prompt (default: chosen from the workload, 4096 unless another clearly "
                        "serves more)")
    parser.add_argument("--max-num-seqs", metavar="N", help="vLLM --max-num-seqs: requests one engine runs at once "
                        "(default 1024, vLLM's for >= 70 GiB GPUs)")
    parser.add_argument("--max-num-batched-tokens", metavar="N", help="vLLM --max-num-batched-tokens: the chunked "
                        "prefill budget of one step (default 8192)")
    parser.add_argument("--kv-connector", metavar="NAME",
                        help="KV path: lmcache (the operator's LMCache PD backend: sent into the decoder's PD buffer "
                        "after the prefill, inside the prefiller's step, 256-token chunks; default) or nixl (vLLM "
                        "NixlConnector: pulled by the decoder into its paged cache after the prefill, 16-token "
                        "blocks), as Dynamo's guides measure")
    parser.add_argument("--block-size", metavar="TOKENS", help="tokens per KV block the connector moves (LMCache "
                        "chunk_size, default 256; vLLM NixlConnector moves vLLM blocks, e.g. 16)")
    parser.add_argument("--calibration", metavar="FILE", help="planner constants measured on your own cluster, "
                        "each with its source, in place of the published ones (docs/planner.md, \"Your own "
                        "measurements\")")
    parser.add_argument("--dtype", metavar="D", help="weight precision: bf16 (default), fp8, fp4 (B200/B300)")
    parser.add_argument("--kv-dtype", metavar="D", help="KV-cache precision: bf16 (default), fp8, fp4 (B200/B300)")
    parser.add_argument("--prefix-hit-rate", metavar="F", help="share of prompt tokens served from the prefix cache, "
                        "0 to 0.99 (default 0)")
    parser.add_argument("--max-model-len", metavar="N", help="the deployed --max-model-len (default: recommended)")
    parser.add_argument("--ttft-slo-ms", metavar="MS", help="time-to-first-token target; requests above it miss the SLA")
    parser.add_argument("--tpot-slo-ms", metavar="MS", help="time-per-output-token target (a request's mean ITL)")
    parser.add_argument("--sweep", metavar="C,...", nargs="?", const=DEFAULT_SWEEP,
                        help=f"also predict both modes over these loads and print the table (default {DEFAULT_SWEEP})")
    parser.add_argument("--env", metavar="NAME", help="check the layout against <config-dir>/NAME.yaml's instance groups")
    parser.add_argument("--endpoint", metavar="NAME", help="with --env: plan that environment's endpoint as "
                        "configured (model, instance, TP, replicas, routing threshold, max_model_len, SLO, vLLM "
                        "flags); a flag given here replaces its value")
    parser.add_argument("--config-dir", metavar="DIR", help="directory of environment files (default: $HPDPD_CONFIG_DIR, "
                        "else ./config)")
    parser.add_argument("--plot", metavar="FILE", help="draw TTFT, TPOT (P50, P99), throughput and goodput against load "
                        "for both modes over the sweep, as .png or .svg (needs the hyperpod-dpd[plot] extra)")
    parser.add_argument("--emit-endpoint", action="store_true",
                        help="print only the endpoints: block for config/*.yaml, ready to paste")
    parser.set_defaults(func=run)


def _dtype(flag: str, value: str | None, instance: InstanceSpec) -> str:
    from hyperpod_dpd.planner.precision import precision_problem

    if value is None:
        return "bf16"
    text = value.strip().lower()
    problem = precision_problem(instance, text)
    if problem:
        raise fail(flag, value, problem)
    return text


def _model(text: str) -> ModelSpec:
    try:
        return model(text)
    except KeyError:
        raise fail("--model", text, f"unknown model; known: {', '.join(MODELS)}") from None


def _chosen_model(args: argparse.Namespace) -> ModelSpec:
    if args.model_config is not None:
        if args.model is not None:
            raise fail("--model-config", args.model_config, "give either --model or --model-config, not both")
        from hyperpod_dpd.planner.hf_config import load_model_config

        return load_model_config(Path(args.model_config))
    if args.model is None:  # either flag names the model: the line says both, and what --model takes
        raise fail("--model", MISSING, f"is required (or --model-config FILE): one of {', '.join(MODELS)}")
    return _model(required(args, "model"))


# vLLM / LMCache settings a benchmark publishes: flag, calibration field, upper bound (a sanity limit, not vLLM's)
_ENGINE_FLAGS = (("--max-num-seqs", "max_num_seqs", 1 << 16), ("--max-num-batched-tokens", "chunk_tokens", 1 << 20),
                 ("--block-size", "connector_block_tokens", 1 << 16))


def _engine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from hyperpod_dpd.planner.calibration import DYNAMO_NIXL

    connector = choice("--kv-connector", args.kv_connector, CONNECTORS, "lmcache")
    out: dict[str, Any] = dict(DYNAMO_NIXL) if connector == "nixl" else {}
    for flag, field, limit in _ENGINE_FLAGS:
        value = positive_int(flag, getattr(args, flag[2:].replace("-", "_")))
        if value is not None:
            if value > limit:
                raise fail(flag, value, f"must be at most {limit:,}")
            out[field] = value
    return out


def _instance(text: str) -> InstanceSpec:
    if text not in INSTANCE_TYPES:
        raise fail("--instance", text, f"unknown instance type; DPD types: {', '.join(DPD_INSTANCE_TYPES)}")
    if text not in DPD_INSTANCE_TYPES:
        raise fail("--instance", text, f"is not a DPD GPU type; DPD types: {', '.join(DPD_INSTANCE_TYPES)}")
    return DPD_INSTANCE_TYPES[text]


def _workload(args: argparse.Namespace) -> Any:
    from hyperpod_dpd.planner.workload import LengthDistribution, Workload, parse_counts, parse_rates

    lengths = {}
    for attribute in ("input_tokens", "output_tokens"):
        flag = "--" + attribute.replace("_", "-")
        text = required(args, attribute)
        try:
            lengths[attribute] = LengthDistribution.parse(text)
        except ValueError as exc:
            raise fail(flag, text, str(exc)) from None
    if lengths["output_tokens"].points[0][0] < 2:
        raise fail("--output-tokens", args.output_tokens,
                    "output lengths must be at least 2 tokens: TPOT is the time between output tokens")
    hit = fraction("--prefix-hit-rate", args.prefix_hit_rate)
    concurrency = args.concurrency
    offline = positive_int("--offline", args.offline)
    if offline is not None:
        if choice("--start", args.start, STARTS, "steady") == "together":
            raise fail("--start", args.start, "users that start together are a closed loop: give --concurrency, "
                       "not --offline")
        if args.concurrency is not None or args.request_rate is not None:
            raise fail("--offline", args.offline, "give only one of --offline, --concurrency or --request-rate")
        return Workload(inputs=lengths["input_tokens"], outputs=lengths["output_tokens"], concurrency=(offline,),
                        prefix_hit_rate=hit, offline=True)
    if concurrency is None and args.request_rate is None and (args.sweep or args.plot):
        concurrency = args.sweep or DEFAULT_SWEEP  # a sweep alone is the loads to plan at
    if (concurrency is None) == (args.request_rate is None):
        raise fail("--concurrency", args.concurrency, "give exactly one of --concurrency or --request-rate")
    start = choice("--start", args.start, STARTS, "steady")
    if start == "together":
        if concurrency is None or args.concurrency is None:
            raise fail("--start", args.start, "users that start together are a closed loop: give --concurrency")
        for attribute in ("input_tokens", "output_tokens"):
            if len(lengths[attribute].points) != 1:
                raise fail("--" + attribute.replace("_", "-"), getattr(args, attribute),
                           "--start together needs one fixed length: users stay in step only with fixed lengths")
        if hit:
            raise fail("--prefix-hit-rate", args.prefix_hit_rate, "is not modelled with --start together")
        if choice("--mode", args.mode, MODES, "both") != "colocated":
            raise fail("--mode", args.mode if args.mode is not None else MISSING,
                       "--start together models colocated replicas only: give --mode colocated")
    try:
        if concurrency is not None:
            return Workload(inputs=lengths["input_tokens"], outputs=lengths["output_tokens"],
                            concurrency=parse_counts(concurrency), prefix_hit_rate=hit, start=start)
        return Workload(inputs=lengths["input_tokens"], outputs=lengths["output_tokens"],
                        request_rates=parse_rates(args.request_rate), prefix_hit_rate=hit)
    except ValueError as exc:
        flag, value = (("--concurrency", args.concurrency) if args.concurrency is not None
                       else ("--request-rate", args.request_rate))
        raise fail(flag, value, str(exc)) from None


def _sweep(args: argparse.Namespace, workload: Any) -> tuple[float, ...]:
    from hyperpod_dpd.planner.workload import parse_counts, parse_rates

    if not (args.sweep or args.plot):
        return ()
    text = args.sweep or (DEFAULT_SWEEP if workload.closed_loop else None)
    if text is None:  # open loop without --sweep: the plot draws the requested rates
        return tuple(workload.loads)
    try:
        return tuple(float(v) for v in (parse_counts(text) if workload.closed_loop else parse_rates(text)))
    except ValueError as exc:
        raise fail("--sweep", args.sweep, str(exc)) from None


def _plot_path(value: str | None) -> Path | None:
    if not value:
        return None
    plot = Path(value)
    if plot.suffix.lower() not in PLOT_FORMATS:
        raise fail("--plot", value, "must be a .png or .svg file name")
    if not plot.parent.is_dir():
        raise fail("--plot", value, f"directory {plot.parent} does not exist")
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise fail("--plot", value, "needs matplotlib: pip install 'hyperpod-dpd[plot]'")
    return plot


def run(args: argparse.Namespace) -> int:
    from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION
    from hyperpod_dpd.planner.plan import make_plan
    from hyperpod_dpd.planner.report import plan_dict
    from hyperpod_dpd.planner.verdict import Slo

    env = settings = None
    taken: dict[str, str] = {}
    if args.endpoint is not None and not args.env:
        raise fail("--endpoint", args.endpoint, "names an endpoint of an environment: give --env NAME too")
    if args.env:
        from hyperpod_dpd.cli import plan_env

        env, source = plan_env.load(args.env, args.config_dir)
        if args.endpoint is not None:
            if args.emit_endpoint:
                raise fail("--emit-endpoint", True, "writes a new endpoint block; --endpoint plans one that is "
                           "already configured: give one of them")
            settings = plan_env.endpoint_settings(env, source, args.endpoint)
            taken = plan_env.fill(args, settings)
    chosen_model = _chosen_model(args)
    overrides = _engine_overrides(args)
    if settings is not None:
        overrides["dpd_memory_utilization"] = settings.dpd_memory_utilization
    calibration = DEFAULT_CALIBRATION.with_overrides(**overrides)
    if args.calibration:
        from hyperpod_dpd.planner.user_calibration import load_calibration

        calibration = load_calibration(Path(args.calibration)).apply(calibration)
    prefill = positive_int("--prefill-nodes", args.prefill_nodes)
    decode = positive_int("--decode-nodes", args.decode_nodes)
    baseline = positive_int("--baseline-nodes", args.baseline_nodes)
    max_len = positive_int("--max-model-len", args.max_model_len)
    workload = _workload(args)
    slo = Slo(ttft_s=milliseconds("--ttft-slo-ms", args.ttft_slo_ms),
              tpot_s=milliseconds("--tpot-slo-ms", args.tpot_slo_ms))
    plot = _plot_path(args.plot)
    sweep = _sweep(args, workload)
    target = None
    instance_text = args.instance
    if env is not None:
        target, instance_text = plan_env.environment_target(env, source, instance_text,
                                                            settings.groups if settings is not None else None)
    chosen_instance = _instance(instance_text if instance_text is not None else required(args, "instance"))
    capacity = None
    if target is not None:
        # the recommendation is sized within the environment's groups; explicit node counts beyond them are
        # planned as what-if layouts (labelled in the plan's warnings and JSON)
        from hyperpod_dpd.planner.capacity import Capacity

        capacity = Capacity(environment=target.name, source=target.source, instance_type=chosen_instance.name,
                            prefill_nodes=target.prefill_nodes, decode_nodes=target.decode_nodes)
        if decode is None:
            decode = min(target.decode_nodes, MAX_DECODE_REPLICAS)
    plan = make_plan(model=chosen_model, instance=chosen_instance, workload=workload, prefill_nodes=prefill,
                     mode=choice("--mode", args.mode, MODES, "both"), calibration=calibration,
                     prefill_tp=positive_int("--prefill-tp", args.prefill_tp),
                     decode_tp=positive_int("--decode-tp", args.decode_tp),
                     colocated_tp=positive_int("--colocated-tp", args.colocated_tp),
                     colocated_replicas=positive_int("--colocated-replicas", args.colocated_replicas),
                     prefill_per_node=positive_int("--prefill-per-node", args.prefill_per_node),
                     decode_per_node=positive_int("--decode-per-node", args.decode_per_node),
                     decode_nodes=decode, baseline_nodes=baseline,
                     routing_threshold=count("--routing-threshold", args.routing_threshold),
                     weight_dtype=_dtype("--dtype", args.dtype, chosen_instance),
                     kv_dtype=_dtype("--kv-dtype", args.kv_dtype, chosen_instance), max_model_len=max_len, slo=slo,
                     sweep=sweep, prices=target.prices if target is not None else None, capacity=capacity)
    notes = list(plan.warnings)
    if settings is not None:
        notes[:0] = settings.notes
    if capacity is not None and plan.recommendation.sized_prefill_replicas > plan.layout.prefill_nodes \
            and not plan.layout.what_if:
        notes.append(f"the workload would want {plan.recommendation.sized_prefill_replicas} prefill nodes; "
                     f"environment {capacity.environment} has {capacity.prefill_nodes}, and the plan uses "
                     f"{plan.layout.prefill_nodes} (--prefill-nodes {plan.recommendation.sized_prefill_replicas} "
                     "plans the larger layout as a what-if)")
    if plot is not None:
        from hyperpod_dpd.planner.plot import write_plot

        write_plot(plan, plot)
        print(f"hpdpd: wrote {plot}", file=sys.stderr)
    if args.emit_endpoint:
        from hyperpod_dpd.planner.endpoint import endpoint_block, render_yaml

        block = endpoint_block(plan, prefill_group=target.prefill_group if target else "prefill",
                               decode_group=target.decode_group if target else "decode",
                               region=target.region if target else None)
        for note in notes:
            print(f"hpdpd: warning: {note}", file=sys.stderr)
        sys.stdout.write(render_yaml(block))
        return 0
    if args.output == "json":
        data = plan_dict(plan)
        data["warnings"] = notes
        if target is not None:
            data["environment"] = target.name
        if settings is not None:
            data["endpoint"] = {"name": settings.name, "path": settings.path, "from_endpoint": taken}
        print_json(data)
        return 0
    if settings is not None:
        sys.stdout.write(plan_env.described(settings, taken) + "\n")
    if plan.mode != "both":
        _print_one_mode(plan, notes)
        return 0
    print_report(plan, notes, sys.stdout)
    return 0


def _print_one_mode(plan: Any, notes: list[str]) -> None:
    """``--mode colocated|disaggregated``: that mode's predictions alone (no comparison, so no verdict)."""
    from hyperpod_dpd.cli.output import print_table
    from hyperpod_dpd.planner.report import one_mode_table

    title, headers, rows = one_mode_table(plan)
    sys.stdout.write(title + "\n")
    print_table(headers, rows, title=f"Predictions ({plan.mode})", stream=sys.stdout)
    for note in notes:
        sys.stdout.write(f"warning: {note}\n")
