"""The planner's efficiency factors and engine defaults, each with the public measurement or default it comes from.

Datasheet peaks (catalogue) are never reached; these factors turn them into what vLLM + LMCache + NIXL achieve. Each
field says whether it is *calibrated* (fitted to a public measurement) or *assumed* (a documented engine default or a
conservative choice). docs/planner.md ("Calibration") explains the fits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors (fractions of catalogue peaks), fixed costs in seconds, sizes in tokens or bytes."""

    # Calibrated: Dynamo on p5.48xlarge, Llama-3.1-8B, ISL 8000 (ai-dynamo/dynamo
    # docs/kubernetes/disagg-communication-guide.md). The disaggregated prefill worker sustained 248 tok/s x 8000 / 50
    # = 39,680 prompt tok/s, i.e. >= 0.73 of one H100's dense BF16 peak; the 173 ms unqueued TTFT caps it near 0.85.
    prefill_efficiency: float = 0.75
    # Calibrated: llm-d's peakPrefillThroughput of 33,821 tok/s for gpt-oss-120b (5.1B active) on one H200 per TP1
    # pod (llm-d guides, llm-d/llm-d) = 0.35 of dense BF16 peak. Grouped expert GEMMs run well below dense ones.
    moe_prefill_efficiency: float = 0.35
    # Calibrated: vLLM decoding Llama-3.1-8B at batch 1 reaches 77% of the HBM roofline (75 tok/s on an A100 40GB,
    # vLLM 0.23.0, public concurrency sweep at johnmusgrave.com). Folds per-step overhead in.
    hbm_efficiency: float = 0.77
    # Calibrated: NIXL/libfabric moved KV at ~9.6 GB/s over 4 EFA interfaces (4 x 100 Gbit/s = 50 GB/s) on
    # p5.48xlarge, i.e. 0.192 of line rate (Dynamo EFA guide). Each TP rank uses its GPU's share of NICs.
    efa_efficiency: float = 0.192
    # Calibrated: the disaggregated path added 37 ms to the unqueued TTFT (173 -> 210 ms) on top of the bulk
    # transfer (same Dynamo measurement): router hop, prefiller hand-off, NIXL/LMCache bookkeeping.
    transfer_fixed_s: float = 0.037
    # Calibrated: share of a request's bulk KV transfer during which the decoder's steps stall. With 0 the model
    # predicts Dynamo's disaggregated ITL at 6.9 ms and ITL gains of 59-82% over ISL 1000-8000; with 1 it predicts
    # 15.8 ms (measured 16.9) and gains of 7-59% (measured 7-41%), throughput -4..+16% (measured 0..+22%).
    decoder_transfer_stall: float = 1.0
    # Assumed: all-reduce bus bandwidth as a fraction of unidirectional NVLink (half the bidirectional catalogue
    # figure), and the latency of one small all-reduce (vLLM custom all-reduce on NVLink). Not calibrated.
    nvlink_efficiency: float = 0.8
    allreduce_latency_s: float = 10e-6
    # Documented default: vLLM's --max-num-batched-tokens for the OpenAI server on GPUs with >= 70 GiB
    # (vllm/engine/arg_utils.py, get_batch_defaults). The chunk a colocated engine adds to one step.
    chunk_tokens: int = 8192
    # Documented defaults: vLLM --gpu-memory-utilization 0.9 (colocated); 0.75 for DPD roles (SageMaker HyperPod DPD documentation, tuning table).
    colocated_memory_utilization: float = 0.9
    dpd_memory_utilization: float = 0.75
    # Assumed: HBM per GPU that is neither weights nor KV (activations, CUDA graphs, NCCL buffers).
    non_kv_overhead_bytes: float = 3 * 1024**3
    # Assumed: the prefill pool is sized to run at most this busy, so its queue stays short.
    prefill_target_utilization: float = 0.8
    notes: Mapping[str, str] = field(default_factory=lambda: _NOTES, compare=False, repr=False)

    def with_overrides(self, **values: Any) -> Calibration:
        return replace(self, **values)


_NOTES: Mapping[str, str] = MappingProxyType({
    "prefill_efficiency": "calibrated: Dynamo p5.48xlarge Llama-3.1-8B ISL 8000 (>= 39,680 prompt tok/s per H100)",
    "moe_prefill_efficiency": "calibrated: llm-d peakPrefillThroughput 33,821 tok/s, gpt-oss-120b, one H200",
    "hbm_efficiency": "calibrated: vLLM Llama-3.1-8B batch-1 decode at 77% of the HBM roofline",
    "efa_efficiency": "calibrated: Dynamo NIXL/libfabric 9.6 GB/s over 4 EFA interfaces on p5.48xlarge",
    "transfer_fixed_s": "calibrated: Dynamo unqueued TTFT 173 ms aggregated vs 210 ms disaggregated",
    "decoder_transfer_stall": "calibrated: Dynamo ITL and throughput change over ISL 1000-8000",
    "nvlink_efficiency": "assumed",
    "allreduce_latency_s": "assumed",
    "chunk_tokens": "vLLM default max_num_batched_tokens (OpenAI server, >= 70 GiB GPUs)",
    "colocated_memory_utilization": "vLLM default --gpu-memory-utilization",
    "dpd_memory_utilization": "HyperPod DPD tuning default (SageMaker HyperPod DPD documentation, tuning table)",
    "non_kv_overhead_bytes": "assumed",
    "prefill_target_utilization": "assumed",
})

DEFAULT_CALIBRATION = Calibration()
