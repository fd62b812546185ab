"""Roofline formulas for one vLLM replica (``tensor_parallel`` GPUs of one node) and for the KV transfer over EFA.

Units: seconds, bytes, tokens. One engine step processes ``batch`` decode tokens (each attending over its own
context) plus, in colocated serving, one prefill chunk; its time is the larger of HBM traffic and compute, plus the
tensor-parallel all-reduces, which do not overlap with either in vLLM's decode path.

The KV transfer is built from the fabric up: each TP rank moves its slice over its own GPU's share of the EFA
interfaces, at most at their line rate times the NIXL path's measured efficiency, and at most at the interfaces'
message rate times the message size (one connector block of one layer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.precision import dense_speedup

ACTIVATION_BYTES = 2  # BF16 activations in the all-reduces


def prefill_flops(model: ModelSpec, tokens: float, context: float = 0.0) -> float:
    """FLOPs to prefill ``tokens`` new tokens after ``context`` cached ones.

    2 x active parameters per token for the matmuls, plus causal attention: each new token at position p costs
    4 x layers x heads x head_dim x p (QK^T and PV), summed over the chunk.
    """
    attention = 4 * model.layers * model.attention_width * tokens * (context + tokens / 2)
    return 2 * model.body_parameters * tokens + 2 * model.head_parameters + attention


def allreduce_seconds(*, nbytes: float, tensor_parallel: int, nvlink_gbps: float, calibration: Calibration) -> float:
    """Ring all-reduce of ``nbytes`` per GPU: each GPU sends 2(n-1)/n of it over unidirectional NVLink."""
    if tensor_parallel <= 1:
        return 0.0
    bus = nvlink_gbps / 2 * 1e9 * calibration.nvlink_efficiency
    return calibration.allreduce_latency_s + nbytes * 2 * (tensor_parallel - 1) / tensor_parallel / bus


@dataclass(frozen=True)
class StepCosts:
    """Per-step cost coefficients of one replica, precomputed so that evaluating a step is a few float operations."""

    dense_weights_s: float  # reading the non-expert weights once (per GPU)
    expert_weights_s: float  # reading every routed expert once (0 for dense models)
    expert_miss: float  # 1 - experts_per_token / experts: chance one token skips a given expert
    kv_read_s_per_token: float  # reading one cached token's KV slice on one GPU
    linear_s_per_token: float  # matmul FLOPs of one token through the layers at calibrated throughput
    head_s_per_token: float  # the LM head's matmul for one sampled token
    attention_s_per_pair: float  # attention FLOPs of one (query token, cached token) pair
    comm_fixed_s: float  # latency of a step's all-reduces
    comm_s_per_token: float  # bandwidth part of a step's all-reduces, per token in the step
    overlap_loss: float = 0.0  # share of the shorter of HBM traffic and compute that does not hide under the longer
    step_fixed_s: float = 0.0  # per-step cost outside the GPU kernels (scheduling, sampling, launch)


def step_costs(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int,
               calibration: Calibration) -> StepCosts:
    gpu = instance.gpu
    if gpu is None:
        raise ValueError(f"{instance.name} has no GPU")
    tp = tensor_parallel
    hbm = gpu.hbm_bandwidth_gbps * 1e9 * calibration.hbm_efficiency
    efficiency = calibration.moe_prefill_efficiency if model.is_moe else calibration.prefill_efficiency
    flops = tp * gpu.bf16_dense_tflops * 1e12 * efficiency  # attention runs at the BF16 rate
    linear_flops = flops
    if model.weight_dtype != "bf16":  # FP8 / FP4 GEMMs: their dense peak at the low-precision efficiency
        linear_flops = (tp * gpu.bf16_dense_tflops * 1e12 * dense_speedup(instance, model.weight_dtype)
                        * calibration.low_precision_efficiency)
        if model.is_moe:  # grouped expert GEMMs keep their penalty relative to dense ones
            linear_flops *= calibration.moe_prefill_efficiency / calibration.prefill_efficiency
    expert_bytes = model.expert_parameters * model.bytes_per_param
    allreduces = 2 * model.layers  # after attention and after the MLP of every layer
    per_token = allreduce_seconds(nbytes=model.hidden_size * ACTIVATION_BYTES, tensor_parallel=tp,
                                  nvlink_gbps=gpu.nvlink_bandwidth_gbps, calibration=calibration)
    latency = calibration.allreduce_latency_s if tp > 1 else 0.0
    return StepCosts(
        dense_weights_s=(model.streamed_weight_bytes - expert_bytes) / tp / hbm,
        expert_weights_s=expert_bytes / tp / hbm,
        expert_miss=1 - model.experts_per_token / model.experts if model.is_moe else 1.0,
        kv_read_s_per_token=model.kv_bytes_per_token_per_rank(tp) / hbm,
        linear_s_per_token=2 * model.body_parameters / linear_flops,
        head_s_per_token=2 * model.head_parameters / linear_flops,
        attention_s_per_pair=4 * model.layers * model.attention_width / flops,
        comm_fixed_s=allreduces * latency + calibration.step_overhead_s,
        comm_s_per_token=allreduces * (per_token - latency),
        overlap_loss=calibration.overlap_loss,
        step_fixed_s=calibration.step_overhead_s,
    )


def step_seconds(costs: StepCosts, *, batch: float, context: float, chunk: float = 0.0,
                 chunk_context: float = 0.0) -> float:
    """One engine step: ``batch`` decode tokens over ``context`` cached tokens in total, plus a prefill chunk."""
    tokens = batch + chunk
    if tokens <= 0:
        return 0.0
    touched = 1.0 - costs.expert_miss ** tokens if costs.expert_weights_s else 0.0
    memory = (costs.dense_weights_s + costs.expert_weights_s * touched
              + (context + chunk_context) * costs.kv_read_s_per_token)
    compute = (tokens * costs.linear_s_per_token + (batch + (1 if chunk else 0)) * costs.head_s_per_token
               + (context + chunk * (chunk_context + chunk / 2)) * costs.attention_s_per_pair)
    return _overlapped(memory, compute, costs.overlap_loss) + costs.comm_fixed_s + tokens * costs.comm_s_per_token


def _overlapped(memory: float, compute: float, loss: float) -> float:
    """Kernels overlap HBM traffic and math imperfectly: the longer of the two plus ``loss`` of the shorter."""
    return memory + loss * compute if memory > compute else compute + loss * memory


def chunks(tokens: int, chunk_tokens: int, cached: int = 0) -> tuple[tuple[int, int], ...]:
    """(chunk size, tokens before it) for chunked prefill of a prompt whose first ``cached`` tokens are a prefix-cache
    hit: only the rest is computed, attending over the cached part."""
    return tuple((min(chunk_tokens, tokens - start), start) for start in range(cached, tokens, chunk_tokens))


def cached_tokens(tokens: int, hit_rate: float) -> int:
    """Prompt tokens served from the prefix cache; vLLM always computes at least the last token."""
    return min(tokens - 1, int(tokens * hit_rate)) if hit_rate > 0 else 0


def prefill_seconds(costs: StepCosts, *, tokens: int, chunk_tokens: int, cached: int = 0) -> float:
    """Prefill of one prompt on an otherwise idle replica (the DPD prefiller), chunk by chunk."""
    return sum(step_seconds(costs, batch=0, context=0, chunk=size, chunk_context=start)
               for size, start in chunks(tokens, chunk_tokens, cached))


def rank_line_rate(instance: InstanceSpec) -> float:
    """EFA line rate in bytes/s behind one GPU: the instance's interfaces are spread evenly over its GPUs
    (p5: 4 x 100 Gbit/s, p5en: 2 x 200, p6-b200: 1 x 400, p6-b300: 2 x 400 per GPU)."""
    if not instance.gpu_count:
        return 0.0
    return instance.efa_bandwidth_gbps * 1e9 / 8 / instance.gpu_count


def rdma_rank_bytes_per_s(*, instance: InstanceSpec, message_bytes: float, calibration: Calibration,
                          efficiency: float | None = None) -> float:
    """What one GPU's share of the EFA interfaces moves in messages of ``message_bytes``: the smaller of the line
    rate times the path's large-message efficiency and the interfaces' message rate times the message size.

    Each RDMA write costs the interface a fixed time whatever its size, so small messages are bound by the message
    rate (``efa_messages_per_s_per_interface``) and large ones by bandwidth; the knee sits where both are equal.
    """
    line = rank_line_rate(instance)
    if line <= 0:
        return 0.0
    share = instance.efa_interfaces / instance.gpu_count if instance.gpu_count else 0.0
    bound = line * (calibration.transfer_efficiency if efficiency is None else efficiency)
    return min(bound, message_bytes * calibration.efa_messages_per_s_per_interface * share)


def kv_message_bytes(*, model: ModelSpec, tensor_parallel: int, calibration: Calibration) -> float:
    """One RDMA write of the KV path: one connector block of one layer on one rank (the paged KV cache and
    LMCache's layer-wise chunks are laid out per layer, so a block's layers are separate regions)."""
    return calibration.connector_block_tokens * model.kv_bytes_per_token_per_rank(tensor_parallel) / model.layers


def efa_bytes_per_s(*, instance: InstanceSpec, tensor_parallel: int, calibration: Calibration,
                    model: ModelSpec | None = None) -> float:
    """Effective KV bandwidth of one role's replica: each of its TP ranks drives its own GPU's interfaces, in the
    messages ``model``'s KV blocks make (large messages when no model is given)."""
    message = math.inf if model is None else kv_message_bytes(model=model, tensor_parallel=tensor_parallel,
                                                               calibration=calibration)
    rate = (rank_line_rate(instance) * calibration.transfer_efficiency if math.isinf(message) else
            rdma_rank_bytes_per_s(instance=instance, message_bytes=message, calibration=calibration))
    return rate * min(tensor_parallel, instance.gpu_count)


