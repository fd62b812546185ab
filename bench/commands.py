"""Every row of the planner's calibration table as an ``hpdpd plan`` run: the flags that express the published setup
and the JSON value that is the planner's prediction for it.

``bench/calibration.py --commands`` prints them; tests/hyperpod_dpd/cli/test_plan_published.py runs each one and holds
its JSON value to the table's prediction, so no published setup needs the planner's internal Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.planner import published
from hyperpod_dpd.planner.calibration import MOONCAKE_EFA, NIM_TRTLLM, SGLANG
from hyperpod_dpd.planner.measurements import (
    LLAMA3_CHAT_TEMPLATE_TOKENS,
    OFFLINE_IN_FLIGHT,
    UNIFORM_1024,
    UNLOADED,
    latency_key,
    nim_key,
    offline_key,
    online_key,
    rdma_key,
)

Json = Mapping[str, Any]
# The --calibration files the commands name (placeholders), with their constants and sources: what the Mooncake rows
# change (calibration.MOONCAKE_EFA) and SGLang's per-request cost (calibration.SGLANG)
PROFILES: dict[str, dict[str, tuple[float, str]]] = {
    "mooncake-efa.yaml": {name: (value, f"{published.MOONCAKE}, p5en.48xlarge block_size sweep")
                          for name, value in MOONCAKE_EFA.items()},
    "sglang.yaml": {name: (value, f"{published.DATACRUNCH}, Llama-3.3-70B TP4 median TTFT at 1 request/s")
                    for name, value in SGLANG.items()},
}
_INSTANCES = {"H100": "ml.p5.48xlarge", "H200": "ml.p5e.48xlarge", "B200": "ml.p6-b200.48xlarge"}
# Llama-3.1-8B at TP1 keeps 4 KiB of KV per token and layer: a connector block of n tokens is one n x 4 KiB write
_KV_BYTES_PER_TOKEN_AND_LAYER = 4096


@dataclass(frozen=True)
class Command:
    """``hpdpd`` arguments, and how the prediction is read from their ``--output json``."""

    argv: tuple[str, ...]
    reads: str
    value: Callable[[Json], float] = field(repr=False, compare=False)
    profile: str = ""  # the PROFILES file its --calibration names, if any

    def line(self) -> str:
        return "hpdpd " + " ".join(self.argv) + " --output json"


def _point(mode: str, key: str) -> tuple[str, Callable[[Json], float]]:
    return f"predictions[0].{mode}.{key}", lambda d: float(d["predictions"][0][mode][key])


def _change(key: str) -> tuple[str, Callable[[Json], float]]:
    def value(d: Json) -> float:
        point = d["predictions"][0]
        return (point["disaggregated"][key] / point["colocated"][key] - 1) * 100

    return f"(predictions[0].disaggregated.{key} / predictions[0].colocated.{key} - 1) x 100", value


def _top(key: str, scale: float, unit: str) -> tuple[str, Callable[[Json], float]]:
    return f"{key} x {scale:g} ({unit})", lambda d: float(d[key]) * scale


def _args(**flags: Any) -> tuple[str, ...]:
    out: list[str] = ["plan"]
    for name, value in flags.items():
        out += [f"--{name.replace('_', '-')}", str(value)]
    return tuple(out)


def _single_gpu(**flags: Any) -> dict[str, Any]:
    """One GPU per role (Llama-3.1-8B at TP1): the layout of Dynamo's guide and of the fabric rows."""
    return dict(model="Llama-3.1-8B", prefill_tp=1, decode_tp=1, prefill_per_node=1, decode_per_node=1,
                colocated_tp=1, colocated_replicas=1, prefill_nodes=1, decode_nodes=1, baseline_nodes=1, **flags)


def _dynamo(isl: int, load: dict[str, Any]) -> tuple[str, ...]:
    # every prompt disaggregated (threshold 0), vLLM NixlConnector, as the guide deploys it
    return _args(**_single_gpu(instance="ml.p5.48xlarge", input_tokens=isl, output_tokens=50, kv_connector="nixl",
                               routing_threshold=0, **load))


_DYNAMO_READS = {"ttft": "ttft_ms", "itl": "tpot_ms", "tput": "output_tokens_per_s", "p95": "ttft_p95_ms"}


def _dynamo_command(key: str) -> Command | None:
    match = re.fullmatch(r"dynamo-(ttft|itl|tput|p95)-(aggregated|disaggregated)", key)
    if match:
        what, side = match.groups()
        load = {"request_rate": f"{UNLOADED:g}"} if what == "ttft" else {"concurrency": 10}
        mode = "colocated" if side == "aggregated" else "disaggregated"
        return Command(_dynamo(8000, load), *_point(mode, _DYNAMO_READS[what]))
    match = re.fullmatch(r"dynamo-(gain|itl-change)-(\d+)", key)
    if match:
        what, isl = match.groups()
        return Command(_dynamo(int(isl), {"concurrency": 10}),
                       *_change("output_tokens_per_s" if what == "gain" else "tpot_ms"))
    return None


