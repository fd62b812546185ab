"""Decisions drawn from the serving model: tensor parallelism, prefill:decode ratio, routing threshold, PD buffer, verdict.

Each function returns its value with the reasons a reader needs to trust or overrule it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE, DEFAULT_ROUTING_THRESHOLD
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.formulas import (
    StepCosts,
    chunks,
    free_bytes_per_gpu,
    kv_capacity_tokens,
    kv_transfer_seconds,
    next_power_of_two,
    step_seconds,
    valid_tensor_parallel_sizes,
)
from hyperpod_dpd.planner.serving import Point

GIB = 1024**3
# Threshold candidates: 256 x 1, 1.5, 2, 3, 4, 6 ... (two per octave), capped by the context length.
_GRID_BASE = 256
# The model keeps the measured default while its break-even lies within this factor of it.
THRESHOLD_TOLERANCE = 2.0
# Verdict rules, per load: DPD must keep this share of colocated throughput, and cut TPOT by TPOT_GAIN or the
# worst single-step stall by STALL_GAIN, without more than TTFT_LIMIT x colocated TTFT.
THROUGHPUT_FLOOR = 0.95
TPOT_GAIN = 0.10
STALL_GAIN = 2.0
TTFT_LIMIT = 2.0
BUFFER_HEADROOM = 1.1  # LMCache allocates whole chunks; leave room for rounding
BUFFER_SHARE_LIMIT = 0.5  # never give the PD buffer more than half of the decoder's free HBM


class PlanError(HpdpdError):
    """The request cannot be planned (the model does not fit, the lengths exceed its context, ...)."""


@dataclass(frozen=True)
class Decision:
    value: int
    reasons: tuple[str, ...]


def tensor_parallel_size(*, model: ModelSpec, instance: InstanceSpec, calibration: Calibration) -> Decision:
    """One replica per node: the operator has no multi-node roles and one decoder must use its whole node."""
    sizes = valid_tensor_parallel_sizes(model, instance)

    def fits(tp: int) -> bool:
        return free_bytes_per_gpu(model=model, instance=instance, tensor_parallel=tp,
                                  utilization=calibration.dpd_memory_utilization, calibration=calibration) > 0

    fitting = [tp for tp in sizes if fits(tp)]
    if not fitting or fitting[-1] != instance.gpu_count:
        need = model.weight_bytes / 1e9
        have = (instance.gpu.memory_gib if instance.gpu else 0) * instance.gpu_count * 1024**3 / 1e9
        raise PlanError(f"{model.name} needs {need:,.0f} GB of BF16 weights, more than one {instance.name} holds "
                        f"({have:,.0f} GB of HBM, {calibration.dpd_memory_utilization:.0%} of it for vLLM in DPD "
                        "roles); the operator has no multi-node roles, so choose an instance type with more GPU "
                        "memory")
    tp = instance.gpu_count
    reasons = [f"TP={tp}: one replica per {instance.name} node (the operator runs each role's pod on one node and "
               "the single decoder should use all of its GPUs)"]
    if fitting[0] < tp:
        reasons.append(f"the weights already fit at TP={fitting[0]}; TP={tp} buys KV-cache room and HBM bandwidth")
    if model.kv_heads < tp:
        reasons.append(f"{model.key} has {model.kv_heads} KV heads, so at TP={tp} vLLM replicates them: each rank "
                       f"holds {model.kv_bytes_per_token_per_rank(tp):,} bytes per token instead of "
                       f"{model.kv_bytes_per_token // tp:,}")
    return Decision(tp, tuple(reasons))


def max_model_len(*, model: ModelSpec, peak_tokens: int) -> int:
    if peak_tokens > model.max_context:
        raise PlanError(f"the longest request ({peak_tokens:,} tokens, prompt plus output) exceeds "
                        f"{model.name}'s context of {model.max_context:,} tokens")
    return min(next_power_of_two(peak_tokens), model.max_context)


def require_decoder_room(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, peak_tokens: int,
                         calibration: Calibration) -> None:
    """The decoder must hold at least the longest request next to its weights and the default PD buffer."""
    slots = kv_capacity_tokens(model=model, instance=instance, tensor_parallel=tensor_parallel,
                               utilization=calibration.dpd_memory_utilization, calibration=calibration,
                               reserved_bytes=DEFAULT_PD_BUFFER_SIZE)
    if slots < peak_tokens:
        raise PlanError(f"{model.name} on {instance.name}: next to {model.weight_bytes / tensor_parallel / GIB:.1f} "
                        f"GiB of weights per GPU and the default {DEFAULT_PD_BUFFER_SIZE // GIB} GiB PD buffer, the "
                        f"decoder has KV room for {slots:,.0f} tokens at --gpu-memory-utilization "
                        f"{calibration.dpd_memory_utilization}, less than the longest request ({peak_tokens:,}); "
                        "choose an instance type with more GPU memory")


def prefill_replicas(*, decode_limited_rate: float, remote_share: float, mean_service_s: float,
                     calibration: Calibration) -> Decision:
    """Enough prefill nodes to keep up with what one decoder can serve, at the target utilization."""
    if remote_share <= 0:
        return Decision(1, ("no prompt reaches the routing threshold, so the prefill node would idle; the operator "
                            "still needs one",))
    load = decode_limited_rate * remote_share * mean_service_s
    replicas = max(1, math.ceil(load / calibration.prefill_target_utilization - 1e-9))
    return Decision(replicas, (
        f"{replicas} prefill : 1 decode: one decoder sustains {decode_limited_rate:.2f} req/s here, of which "
        f"{remote_share:.0%} disaggregate at {mean_service_s * 1e3:,.0f} ms of prefill each = {load:.2f} prefill "
        f"nodes busy; sized for {calibration.prefill_target_utilization:.0%} utilization",))


def _grid(limit: int) -> list[int]:
    values, step = [], 0
    while True:
        value = _GRID_BASE * (2 ** (step // 2)) * (3 if step % 2 else 2) // 2
        if value > limit:
            return values
        values.append(value)
        step += 1


def break_even_tokens(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, costs: StepCosts,
                      batch: float, decode_context: float, limit: int, calibration: Calibration) -> int | None:
    """Shortest prompt whose local prefill stalls each decoding stream longer than moving its KV costs.

    Locally, a prompt of n tokens lengthens the decoder's steps by ``stall(n)``, felt by every stream in the batch.
    Disaggregated, it costs the request the transfer plus the fixed cost, and the decoder the calibrated share of
    the bulk transfer. ``None`` when nothing decodes at this load or the local prefill always wins.
    """
    if batch < 1:
        return None
    context = batch * decode_context
    step = step_seconds(costs, batch=batch, context=context)
    found = None
    for tokens in _grid(limit):
        stall = sum(step_seconds(costs, batch=batch, context=context, chunk=size, chunk_context=start) - step
                    for size, start in chunks(tokens, calibration.chunk_tokens))
        transfer = kv_transfer_seconds(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                       tokens=tokens, calibration=calibration)
        bulk = transfer - calibration.transfer_fixed_s
        pays = stall >= transfer + calibration.decoder_transfer_stall * bulk
        if pays and found is None:
            found = tokens
        elif not pays:
            found = None
    return found


def routing_threshold(break_even: int | None, *, limit: int) -> Decision:
    """Keep the measured default unless the model's break-even is clearly elsewhere."""
    default = DEFAULT_ROUTING_THRESHOLD
    if break_even is None:
        return Decision(default, (
            f"at this load a local prefill never stalls the decoder longer than a KV transfer costs; keep the "
            f"default {default} (prompts below it stay on the decoder)",))
    low, high = default / THRESHOLD_TOLERANCE, default * THRESHOLD_TOLERANCE
    if low <= break_even <= high:
        return Decision(default, (
            f"the model's break-even is {break_even:,} tokens, within {THRESHOLD_TOLERANCE:g}x of the measured "
            f"default {default}; keep {default}",))
    value = min(break_even, limit)
    direction = "lower" if value < default else "raise"
    return Decision(value, (
        f"{direction} the threshold to {value:,}: from {break_even:,} tokens a local prefill stalls every decoding "
        f"stream longer than the KV transfer costs (measured default {default})",))


