"""Decisions drawn from the serving model: tensor parallelism, max_model_len, prefill:decode ratio, PD buffer.

The routing threshold is chosen in ``threshold.py`` and the SLA verdict in ``verdict.py``. Each function returns its
value with the reasons a reader needs to trust or overrule it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.formulas import (
    free_bytes_per_gpu,
    kv_capacity_tokens,
    next_power_of_two,
    valid_tensor_parallel_sizes,
)

GIB = 1024**3
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
    if fitting and instance.gpu_count not in sizes:  # the weights fit; the heads do not split over the whole node
        raise PlanError(f"{model.key} has {model.attention_heads} attention heads, which {instance.gpu_count} GPUs "
                        f"of {instance.name} cannot split evenly (vLLM's tensor parallelism must divide them); "
                        f"give --prefill-tp and --decode-tp (possible: {', '.join(map(str, fitting))}) to run "
                        "several replicas per node")
    if not fitting or fitting[-1] != instance.gpu_count:
        need = model.weight_bytes / 1e9
        have = (instance.gpu.memory_gib if instance.gpu else 0) * instance.gpu_count * 1024**3 / 1e9
        raise PlanError(f"{model.name} needs {need:,.0f} GB of {model.weight_dtype.upper()} weights, more than one "
                        f"{instance.name} holds "
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


def given_tensor_parallel(*, model: ModelSpec, instance: InstanceSpec, tp: int, role: str, utilization: float,
                          calibration: Calibration) -> None:
    """A tensor parallelism asked for a role must split the attention heads and hold the weights (vLLM refuses
    both at start-up); one node holds GPUs / TP replicas."""
    sizes = valid_tensor_parallel_sizes(model, instance)
    if tp not in sizes:
        raise PlanError(f"{role} tensor parallelism {tp} is not possible for {model.key} on {instance.name}: it must "
                        f"be a power of two up to {instance.gpu_count} GPUs that divides {model.attention_heads} "
                        f"attention heads ({', '.join(map(str, sizes))})")
    if free_bytes_per_gpu(model=model, instance=instance, tensor_parallel=tp, utilization=utilization,
                          calibration=calibration) <= 0:
        raise PlanError(f"{role} tensor parallelism {tp}: {model.weight_bytes / tp / GIB:.1f} GiB of "
                        f"{model.weight_dtype.upper()} weights per GPU leave no KV room on {instance.name} at "
                        f"--gpu-memory-utilization {utilization}; use a larger TP")


def max_model_len(*, model: ModelSpec, peak_tokens: int, given: int | None = None) -> Decision:
    """The deployed ``--max-model-len`` when given (it must admit the longest request), else a recommendation: the
    longest request rounded up to a power of two, within the model's context."""
    if peak_tokens > model.max_context:
        raise PlanError(f"the longest request ({peak_tokens:,} tokens, prompt plus output) exceeds "
                        f"{model.name}'s context of {model.max_context:,} tokens")
    if given is not None:
        if given > model.max_context:
            raise PlanError(f"max_model_len {given:,} exceeds {model.name}'s context of {model.max_context:,} tokens")
        if given < peak_tokens:
            raise PlanError(f"max_model_len {given:,} is shorter than the longest request ({peak_tokens:,} tokens, "
                            "prompt plus output); vLLM would reject it")
        return Decision(given, (f"max_model_len {given:,} as deployed; the longest request is {peak_tokens:,} "
                                "tokens",))
    value = min(next_power_of_two(peak_tokens), model.max_context)
    return Decision(value, (f"max_model_len {value:,}: the longest request is {peak_tokens:,} tokens (pass "
                            "--max-model-len to plan the deployed value)",))


def require_decoder_room(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, peak_tokens: int,
                         calibration: Calibration) -> None:
    """The decoder must hold at least one request of ``peak_tokens`` (the longest request, or the deployed
    max_model_len, which vLLM checks at start-up) next to its weights and the default PD buffer."""
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
