"""What ``hpdpd plan --env NAME [--endpoint NAME]`` reads from an environment file.

``--env`` alone contributes the instance groups (the capacity the recommendation is sized within), the Region and the
prices. ``--endpoint`` plans one of the environment's endpoints *as configured*: every planner flag the command line
leaves out is filled from the endpoint (model, instance type, tensor parallelism, replicas per role, routing threshold,
``max_model_len``, the SLO its alerts fire at, and the vLLM flags in its ``args``), and the plan names each value it
took from the file, so a "what if" is the same command with one flag more.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.errors import ConfigError


@dataclass(frozen=True)
class Target:
    """What ``--env`` contributes: group names, node counts of the planned type, and the Region."""

    name: str
    source: str
    region: str
    prefill_group: str
    decode_group: str
    prefill_nodes: int
    decode_nodes: int
    prices: dict[str, float]


@dataclass(frozen=True)
class EndpointSettings:
    """An endpoint's values as planner flags: ``flags`` maps each filled flag to the value taken from the file."""

    name: str
    path: str  # the endpoint's field path in the file, e.g. endpoints[0]
    flags: dict[str, str]
    groups: dict[str, str | None]  # role -> the endpoint's instance group, None: every group of the role
    dpd_memory_utilization: float
    notes: tuple[str, ...]
    source: str
    model_problem: tuple[str, str, str] | None = None  # (field, value, message): no catalogue model to fill --model


def load(name: str, directory: str | None) -> tuple[Any, str]:
    from hyperpod_dpd.config import config_dir, load_environment
    from hyperpod_dpd.config.loader import display_path

    return load_environment(name, config_dir(directory)), display_path(config_dir(directory) / f"{name}.yaml")


def environment_target(env: Any, source: str, instance_text: str | None,
                       groups: Mapping[str, str | None] | None = None) -> tuple[Target, str]:
    """The environment's running groups of the planned instance type per role (only ``groups``' when named)."""
    name = env.name
    by_role = {}
    for role in ("prefill", "decode"):
        wanted = (groups or {}).get(role)
        by_role[role] = [g for g in env.hyperpod.groups(role) if wanted is None or g.name == wanted]
    if instance_text is None:
        every = [g for role in by_role.values() for g in role]
        active = [g for g in every if not g.parked] or every  # a parked group's type is not the one to plan
        types = sorted({g.instance_type for g in active})
        if len(types) != 1:
            raise ConfigError.single(source, "hyperpod.instance_groups", types,
                                     "prefill and decode groups use different instance types; pass --instance")
        instance_text = types[0]
    counts = {}
    names = {}
    for role, role_groups in by_role.items():
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
    return Target(name=name, source=source, region=env.region, prefill_group=names["prefill"],
                  decode_group=names["decode"], prefill_nodes=counts["prefill"],
                  decode_nodes=counts["decode"], prices=dict(env.cost.prices)), instance_text


def endpoint_settings(env: Any, source: str, wanted: str) -> EndpointSettings:
    """The planner flags of the environment's endpoint ``wanted``, or one clear error naming the file and field."""
    from hyperpod_dpd.catalogue.models import MODELS, model_by_name

    names = [e.name for e in env.endpoints]
    if wanted not in names:
        raise ConfigError.single(source, "endpoints", wanted, f"environment {env.name} has no such endpoint; "
                                 f"its endpoints: {', '.join(names) or 'none'}")
    index = names.index(wanted)
    e = env.endpoints[index]
    path = f"endpoints[{index}]"
    flags: dict[str, str] = {}
    notes: list[str] = []
    spec = model_by_name(e.model.name)
    if spec is not None:
        flags["--model"] = spec.key
    flags["--instance"] = e.instance_type
    tp = e.gpus_per_pod
    flags["--prefill-tp"] = flags["--decode-tp"] = str(tp)
    for role in ("prefill", "decode"):
        role_config = e.role(role)
        nodes, per_node = _layout(role, role_config.replicas, e.instance.gpu_count // tp,
                                  source, f"{path}.{role}.replicas")
        flags[f"--{role}-nodes"], flags[f"--{role}-per-node"] = str(nodes), str(per_node)
        if role_config.autoscaling is not None:
            scaling = role_config.autoscaling
            notes.append(f"{role} autoscales between {scaling.min_replicas} and {scaling.max_replicas} replicas; "
                         f"planned at its configured {role_config.replicas} (--{role}-nodes plans another count)")
    flags["--routing-threshold"] = str(e.routing.threshold)
    if e.max_model_len is not None:
        flags["--max-model-len"] = str(e.max_model_len)
    flags["--ttft-slo-ms"], flags["--tpot-slo-ms"] = str(e.slo.ttft_ms), str(e.slo.tpot_ms)
    argv = {role: [*e.args, *e.role(role).args] for role in ("prefill", "decode")}
    flags.update(_engine_flags(argv, source, path, notes))
    unknown = None if spec is not None else (f"{path}.model.name", e.model.name,
                                             f"is not in the planner's model catalogue ({', '.join(MODELS)}); pass "
                                             "--model-config with the model's config.json, or --model")
    return EndpointSettings(name=e.name, path=path, flags=flags, dpd_memory_utilization=e.gpu_memory_utilization,
                            groups={role: e.role(role).instance_group for role in ("prefill", "decode")},
                            notes=tuple(notes), source=source, model_problem=unknown)