def pd_buffer_size(*, in_flight: float, prompt_tokens: int, bytes_per_token_per_rank: int,
                   decoder_free_bytes: float) -> Decision:
    """Per-rank decoder receive buffer for the disaggregated requests that can be resident at the peak load.

    Upper bound: every disaggregated request on the decoder may still hold its received KV in the buffer (the
    operator ties buffer overflow to concurrency). Rounded up to a power of two GiB, never below the default.
    """
    if in_flight <= 0:
        return Decision(DEFAULT_PD_BUFFER_SIZE, (
            f"no prompt disaggregates; keep the default {DEFAULT_PD_BUFFER_SIZE // GIB} GiB",))
    transfers = max(1, math.ceil(in_flight - 1e-9))
    per_request = prompt_tokens * bytes_per_token_per_rank
    need = transfers * per_request * BUFFER_HEADROOM
    size = max(DEFAULT_PD_BUFFER_SIZE, next_power_of_two(need / GIB) * GIB)
    reasons = [f"{transfers} concurrent transfers x {prompt_tokens:,} tokens x {bytes_per_token_per_rank:,} "
               f"bytes per token per rank = {need / GIB:.2f} GiB with {BUFFER_HEADROOM - 1:.0%} headroom"]
    ceiling = BUFFER_SHARE_LIMIT * decoder_free_bytes
    if size > ceiling:
        capped = max(DEFAULT_PD_BUFFER_SIZE, 2 ** math.floor(math.log2(max(1.0, ceiling / GIB))) * GIB)
        holds = int(capped // per_request) if per_request else 0
        reasons.append(f"capped at {capped // GIB} GiB to leave the decoder KV room: it holds {holds} such "
                       "transfers; beyond that the decoder logs 'Failed to allocate memory object, retrying...'")
        size = capped
    elif size == DEFAULT_PD_BUFFER_SIZE:
        reasons.append(f"the default {DEFAULT_PD_BUFFER_SIZE // GIB} GiB is enough")
    return Decision(int(size), tuple(reasons))


@dataclass(frozen=True)
class Verdict:
    pays_off: bool
    reasons: tuple[str, ...]

    @property
    def decision(self) -> str:
        return "DPD pays off" if self.pays_off else "stay colocated"


def _ms(seconds: float) -> str:
    return "saturated" if math.isinf(seconds) else f"{seconds * 1e3:,.1f} ms"


def compare(colocated: Point, disaggregated: Point) -> tuple[bool, str]:
    """Whether DPD wins at one load, and the figures that say so."""
    if disaggregated.saturated:
        return False, "DPD saturates"
    if colocated.saturated:
        return True, "colocated saturates, DPD does not"
    throughput = disaggregated.output_tokens_per_s / colocated.output_tokens_per_s
    tpot = disaggregated.tpot_s / colocated.tpot_s
    stall = colocated.max_itl_s / disaggregated.max_itl_s
    ttft = disaggregated.ttft_s / colocated.ttft_s
    wins = (throughput >= THROUGHPUT_FLOOR and (tpot <= 1 - TPOT_GAIN or stall >= STALL_GAIN)
            and ttft <= TTFT_LIMIT)
    text = (f"throughput {colocated.output_tokens_per_s:,.0f} -> {disaggregated.output_tokens_per_s:,.0f} tok/s "
            f"({throughput - 1:+.0%}), TPOT {_ms(colocated.tpot_s)} -> {_ms(disaggregated.tpot_s)} ({tpot - 1:+.0%}), "
            f"longest step {_ms(colocated.max_itl_s)} -> {_ms(disaggregated.max_itl_s)}, "
            f"TTFT {_ms(colocated.ttft_s)} -> {_ms(disaggregated.ttft_s)} ({ttft - 1:+.0%})")
    return wins, text


def verdict(*, loads: Sequence[float], pairs: Sequence[tuple[Point, Point]], remote_share: float,
            threshold: int, load_name: str, context: Sequence[str] = ()) -> Verdict:
    """DPD pays off when it wins at most of the loads (the highest load breaks a tie)."""
    if remote_share <= 0:
        return Verdict(False, (f"no prompt reaches the routing threshold ({threshold:,} tokens): every request would "
                               "be prefilled and decoded by the single decoder while the prefill nodes idle",
                               *context))
    outcomes = [compare(c, d) for c, d in pairs]
    wins = sum(1 for won, _ in outcomes if won)
    pays = wins * 2 > len(outcomes) or (wins * 2 == len(outcomes) and outcomes[-1][0])
    reasons = [f"DPD wins at {wins} of {len(outcomes)} loads (it must keep {THROUGHPUT_FLOOR:.0%} of colocated "
               f"throughput, cut TPOT by {TPOT_GAIN:.0%} or the longest step {STALL_GAIN:g}x, and stay within "
               f"{TTFT_LIMIT:g}x colocated TTFT)"]
    for load, (won, text) in zip(loads, outcomes, strict=True):
        reasons.append(f"{load_name} {load:g}: {'DPD' if won else 'colocated'} - {text}")
    reasons.extend(context)
    return Verdict(pays, tuple(reasons))