def kv_transfer_seconds(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, tokens: float,
                        calibration: Calibration) -> float:
    """Bulk move of a prompt's KV from prefiller to decoder: the ranks send their slices in parallel, each at its
    GPU's share of EFA in the connector's message size. Never faster than the line rate (efficiency <= 1)."""
    rate = rdma_rank_bytes_per_s(instance=instance, calibration=calibration,
                                 message_bytes=kv_message_bytes(model=model, tensor_parallel=tensor_parallel,
                                                                calibration=calibration))
    if rate <= 0:
        return math.inf
    return tokens * model.kv_bytes_per_token_per_rank(tensor_parallel) / rate


def exposed_transfer_seconds(*, bulk_s: float, prefill_s: float, layers: int, layerwise: bool) -> float:
    """The part of the bulk transfer that reaches TTFT after the prefill ends.

    Layer-wise, layer i's KV leaves while layer i + 1 is computed: a two-stage pipeline over ``layers`` stages whose
    exposed tail is one layer's transfer when the link keeps up, else what the prefill could not hide.
    """
    if not layerwise or layers <= 1:
        return bulk_s
    return max(bulk_s / layers, bulk_s - prefill_s * (layers - 1) / layers)


def join_seconds(costs: StepCosts, *, tokens: float, calibration: Calibration) -> float:
    """Decoder engine time one disaggregated request costs while its KV lands and it joins the batch.

    HBM: the NIC's DMA write of each byte, plus a read and a write per PD-buffer copy into the paged cache. Engine:
    the connector's bookkeeping per KV block received.
    """
    hbm = tokens * costs.kv_read_s_per_token * (1 + 2 * calibration.pd_buffer_copies)
    blocks = math.ceil(tokens / max(1, calibration.connector_block_tokens))
    return hbm + blocks * calibration.join_s_per_block


