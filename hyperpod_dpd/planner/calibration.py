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
    prefill_efficiency: float = 0.776
    # Calibrated: NVIDIA NIM 1.8.0 benchmark, Llama-3.3-70B FP8 TP2 on 2 x H100, 5,000 input tokens, concurrency 1:
    # TTFT 406.77 ms (docs.nvidia.com/nim/benchmarking/llm, "Performance"), the prompt with its chat template prefilled
    # in NIM's 2,048-token steps (``NIM_TRTLLM``). Fraction of the FP8 (or FP4) dense peak the GEMMs reach; attention
    # stays at the BF16 rate.
    low_precision_efficiency: float = 0.567
    # Calibrated: llm-d's peakPrefillThroughput of 33,821 tok/s for gpt-oss-120b (5.1B active) on one H200 per TP1
    # pod (llm-d guides, llm-d/llm-d) = 0.35 of dense BF16 peak. Grouped expert GEMMs run well below dense ones.
    moe_prefill_efficiency: float = 0.35
    # Calibrated: the same NIM benchmark, 500 input / 2,000 output tokens at concurrency 1: ITL 18.91 ms, i.e. the
    # weights (35 GB per H100) and KV read at this share of 3.35 TB/s, plus the TP all-reduces.
    hbm_efficiency: float = 0.603
    # Measured: NIXL's own benchmark (nixlbench, UCX backend, 16 MiB blocks) moved 341 of 400 Gbit/s, 85% of the NIC
    # line rate (ai-dynamo/nixl pull request #1647). Perplexity's TransferEngine reached the full 400 Gbit/s per GPU
    # on AWS EFA (arXiv 2510.27656): the line rate is reachable, and 0.85 is the NIXL path's share of it.
    transfer_efficiency: float = 0.85
    # Calibrated: the share of the shorter of a step's HBM time and compute time that does not hide under the longer
    # (kernels do not overlap them perfectly). Fitted on TensorRT-LLM's offline Llama-3.1-8B FP8 ISL 128 / OSL 2048
    # on one H200: 26,221 output tok/s (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @00f37686), the
    # table's largest decode batch, where both matter. hyperpod_dpd/planner/fit.py refits every calibrated constant.
    overlap_loss: float = 0.704
    # Assumed 0: a fixed per-step cost outside the kernels (scheduling, sampling, launch). Fitted on vLLM's nightly
    # H200 latency test (Llama-3 8B TP1, 8 x 32 / 128: 834 ms, buildkite.com/vllm/performance-benchmark build 9513) it
    # comes out at 1.2 ms, and then the held-out H100 run of the same test goes from +3% to +12% and the H200
    # TensorRT-LLM throughput P90 from 26% to 37%: the step overhead of one engine on one GPU does not carry, so it
    # stays 0 and inside hbm_efficiency (docs/planner.md, "Calibration").
    step_overhead_s: float = 0.0
    # Assumed 0 for vLLM V1: a per-request latency outside the engine's steps (HTTP, tokenization, the hops between
    # the API server, the scheduler and the detokenizer), added to TTFT and end-to-end latency but to no step.
    # Dynamo's unqueued 173 ms at 8,000 tokens on one H100 is already 80% of the dense BF16 peak, so vLLM V1 at TP1
    # leaves no room for one. Engines with one: SGLang (``SGLANG``, fitted) and vLLM V0 at TP4 (nightly serving
    # tests of 2024: median TTFT at 1 request/s alike on H100 and H200, docs/planner.md).
    request_overhead_s: float = 0.0
    # Calibrated (a lower bound): RDMA writes each EFA interface completes per second on the NIXL path, whatever
    # their size; small messages are bound by it, large ones by bandwidth. Dynamo's 210 ms disaggregated TTFT
    # (ai-dynamo/dynamo docs/kubernetes/disagg-communication-guide.md) moved 1.05 GB of Llama-3.1-8B KV in 16-token
    # blocks (64 KiB per block and layer) over one H100's 4 interfaces with the 4 ms hand-off below; that holds only
    # if those blocks reach the 42.5 GB/s bandwidth bound: 42.5e9 / 65,536 / 4 = 162,100 per interface. The true
    # rate may be higher (no public NIXL size sweep on EFA); the bound never moves small blocks faster than
    # measured. Mooncake's own EFA transport reaches only 92,600 (``MOONCAKE_EFA``).
    efa_messages_per_s_per_interface: float = 162_100.0
    # Calibrated: Dynamo's disaggregated path added 37 ms to the unqueued TTFT (173 -> 210 ms); the bulk transfer at
    # the efficiency above and the decoder's first step explain all but this (router hop, hand-off, notifications).
    transfer_fixed_s: float = 0.00475
    # Documented (code): LMCache's PD path is not layer-wise. Its layer-wise storer is built without the request's
    # disagg spec ("TODO (Jiayi): need to make layerwise storing compatible with disagg spec", LMCache/LMCache
    # lmcache/integration/vllm/vllm_v1_adapter.py @0043281d, save_kv_layer); the PD send runs in wait_for_save, after
    # the step's forward, as lmcache_engine.store(..., transfer_spec=disagg_spec). So the whole bulk transfer follows
    # the prefill. True pipelines each layer's KV behind the next layer's prefill (Splitwise, ISCA'24, section 4.2).
    transfer_layerwise: bool = False
    # Documented (code): the PD send holds the prefiller's engine. vLLM calls the connector's wait_for_save at the
    # end of every step's forward, before the step returns (vllm-project/vllm
    # vllm/v1/worker/kv_connector_model_runner_mixin.py @00f4240e, _get_kv_connector_output), and LMCache's sender
    # does its remote allocation (ZMQ request/reply), the NIXL write and the proxy notification synchronously there
    # (LMCache/LMCache lmcache/v1/storage_backend/pd_backend.py @07e07869, PDBackend.batched_submit_put_task: "TODO
    # make this async"). So the copy into the sender's PD buffer and the bulk transfer add to the prefiller's service
    # time, and the next prompt waits for them. vLLM's NixlConnector does nothing in wait_for_save (the decoder pulls
    # the blocks; vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py, wait_for_save): False there.
    transfer_holds_prefiller: bool = True
    # Documented default: LMCache moves KV in chunks of 256 tokens (chunk_size, LMCache configuration reference);
    # vLLM's NixlConnector moves vLLM blocks of 16 tokens (the Dynamo measurement).
    connector_block_tokens: int = 256
    # Calibrated: engine time the decoder spends per KV block it receives (connector bookkeeping, descriptor handling
    # and completion polling on the engine loop), fitted to Dynamo's disaggregated ITL of 16.9 ms at ISL 8000 once the
    # join step's HBM traffic is counted.
    join_s_per_block: float = 160e-6
    # Documented: LMCache lands KV in the PD buffer, then copies it into vLLM's paged cache (a read and a write per
    # byte on top of the DMA write); NixlConnector writes into the paged cache directly (0).
    pd_buffer_copies: int = 1
    # Assumed: all-reduce bus bandwidth as a fraction of unidirectional NVLink (half the bidirectional catalogue
    # figure), and the latency of one small all-reduce (vLLM custom all-reduce on NVLink). Checked, not fitted: vLLM's
    # nightly latency tests of Llama-3 70B TP4 against 8B TP1 (builds 9555 on H100, 9513 on H200) are off by the same
    # share (+1% vs +3%, -13% vs -13%), so these add what TP costs. Fitting the latency on the H100 TP4 row instead
    # slides it to 0 against the NIM TP2 ITL that fixes hbm_efficiency (the two engines disagree), so it stays assumed.
    nvlink_efficiency: float = 0.8
    allreduce_latency_s: float = 10e-6
    # Documented default: vLLM's --max-num-batched-tokens for the OpenAI server on GPUs with >= 70 GiB
    # (vllm/engine/arg_utils.py, get_batch_defaults). The chunk a colocated engine adds to one step. Dynamo's vLLM
    # worker builds its engine under that usage context (ai-dynamo/dynamo components/src/dynamo/vllm/main.py
    # @000a36a7, setup_vllm_engine: create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)), so its H100
    # workers chunk at 8192 unless given --max-num-batched-tokens.
    chunk_tokens: int = 8192
    # Documented default: vLLM's --max-num-seqs for the OpenAI server on GPUs with >= 70 GiB that are not A100s
    # (vllm-project/vllm vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: 1024; 256 on smaller GPUs). The
    # scheduler runs at most this many requests at once; the rest wait for a slot.
    max_num_seqs: int = 1024
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
    "overlap_loss": "calibrated: TensorRT-LLM offline Llama-3.1-8B FP8 ISL 128 / OSL 2048 on H200, 26,221 tok/s",
    "step_overhead_s": "assumed: 0; a fit on vLLM's H200 latency test (1.2 ms) worsens the held-out H100 rows",
    "request_overhead_s": "assumed: 0 for vLLM V1 (Dynamo's unqueued 8k TTFT leaves no room for one)",
    "efa_messages_per_s_per_interface": "calibrated lower bound: Dynamo ISL 8000 disaggregated TTFT 210 ms, 64 KiB blocks",
    "transfer_fixed_s": "calibrated: Dynamo unqueued TTFT 173 ms aggregated vs 210 ms disaggregated",
    "transfer_layerwise": "documented (code): LMCache's PD send is not layer-wise (it runs in wait_for_save)",
    "transfer_holds_prefiller": "documented (code): LMCache's PD send is synchronous in the prefiller's step",
    "connector_block_tokens": "LMCache default chunk_size 256 tokens",
    "join_s_per_block": "calibrated: Dynamo disaggregated ITL 16.9 ms at ISL 8000",
    "pd_buffer_copies": "LMCache copies the PD buffer into the paged KV cache",
    "nvlink_efficiency": "assumed",
    "allreduce_latency_s": "assumed; vLLM's TP4 vs TP1 latency tests (H100, H200) agree within 2 points",
    "chunk_tokens": "vLLM default max_num_batched_tokens (OpenAI server, >= 70 GiB GPUs)",
    "max_num_seqs": "vLLM default max_num_seqs (OpenAI server, >= 70 GiB GPUs)",
    "colocated_memory_utilization": "vLLM default --gpu-memory-utilization",
    "dpd_memory_utilization": "HyperPod DPD tuning default (SageMaker HyperPod DPD documentation, tuning table)",
    "non_kv_overhead_bytes": "assumed",
    "prefill_target_utilization": "assumed",
    "slo_attainment_target": "DistServe's goodput definition (90% of requests within both SLOs)",
})