def _fabric_commands() -> dict[str, Command]:
    def plan(instance: str, **flags: Any) -> tuple[str, ...]:
        return _args(**_single_gpu(instance=instance, input_tokens=8000, output_tokens=50, concurrency=1, **flags))

    ratio = ("efa_effective_gbytes_per_s / efa_line_rate_gbytes_per_s x 100 (%)",
             lambda d: d["efa_effective_gbytes_per_s"] / d["efa_line_rate_gbytes_per_s"] * 100)
    out = {"nixlbench-efficiency": Command(plan("ml.p5.48xlarge"), *ratio),
           "transferengine-efa-peak": Command(plan("ml.p5en.48xlarge"),
                                              *_top("efa_effective_gbytes_per_s", 8, "Gbit/s")),
           "p5en-line-rate": Command(plan("ml.p5en.48xlarge"), *_top("efa_line_rate_gbytes_per_s", 8, "Gbit/s"))}
    for link in published.RDMA:
        key = rdma_key(link)
        argv = (*plan(link.instance, block_size=link.block // _KV_BYTES_PER_TOKEN_AND_LAYER),
                "--calibration", "mooncake-efa.yaml")
        # one GPU's share; the published figure is the node's 8 GPUs writing at once
        out[key] = Command(argv, *_top("efa_effective_gbytes_per_s", 8, "GB/s, 8 GPUs"), "mooncake-efa.yaml")
    return out


def _engine_commands() -> dict[str, Command]:
    out: dict[str, Command] = {}
    for r in published.OFFLINE:
        key = offline_key(r)
        argv = _args(model=r.model, instance=_INSTANCES[r.gpu], input_tokens=r.isl, output_tokens=r.osl,
                     offline=OFFLINE_IN_FLIGHT, max_num_seqs=OFFLINE_IN_FLIGHT, dtype=r.weights, kv_dtype="fp8",
                     colocated_tp=r.tp, colocated_replicas=1, baseline_nodes=1, mode="colocated")
        out[key] = Command(argv, *_point("colocated", "output_tokens_per_s"))
    for t in published.LATENCY:
        steps = t.osl - 1
        argv = _args(model=t.model, instance=_INSTANCES[t.gpu], input_tokens=t.isl, output_tokens=t.osl,
                     offline=t.batch, colocated_tp=t.tp, colocated_replicas=1, baseline_nodes=1, mode="colocated")
        out[latency_key(t)] = Command(
            argv, f"predictions[0].colocated.ttft_ms + {steps} x predictions[0].colocated.tpot_ms",
            lambda d, steps=steps: d["predictions"][0]["colocated"]["ttft_ms"]
            + steps * d["predictions"][0]["colocated"]["tpot_ms"])
    # SGLang's random lengths on 1...1,024, as the table models them (8 equally likely bins)
    uniform = ",".join(f"{tokens}:{share:g}" for tokens, share in UNIFORM_1024.points)
    for o in published.ONLINE:
        argv = _args(model=o.model, instance="ml.p5e.48xlarge", input_tokens=uniform, output_tokens=uniform,
                     request_rate=f"{o.rate:g}", colocated_tp=o.tp, colocated_replicas=1, baseline_nodes=1,
                     mode="colocated", calibration="sglang.yaml")
        out[online_key(o, "ttft")] = Command(argv, *_point("colocated", "ttft_p50_ms"), "sglang.yaml")
        out[online_key(o, "itl")] = Command(argv, *_point("colocated", "itl_p50_ms"), "sglang.yaml")
    for n in published.NIM:
        # AIPerf's users start together; each prompt carries Llama 3's chat template; TensorRT-LLM's step budget
        argv = _args(model="Llama-3.3-70B", instance="ml.p5.48xlarge",
                     input_tokens=n.isl + LLAMA3_CHAT_TEMPLATE_TOKENS, output_tokens=n.osl, concurrency=n.users,
                     start="together", max_num_batched_tokens=NIM_TRTLLM["chunk_tokens"], dtype="fp8",
                     kv_dtype="fp8", colocated_tp=2, colocated_replicas=1, baseline_nodes=1, mode="colocated")
        for quantity, field_ in (("ttft", "ttft_ms"), ("itl", "tpot_ms"), ("tput", "output_tokens_per_s")):
            out[nim_key(n, quantity)] = Command(argv, *_point("colocated", field_))
    return out


def commands(keys: list[str]) -> dict[str, Command]:
    """The command of each measurement key that has one (a key without one is missing from the result)."""
    table = {**_fabric_commands(), **_engine_commands()}
    out = {}
    for key in keys:
        found = table.get(key) or _dynamo_command(key)
        if found is not None:
            out[key] = found
    return out


def calibration_yaml(constants: Mapping[str, tuple[float, str]]) -> str:
    """The --calibration file a command names."""
    lines = ["calibration:"]
    for name, (value, source) in constants.items():
        lines += [f"  {name}:", f"    value: {value!r}", f"    source: {source!r}"]
    return "\n".join(lines) + "\n"