def free_bytes_per_gpu(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, utilization: float,
                       calibration: Calibration, reserved_bytes: float = 0.0) -> float:
    """HBM per GPU left for the KV cache after weights, non-KV overhead and ``reserved_bytes`` (the PD buffer)."""
    gpu = instance.gpu
    if gpu is None:
        return 0.0
    usable = gpu.memory_gib * 1024**3 * utilization
    return usable - model.weight_bytes / tensor_parallel - calibration.non_kv_overhead_bytes - reserved_bytes


def kv_capacity_tokens(*, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, utilization: float,
                       calibration: Calibration, reserved_bytes: float = 0.0) -> float:
    """How many tokens of KV one replica can hold."""
    free = free_bytes_per_gpu(model=model, instance=instance, tensor_parallel=tensor_parallel,
                              utilization=utilization, calibration=calibration, reserved_bytes=reserved_bytes)
    return max(0.0, free) / model.kv_bytes_per_token_per_rank(tensor_parallel)


def valid_tensor_parallel_sizes(model: ModelSpec, instance: InstanceSpec) -> tuple[int, ...]:
    """Powers of two up to the node's GPU count that split the attention heads evenly (vLLM's requirement)."""
    sizes = []
    tp = 1
    while tp <= instance.gpu_count:
        if model.attention_heads % tp == 0:
            sizes.append(tp)
        tp *= 2
    return tuple(sizes)


def next_power_of_two(value: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, value))))