DEFAULT_CALIBRATION = Calibration()

# The vLLM NixlConnector path Dynamo measured: 16-token blocks written straight into the paged cache, and the decoder
# pulling after the prefill finished (no layer-wise overlap) while the prefiller moves on to its next step.
DYNAMO_NIXL = {"connector_block_tokens": 16, "pd_buffer_copies": 0, "transfer_layerwise": False,
               "transfer_holds_prefiller": False}

# Mooncake's EFA transport (kvcache-ai/Mooncake docs/source/design/transfer-engine/transport/efa_transport.md
# @2f45fbe2, p5en.48xlarge GPU to GPU, threads 16, batch 128, "block_size sweep"): 64 KiB blocks moved 97.11 GB/s
# over 16 interfaces (97.11e9 / 65,536 / 16 = 92,600 messages per second each; calibration) and 2 MiB blocks
# 366.87 of 400 GB/s (0.917 of line rate; calibration). The 128 KiB to 1 MiB rows and p5 are held out.
MOONCAKE_EFA = {"efa_messages_per_s_per_interface": 97.11e9 / 65_536 / 16, "transfer_efficiency": 366.87 / 400}

# SGLang's open-loop H200 runs (``published.ONLINE``, datacrunch-research/h200-benchmarks @c091ef53): its median TTFT
# carries a per-request cost the engine's steps do not, 35.4 ms, fitted on Llama-3.3-70B TP4 at 1 request/s (85.7 ms
# measured, 50.2 ms of steps and waiting; calibration). Its 2 and 4 requests/s runs and Llama-3.1-405B TP8 at 1 and
# 2 requests/s are held out. SGLang's request path crosses three processes (tokenizer manager, scheduler,
# detokenizer, over ZMQ) and, at these TPs, each TP rank's scheduler.
SGLANG = {"request_overhead_s": 0.0354}

# NIM's TensorRT-LLM engine (``published.NIM``): its per-step token budget (max_num_tokens) is not published. Fitted
# among powers of two on the 200 in / 200 out row at concurrency 25 with the users stepped in lock-step (``lockstep``):
# 1,024 / 2,048 / 4,096 / 8,192 give TTFT -40% / +6% / +73% / +198% (calibration). Every other NIM row is held out.
NIM_TRTLLM = {"chunk_tokens": 2048}
