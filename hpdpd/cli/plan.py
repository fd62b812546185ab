"""``hpdpd plan``: size a DPD endpoint for a workload and predict it against colocated serving on the same nodes.

Every value is checked here so that bad input ends in one line naming the flag; argparse only collects strings.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, INSTANCE_TYPES, InstanceSpec
from hyperpod_dpd.catalogue.models import MODELS, ModelSpec, model
from hyperpod_dpd.catalogue.operator import MAX_DECODE_REPLICAS
from hyperpod_dpd.cli.output import print_json
from hyperpod_dpd.cli.plan_report import print_report
from hyperpod_dpd.errors import MISSING, ConfigError

GIB = 1024**3
DEFAULT_SWEEP = "1,2,4,8,16,32,64"
PLOT_FORMATS = (".png", ".svg")


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "plan", parents=[common], help="size a DPD endpoint and compare it with colocated serving",
        description="Predict TTFT, TPOT and throughput of disaggregated and colocated serving for a workload, and "
                    "recommend the prefill:decode ratio, routing threshold, PD_BUFFER_SIZE and tensor parallelism.")
    parser.add_argument("--model", help=f"model: {', '.join(MODELS)}")
    parser.add_argument("--instance", help="instance type, e.g. ml.p5.48xlarge (default with --env: its GPU groups')")
    parser.add_argument("--input-tokens", metavar="N", help="prompt tokens: N, N,M, N:weight,M:weight, MEAN~SPREAD or "
                        "p50=N,p90=M,p99=K")
    parser.add_argument("--output-tokens", metavar="N", help="output tokens, in the same forms as --input-tokens")
    parser.add_argument("--concurrency", metavar="C,...", help="closed-loop concurrent requests, e.g. 8,16,32")
    parser.add_argument("--request-rate", metavar="R,...", help="open-loop requests per second, instead of concurrency")
    parser.add_argument("--prefill-nodes", metavar="P", help="prefill nodes (default: recommended, or --env's)")
    parser.add_argument("--decode-nodes", metavar="D", help=f"decode nodes (default 1; the operator supports "
                                                            f"{MAX_DECODE_REPLICAS})")
    parser.add_argument("--baseline-nodes", metavar="B", help="nodes of the colocated baseline (default P + D)")
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
    parser.add_argument("--config-dir", metavar="DIR", help="directory of environment files (default: $HPDPD_CONFIG_DIR, "
                        "else ./config)")
    parser.add_argument("--plot", metavar="FILE", help="draw TTFT, TPOT (P50, P99), throughput and goodput against load "
                        "for both modes over the sweep, as .png or .svg (needs the hyperpod-dpd[plot] extra)")
    parser.add_argument("--emit-endpoint", action="store_true",
                        help="print only the endpoints: block for config/*.yaml, ready to paste")
    parser.set_defaults(func=run)


def _fail(flag: str, value: Any, message: str) -> ConfigError:
    return ConfigError.single(None, flag, value, message)


def _required(args: argparse.Namespace, attribute: str) -> str:
    value = getattr(args, attribute)
    if value is None or not str(value).strip():
        raise _fail("--" + attribute.replace("_", "-"), MISSING if value is None else value, "is required")
    return str(value)


def _positive_int(flag: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise _fail(flag, value, "must be a whole number") from None
    if number < 1:
        raise _fail(flag, value, "must be at least 1")
    return number


def _fraction(flag: str, value: str | None) -> float:
    if value is None:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        raise _fail(flag, value, "must be a number from 0 to 0.99") from None
    if not 0.0 <= number < 1.0:
        raise _fail(flag, value, "must be at least 0 and below 1")
    return number


def _milliseconds(flag: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise _fail(flag, value, "must be a number of milliseconds") from None
    if not number > 0 or number == float("inf"):
        raise _fail(flag, value, "must be a positive number of milliseconds")
    return number / 1e3


def _dtype(flag: str, value: str | None, instance: InstanceSpec) -> str:
    from hyperpod_dpd.planner.precision import precision_problem

    if value is None:
        return "bf16"
    text = value.strip().lower()
    problem = precision_problem(instance, text)
    if problem:
        raise _fail(flag, value, problem)
    return text


def _model(text: str) -> ModelSpec:
    try:
        return model(text)
    except KeyError:
        raise _fail("--model", text, f"unknown model; known: {', '.join(MODELS)}") from None


def _instance(text: str) -> InstanceSpec:
    if text not in INSTANCE_TYPES:
        raise _fail("--instance", text, f"unknown instance type; DPD types: {', '.join(DPD_INSTANCE_TYPES)}")
    if text not in DPD_INSTANCE_TYPES:
        raise _fail("--instance", text, f"is not a DPD GPU type; DPD types: {', '.join(DPD_INSTANCE_TYPES)}")
    return DPD_INSTANCE_TYPES[text]


def _workload(args: argparse.Namespace) -> Any:
    from hyperpod_dpd.planner.workload import LengthDistribution, Workload, parse_counts, parse_rates

    lengths = {}
    for attribute in ("input_tokens", "output_tokens"):
        flag = "--" + attribute.replace("_", "-")
        text = _required(args, attribute)
        try:
            lengths[attribute] = LengthDistribution.parse(text)
        except ValueError as exc:
            raise _fail(flag, text, str(exc)) from None
    if lengths["output_tokens"].points[0][0] < 2:
        raise _fail("--output-tokens", args.output_tokens,
                    "output lengths must be at least 2 tokens: TPOT is the time between output tokens")
    hit = _fraction("--prefix-hit-rate", args.prefix_hit_rate)
    concurrency = args.concurrency
    if concurrency is None and args.request_rate is None and (args.sweep or args.plot):
        concurrency = args.sweep or DEFAULT_SWEEP  # a sweep alone is the loads to plan at
    if (concurrency is None) == (args.request_rate is None):
        raise _fail("--concurrency", args.concurrency, "give exactly one of --concurrency or --request-rate")
    try:
        if concurrency is not None:
            return Workload(inputs=lengths["input_tokens"], outputs=lengths["output_tokens"],
                            concurrency=parse_counts(concurrency), prefix_hit_rate=hit)
        return Workload(inputs=lengths["input_tokens"], outputs=lengths["output_tokens"],
                        request_rates=parse_rates(args.request_rate), prefix_hit_rate=hit)
    except ValueError as exc:
        flag, value = (("--concurrency", args.concurrency) if args.concurrency is not None
                       else ("--request-rate", args.request_rate))
        raise _fail(flag, value, str(exc)) from None


@dataclass(frozen=True)
class _Target:
    """What ``--env`` contributes: group names, node counts of the planned type, and the Region."""

    name: str
    source: str
    region: str
    prefill_group: str
    decode_group: str
    prefill_nodes: int
    decode_nodes: int
    prices: dict[str, float]


def _environment(name: str, instance_text: str | None, directory: str | None = None) -> tuple[_Target, str]:
    from hyperpod_dpd.config import config_dir, load_environment
    from hyperpod_dpd.config.loader import display_path

    env = load_environment(name, config_dir(directory))
    source = display_path(config_dir(directory) / f"{name}.yaml")
    groups = {role: env.hyperpod.groups(role) for role in ("prefill", "decode")}
    if instance_text is None:
        every = [g for role in groups.values() for g in role]
        active = [g for g in every if not g.parked] or every  # a parked group's type is not the one to plan
        types = sorted({g.instance_type for g in active})
        if len(types) != 1:
            raise ConfigError.single(source, "hyperpod.instance_groups", types,
                                     "prefill and decode groups use different instance types; pass --instance")
        instance_text = types[0]
    counts = {}
    names = {}
    for role, role_groups in groups.items():
        matching = [g for g in role_groups if g.instance_type == instance_text]
        if not matching:
            have = ", ".join(f"{g.name}: {g.count} x {g.instance_type}" for g in role_groups) or "none"
            raise ConfigError.single(source, "hyperpod.instance_groups", instance_text,
                                     f"environment {name} has no {role} group of this type ({have})")
        running = [g for g in matching if not g.parked]
        if not running:
            parked = ", ".join(g.name for g in matching)
            raise ConfigError.single(source, "hyperpod.instance_groups", instance_text,
                                     f"environment {name}'s {role} groups of this type are parked (count 0): {parked}; "
                                     "set a count to plan against them")
        counts[role] = sum(g.count for g in running)
        names[role] = running[0].name
    return _Target(name=name, source=source, region=env.region, prefill_group=names["prefill"],
                   decode_group=names["decode"], prefill_nodes=counts["prefill"],
                   decode_nodes=counts["decode"], prices=dict(env.cost.prices)), instance_text


def _check_layout(target: _Target, instance: str, prefill: int | None, decode: int | None,
                  baseline: int | None) -> None:
    for flag, value, role, limit in (("--prefill-nodes", prefill, "prefill", target.prefill_nodes),
                                     ("--decode-nodes", decode, "decode", target.decode_nodes)):
        if value is not None and value > limit:
            raise _fail(flag, value, f"larger than environment {target.name}'s {role} instance groups "
                                     f"({limit} x {instance} in {target.source})")
    total = target.prefill_nodes + target.decode_nodes
    if baseline is not None and baseline > total:
        raise _fail("--baseline-nodes", baseline, f"larger than environment {target.name}'s GPU instance groups "
                                                  f"({total} x {instance} in {target.source})")


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
        raise _fail("--sweep", args.sweep, str(exc)) from None


def _plot_path(value: str | None) -> Path | None:
    if not value:
        return None
    plot = Path(value)
    if plot.suffix.lower() not in PLOT_FORMATS:
        raise _fail("--plot", value, "must be a .png or .svg file name")
    if not plot.parent.is_dir():
        raise _fail("--plot", value, f"directory {plot.parent} does not exist")
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise _fail("--plot", value, "needs matplotlib: pip install 'hyperpod-dpd[plot]'")
    return plot


def run(args: argparse.Namespace) -> int:
    from hyperpod_dpd.planner.plan import make_plan
    from hyperpod_dpd.planner.verdict import Slo

    chosen_model = _model(_required(args, "model"))
    prefill = _positive_int("--prefill-nodes", args.prefill_nodes)
    decode = _positive_int("--decode-nodes", args.decode_nodes)
    baseline = _positive_int("--baseline-nodes", args.baseline_nodes)
    max_len = _positive_int("--max-model-len", args.max_model_len)
    workload = _workload(args)
    slo = Slo(ttft_s=_milliseconds("--ttft-slo-ms", args.ttft_slo_ms),
              tpot_s=_milliseconds("--tpot-slo-ms", args.tpot_slo_ms))
    plot = _plot_path(args.plot)
    sweep = _sweep(args, workload)
    target = None
    instance_text = args.instance
    if args.env:
        target, instance_text = _environment(args.env, instance_text, args.config_dir)
    chosen_instance = _instance(instance_text if instance_text is not None else _required(args, "instance"))
    if target is not None:
        _check_layout(target, chosen_instance.name, prefill, decode, baseline)
        if prefill is None:
            prefill = target.prefill_nodes
        if decode is None:
            decode = min(target.decode_nodes, MAX_DECODE_REPLICAS)
    plan = make_plan(model=chosen_model, instance=chosen_instance, workload=workload, prefill_nodes=prefill,
                     decode_nodes=decode, baseline_nodes=baseline,
                     weight_dtype=_dtype("--dtype", args.dtype, chosen_instance),
                     kv_dtype=_dtype("--kv-dtype", args.kv_dtype, chosen_instance), max_model_len=max_len, slo=slo,
                     sweep=sweep, prices=target.prices if target is not None else None)
    notes = list(plan.warnings)
    if target is not None and plan.recommendation.prefill_replicas > target.prefill_nodes:
        notes.append(f"the recommended {plan.recommendation.prefill_replicas} prefill nodes exceed environment "
                     f"{target.name}'s {target.prefill_nodes}; predictions use its {plan.layout.prefill_nodes}")
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
        data = plan.to_dict()
        data["warnings"] = notes
        if target is not None:
            data["environment"] = target.name
        print_json(data)
        return 0
    print_report(plan, notes, sys.stdout)
    return 0
