"""The planner's efficiency factors and engine defaults, each with the public measurement or default it comes from.

Datasheet peaks (catalogue) are never reached; these factors turn them into what vLLM + LMCache + NIXL achieve. Each
field says whether it is *calibrated* (fitted to a public measurement, listed in ``measurements.py`` with the
planner's prediction and its error), *measured* (read off a published benchmark of the component) or *assumed*
(a documented engine default or a stated choice). docs/planner.md ("Calibration") explains the fits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors (fractions of catalogue peaks), fixed costs in seconds, sizes in tokens or bytes."""

    # Calibrated: Dynamo on p5.48xlarge, Llama-3.1-8B BF16 on one H100, ISL 8000: minimum (unqueued) aggregated TTFT
    # 173 ms (ai-dynamo/dynamo docs/kubernetes/disagg-communication-guide.md, "Break-Even Analysis").
    prefill_efficiency: float = 0.85
    # Calibrated: NVIDIA NIM 1.8.0 benchmark, Llama-3.3-70B FP8 TP2 on 2 x H100, 5,000 input tokens, concurrency 1:
    # TTFT 406.77 ms (docs.nvidia.com/nim/benchmarking/llm, "Performance"). Fraction of the FP8 (or FP4) dense peak
    # the GEMMs reach; attention stays at the BF16 rate.
    low_precision_efficiency: float = 0.54
    # Calibrated: llm-d's peakPrefillThroughput of 33,821 tok/s for gpt-oss-120b (5.1B active) on one H200 per TP1
    # pod (llm-d guides, llm-d/llm-d) = 0.35 of dense BF16 peak. Grouped expert GEMMs run well below dense ones.
    moe_prefill_efficiency: float = 0.35
    # Calibrated: the same NIM benchmark, 500 input / 2,000 output tokens at concurrency 1: ITL 18.91 ms, i.e. the
    # weights (35 GB per H100) and KV read at this share of 3.35 TB/s, plus the TP all-reduces.
    hbm_efficiency: float = 0.61
    # Measured: NIXL's own benchmark (nixlbench, UCX backend, 16 MiB blocks) moved 341 of 400 Gbit/s, 85% of the NIC
    # line rate (ai-dynamo/nixl pull request #1647). Perplexity's TransferEngine reached the full 400 Gbit/s per GPU
    # on AWS EFA (arXiv 2510.27656): the line rate is reachable, and 0.85 is the NIXL path's share of it.
    transfer_efficiency: float = 0.85
    # Calibrated: Dynamo's disaggregated path added 37 ms to the unqueued TTFT (173 -> 210 ms); the bulk transfer at
    # the efficiency above and the decoder's first step explain all but this (router hop, hand-off, notifications).
    transfer_fixed_s: float = 0.004
    # Assumed: LMCache's layer-wise mode (use_layerwise) pipelines each layer's KV behind the prefill of the next, so
    # only the tail that cannot overlap reaches TTFT (Splitwise, ISCA'24, section 4.2). The operator's LMCache
    # configuration is not public; False adds the whole bulk transfer to TTFT.
    transfer_layerwise: bool = True
    # Documented default: LMCache moves KV in chunks of 256 tokens (chunk_size, LMCache configuration reference);
    # vLLM's NixlConnector moves vLLM blocks of 16 tokens (the Dynamo measurement).
    connector_block_tokens: int = 256
    # Calibrated: engine time the decoder spends per KV block it receives (connector bookkeeping, descriptor handling
    # and completion polling on the engine loop), fitted to Dynamo's disaggregated ITL of 16.9 ms at ISL 8000 once the
    # join step's HBM traffic is counted.
    join_s_per_block: float = 150e-6
    # Documented: LMCache lands KV in the PD buffer, then copies it into vLLM's paged cache (a read and a write per
    # byte on top of the DMA write); NixlConnector writes into the paged cache directly (0).
    pd_buffer_copies: int = 1
    # Assumed: all-reduce bus bandwidth as a fraction of unidirectional NVLink (half the bidirectional catalogue
    # figure), and the latency of one small all-reduce (vLLM custom all-reduce on NVLink). Not calibrated.
    nvlink_efficiency: float = 0.8
    allreduce_latency_s: float = 10e-6
    # Documented default: vLLM's --max-num-batched-tokens for the OpenAI server on GPUs with >= 70 GiB
    # (vllm/engine/arg_utils.py, get_batch_defaults). The chunk a colocated engine adds to one step.
    chunk_tokens: int = 8192
    # Documented defaults: vLLM --gpu-memory-utilization 0.9 (colocated); 0.75 for DPD roles (SageMaker HyperPod DPD
    # documentation, tuning table).
    colocated_memory_utilization: float = 0.9
    dpd_memory_utilization: float = 0.75
    # Assumed: HBM per GPU that is neither weights nor KV (activations, CUDA graphs, NCCL buffers).
    non_kv_overhead_bytes: float = 3 * 1024**3
    # Assumed: the prefill pool is sized to run at most this busy, so its queue stays short.
    prefill_target_utilization: float = 0.8
    # Documented: DistServe (OSDI'24) counts a rate as served within SLO when at least 90% of requests meet both the
    # TTFT and the TPOT target; the planner's recommended operating point uses the same bar.
    slo_attainment_target: float = 0.9
    notes: Mapping[str, str] = field(default_factory=lambda: _NOTES, compare=False, repr=False)

    def with_overrides(self, **values: Any) -> Calibration:
        return replace(self, **values)