def _layout(role: str, replicas: int, per_node: int, source: str, path: str) -> tuple[int, int]:
    """Nodes and replicas per node for ``replicas`` pods of which a node holds at most ``per_node``: the planner
    models the same number of replicas on every node, so an uneven spread is refused, never rounded."""
    nodes = math.ceil(replicas / per_node)
    if replicas % nodes:
        raise ConfigError.single(source, path, replicas, f"{replicas} {role} replicas, at most {per_node} per node, "
                                 f"do not spread evenly over {nodes} nodes; pass --{role}-nodes and "
                                 f"--{role}-per-node to plan a layout the planner models")
    return nodes, replicas // nodes


# vLLM flags in an endpoint's args the planner models: vLLM flag -> (planner flag, the role whose value decides)
# (the last occurrence, as vLLM's argparse keeps it: hyperpod_dpd/config/vllm_args.py)
_VLLM_FLAGS = {"--max-num-seqs": ("--max-num-seqs", "decode"),
               "--max-num-batched-tokens": ("--max-num-batched-tokens", "prefill"),
               "--kv-cache-dtype": ("--kv-dtype", "decode")}


def _engine_flags(argv: Mapping[str, Sequence[str]], source: str, path: str, notes: list[str]) -> dict[str, str]:
    from hyperpod_dpd.config.vllm_args import last_flag_value
    from hyperpod_dpd.ops.fabric import KV_DTYPES, NIXL_CONNECTOR, connector

    out: dict[str, str] = {}
    for vllm_flag, (flag, deciding) in _VLLM_FLAGS.items():
        values = {role: last_flag_value(args, vllm_flag) for role, args in argv.items()}
        value = values[deciding]
        if value is None:
            continue
        other = values["prefill" if deciding == "decode" else "decode"]
        if other != value:
            shown = {role: "unset" if v is None else v for role, v in values.items()}
            notes.append(f"{vllm_flag} is {shown['prefill']} on prefill and {shown['decode']} on decode; planned "
                         f"with the {deciding} role's {value}")
        if flag == "--kv-dtype":
            if value not in KV_DTYPES:
                raise ConfigError.single(source, f"{path}.args", value, f"{vllm_flag} {value} is not modelled by "
                                         f"the planner (modelled: {', '.join(KV_DTYPES)})")
            value = KV_DTYPES[value] or "bf16"
        out[flag] = value
    if any(connector(args) == NIXL_CONNECTOR for args in argv.values()):
        out["--kv-connector"] = "nixl"
    return out


def fill(args: argparse.Namespace, settings: EndpointSettings) -> dict[str, str]:
    """Set every planner flag the command line left out from the endpoint; returns the flags taken, with values."""
    if settings.model_problem is not None and args.model is None and args.model_config is None:
        raise ConfigError.single(settings.source, *settings.model_problem)
    taken = {}
    for flag, value in settings.flags.items():
        if flag == "--model" and args.model_config is not None:
            continue  # the command line's model, from its config.json
        if flag.endswith("-per-node") and flag.replace("-per-node", "-tp") not in taken:
            continue  # the command line's TP: the node holds GPUs / TP replicas, not the endpoint's count
        attribute = flag[2:].replace("-", "_")
        if getattr(args, attribute) is None:
            setattr(args, attribute, value)
            taken[flag] = value
    return taken


def described(settings: EndpointSettings, taken: Mapping[str, str]) -> str:
    """The line that opens a plan of ``settings``: which endpoint, and each value taken from its file."""
    shown = ", ".join(f"{flag} {value}" for flag, value in taken.items()) or "nothing (every flag was given)"
    return (f"Endpoint {settings.name} as configured ({settings.source}: {settings.path}): {shown}; a flag on the "
            "command line replaces the endpoint's value")