_NOTES: Mapping[str, str] = MappingProxyType({
    "prefill_efficiency": "calibrated: Dynamo p5.48xlarge Llama-3.1-8B ISL 8000 unqueued TTFT 173 ms",
    "low_precision_efficiency": "calibrated: NIM Llama-3.3-70B FP8 TP2 2xH100 5000-token TTFT 406.77 ms",
    "moe_prefill_efficiency": "calibrated: llm-d peakPrefillThroughput 33,821 tok/s, gpt-oss-120b, one H200",
    "hbm_efficiency": "calibrated: NIM Llama-3.3-70B FP8 TP2 2xH100 ITL 18.91 ms at concurrency 1",
    "transfer_efficiency": "measured: nixlbench 341 of 400 Gbit/s (85% of line rate); TransferEngine line rate on EFA",
    "transfer_fixed_s": "calibrated: Dynamo unqueued TTFT 173 ms aggregated vs 210 ms disaggregated",
    "transfer_layerwise": "assumed: LMCache layer-wise pipelining (Splitwise-style overlap)",
    "connector_block_tokens": "LMCache default chunk_size 256 tokens",
    "join_s_per_block": "calibrated: Dynamo disaggregated ITL 16.9 ms at ISL 8000",
    "pd_buffer_copies": "LMCache copies the PD buffer into the paged KV cache",
    "nvlink_efficiency": "assumed",
    "allreduce_latency_s": "assumed",
    "chunk_tokens": "vLLM default max_num_batched_tokens (OpenAI server, >= 70 GiB GPUs)",
    "colocated_memory_utilization": "vLLM default --gpu-memory-utilization",
    "dpd_memory_utilization": "HyperPod DPD tuning default (SageMaker HyperPod DPD documentation, tuning table)",
    "non_kv_overhead_bytes": "assumed",
    "prefill_target_utilization": "assumed",
    "slo_attainment_target": "DistServe's goodput definition (90% of requests within both SLOs)",
})

DEFAULT_CALIBRATION = Calibration()

# The vLLM NixlConnector path Dynamo measured: 16-token blocks written straight into the paged cache, and the decoder
# pulling after the prefill finished (no layer-wise overlap).
DYNAMO_NIXL = {"connector_block_tokens": 16, "pd_buffer_copies": 0, "transfer_layerwise": False}
