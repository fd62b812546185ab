"""Roofline and transfer formulas against values worked out by hand from the catalogue figures."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION as CAL
from hyperpod_dpd.planner.calibration import MOONCAKE_EFA
from hyperpod_dpd.planner.formulas import (
    allreduce_seconds,
    cached_tokens,
    chunks,
    efa_bytes_per_s,
    exposed_transfer_seconds,
    free_bytes_per_gpu,
    join_seconds,
    kv_capacity_tokens,
    kv_message_bytes,
    kv_transfer_seconds,
    next_power_of_two,
    prefill_flops,
    prefill_seconds,
    rank_line_rate,
    rdma_rank_bytes_per_s,
    step_costs,
    step_seconds,
    valid_tensor_parallel_sizes,
)
from tests.examples import examples

LLAMA_70B = MODELS["Llama-3.3-70B"]
P5 = instance("ml.p5.48xlarge")
H100_FLOPS = 989.4e12
H100_HBM = 3350e9
GIB = 1024**3
HBM = H100_HBM * CAL.hbm_efficiency  # the calibrated share of the datasheet bandwidth
LOSS = CAL.overlap_loss  # the share of the shorter of HBM time and compute that does not overlap the longer


TABLE = 128_256 * 8192  # Llama-3.3-70B's vocabulary x hidden: the input embedding, and the LM head beside it
BODY = 70_553_706_496 - 2 * TABLE  # what every token multiplies through (untied embedding and head left out)
STREAMED = 70_553_706_496 - TABLE  # what a decode step reads: all but the input embedding, a row lookup


def _linear_s(tokens: float, tp: int = 8, efficiency: float = CAL.prefill_efficiency, sampled: float = -1) -> float:
    """The matmuls of ``tokens`` decode tokens (each sampled: one LM head each) or of ``sampled`` of them."""
    heads = tokens if sampled < 0 else sampled
    return (tokens * 2 * BODY + heads * 2 * TABLE) / (tp * H100_FLOPS * efficiency)


def test_prefill_flops_are_matmuls_plus_causal_attention() -> None:
    # GIVEN 8,192 prompt tokens of Llama-3.3-70B (80 layers, 64 heads x 128 = 8,192 attention width)
    # THEN 2 x the layers' 68.45 B parameters per token (70,553,706,496 less the 128,256 x 8,192 embedding and LM
    # head), the LM head once (only the sampled position gets logits), plus 4 x 80 x 8192 x 8192 x (0 + 8192 / 2)
    # for attention
    expected = 2 * BODY * 8192 + 2 * TABLE + 4 * 80 * 8192 * 8192 * 4096
    assert prefill_flops(LLAMA_70B, 8192) == pytest.approx(expected)
    # AND a chunk after 4,096 cached tokens attends over them as well
    assert prefill_flops(LLAMA_70B, 1024, context=4096) == pytest.approx(
        2 * BODY * 1024 + 2 * TABLE + 4 * 80 * 8192 * 1024 * (4096 + 512))


def test_the_embedding_is_a_lookup_and_the_lm_head_runs_for_sampled_tokens_only() -> None:
    # GIVEN Llama-3.3-70B (untied: embedding and LM head are two 128,256 x 8,192 matrices)
    # THEN a token multiplies through neither, the head is one table, and a decode step streams all but the embedding
    assert LLAMA_70B.head_parameters == TABLE
    assert LLAMA_70B.body_parameters == BODY
    assert LLAMA_70B.streamed_weight_bytes == STREAMED * 2
    # AND a model whose head is its embedding (tie_word_embeddings) streams the shared table and subtracts it once
    tied = dataclasses.replace(LLAMA_70B, tied_embeddings=True, parameters=70_553_706_496 - TABLE,
                               active_parameters=70_553_706_496 - TABLE)
    assert tied.body_parameters == BODY
    assert tied.streamed_weight_bytes == tied.weight_bytes
    # AND the share left out is what makes a small model's prefill cheaper than 2 x parameters: 13% for 8B, 3% for 70B
    llama_8b = MODELS["Llama-3.1-8B"]
    assert 1 - llama_8b.body_parameters / llama_8b.active_parameters == pytest.approx(0.131, abs=0.001)
    assert 1 - BODY / 70_553_706_496 == pytest.approx(0.030, abs=0.001)


def test_allreduce_is_free_without_tensor_parallelism_and_a_ring_with_it() -> None:
    assert allreduce_seconds(nbytes=1e6, tensor_parallel=1, nvlink_gbps=900, calibration=CAL) == 0.0
    # GIVEN 1 MB over 8 H100s: 2 x 7/8 of it per GPU at 450 GB/s x 0.8, plus 10 us of latency
    expected = 10e-6 + 1e6 * 1.75 / (450e9 * 0.8)
    assert allreduce_seconds(nbytes=1e6, tensor_parallel=8, nvlink_gbps=900, calibration=CAL) == pytest.approx(
        expected)


def test_decode_step_of_one_token_is_the_weight_read_plus_allreduce_latency() -> None:
    # GIVEN Llama-3.3-70B at TP=8 on p5 decoding one token with no cached context
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    # THEN the step reads 1/8 of the BF16 weights but the input embedding at the calibrated share of 3.35 TB/s, the
    # token's matmuls (LM head included) add the part that does not overlap, then 160 all-reduces of one token run
    weights = STREAMED * 2 / 8 / HBM
    allreduces = 160 * (10e-6 + 8192 * 2 * 1.75 / (450e9 * 0.8))
    assert step_seconds(costs, batch=1, context=0) == pytest.approx(weights + LOSS * _linear_s(1) + allreduces)
    # AND the hand-worked figures are the catalogue's: 70.55 B parameters, 3.35 TB/s per H100 (the efficiency is
    # the calibration's own, refitted by fit.py)
    assert weights == pytest.approx((LLAMA_70B.parameters - TABLE) * 2 / 8 / (P5.gpu.hbm_bandwidth_gbps * 1e9
                                                                              * CAL.hbm_efficiency), rel=1e-9)


def test_decode_step_reads_every_cached_token_once() -> None:
    # GIVEN 16 requests with 8,448 cached tokens each (memory-bound on H100)
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    context = 16 * 8448
    step = step_seconds(costs, batch=16, context=context)
    # THEN the KV part is 40,960 bytes per token per GPU at the calibrated bandwidth
    kv = context * 40960 / HBM
    weights = STREAMED * 2 / 8 / HBM
    allreduces = 160 * (10e-6 + 16 * 8192 * 2 * 1.75 / (450e9 * 0.8))
    compute = _linear_s(16) + context * costs.attention_s_per_pair
    assert step == pytest.approx(weights + kv + LOSS * compute + allreduces)


def test_a_full_prefill_chunk_is_compute_bound() -> None:
    # GIVEN an 8,192-token chunk on an idle 70B replica
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    # THEN its time is its FLOPs at the calibrated share of 8 x 989.4 TFLOP/s, the weight read's part that does not
    # overlap, plus 160 all-reduces of 8,192 tokens
    compute = prefill_flops(LLAMA_70B, 8192) / (8 * H100_FLOPS * CAL.prefill_efficiency)
    weights = STREAMED * 2 / 8 / HBM
    allreduces = 160 * (10e-6 + 8192 * 8192 * 2 * 1.75 / (450e9 * 0.8))
    assert compute > weights
    assert prefill_seconds(costs, tokens=8192, chunk_tokens=8192) == pytest.approx(
        compute + LOSS * weights + allreduces)


def test_fp8_weights_halve_the_weight_read_and_run_the_gemms_at_the_fp8_rate() -> None:
    # GIVEN Llama-3.3-70B with FP8 weights at TP=8 on p5 (H100: FP8 dense = 2 x BF16)
    fp8 = LLAMA_70B.with_precision(weights="fp8")
    bf16_costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    fp8_costs = step_costs(model=fp8, instance=P5, tensor_parallel=8, calibration=CAL)
    # THEN the decode step reads half the bytes, and a token's matmuls run at 2 x 989.4 TFLOP/s x the calibrated
    # low-precision efficiency per GPU
    assert fp8_costs.dense_weights_s == pytest.approx(bf16_costs.dense_weights_s / 2)
    assert fp8_costs.linear_s_per_token == pytest.approx(2 * BODY / (8 * 2 * H100_FLOPS * CAL.low_precision_efficiency))
    assert fp8_costs.head_s_per_token == pytest.approx(2 * TABLE / (8 * 2 * H100_FLOPS * CAL.low_precision_efficiency))
    assert fp8_costs.attention_s_per_pair == bf16_costs.attention_s_per_pair


def test_a_prefix_hit_skips_the_cached_tokens_but_attends_over_them() -> None:
    # GIVEN a 8,192-token prompt whose first half is in the prefix cache
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    assert cached_tokens(8192, 0.5) == 4096 and cached_tokens(8192, 0.0) == 0 and cached_tokens(10, 0.99) == 9
    # THEN only 4,096 tokens are computed, after 4,096 cached ones
    assert chunks(8192, 8192, 4096) == ((4096, 4096),)
    half = prefill_seconds(costs, tokens=8192, chunk_tokens=8192, cached=4096)
    assert half == pytest.approx(step_seconds(costs, batch=0, context=0, chunk=4096, chunk_context=4096))
    assert 0.4 < half / prefill_seconds(costs, tokens=8192, chunk_tokens=8192) < 0.6


def test_chunks_cover_the_prompt_with_their_offsets() -> None:
    assert chunks(10_000, 4096) == ((4096, 0), (4096, 4096), (1808, 8192))
    assert chunks(512, 8192) == ((512, 0),)


def test_moe_decode_reads_only_the_experts_its_tokens_touch() -> None:
    # GIVEN Mixtral-8x22B (top-2 of 8 experts) at TP=8
    mixtral = MODELS["Mixtral-8x22B"]
    costs = step_costs(model=mixtral, instance=P5, tensor_parallel=8, calibration=CAL)
    # THEN one token reads the shared weights plus 1 - (6/8)^1 = 25% of the experts; many tokens read them all
    shared = (mixtral.streamed_weight_bytes - mixtral.expert_parameters * 2) / 8 / HBM
    experts = mixtral.expert_parameters * 2 / 8 / HBM
    assert costs.dense_weights_s == pytest.approx(shared)
    assert costs.expert_weights_s == pytest.approx(experts)
    assert costs.expert_miss == pytest.approx(0.75)
    one = step_seconds(costs, batch=1, context=0) - costs.comm_fixed_s - costs.comm_s_per_token
    assert one == pytest.approx(shared + 0.25 * experts + LOSS * (costs.linear_s_per_token + costs.head_s_per_token))


def test_each_rank_drives_its_own_gpus_share_of_the_efa_interfaces() -> None:
    # GIVEN p5.48xlarge: 32 x 100 Gbit/s over 8 GPUs, i.e. 4 interfaces = 50 GB/s behind each GPU
    assert rank_line_rate(P5) == pytest.approx(50e9)
    # THEN one TP=8 replica moves KV at 8 x 50 GB/s x 0.85 (NIXL's measured share of line rate)
    assert efa_bytes_per_s(instance=P5, tensor_parallel=8, calibration=CAL) == pytest.approx(340e9)
    assert efa_bytes_per_s(instance=P5, tensor_parallel=1, calibration=CAL) == pytest.approx(42.5e9)


def test_8000_tokens_of_llama_70b_cross_p5_in_a_few_milliseconds() -> None:
    # GIVEN 8,000 tokens x 327,680 bytes = 2.62 GB, i.e. 40,960 bytes per token on each of 8 ranks
    seconds = kv_transfer_seconds(model=LLAMA_70B, instance=P5, tensor_parallel=8, tokens=8000, calibration=CAL)
    # THEN it takes 8000 x 40,960 / (50 GB/s x 0.85) = 7.7 ms: above the 6.55 ms line rate, well under 10 ms
    assert seconds == pytest.approx(8000 * 40960 / 42.5e9)
    assert 8000 * 327_680 / 400e9 <= seconds < 0.010
    assert seconds * 1e3 == pytest.approx(7.71, abs=0.01)


@pytest.mark.parametrize("name", sorted(DPD_INSTANCE_TYPES))
def test_no_transfer_beats_the_line_rate(name: str) -> None:
    # GIVEN every DPD instance type and every model at every TP size
    node = DPD_INSTANCE_TYPES[name]
    for spec in MODELS.values():
        for tp in (1, 2, 4, 8):
            seconds = kv_transfer_seconds(model=spec, instance=node, tensor_parallel=tp, tokens=8000,
                                          calibration=CAL)
            # THEN a rank's slice never moves faster than its GPU's interfaces, nor the prompt faster than the node's
            assert seconds >= 8000 * spec.kv_bytes_per_token_per_rank(tp) / rank_line_rate(node)
            assert seconds >= 8000 * spec.kv_bytes_per_token / (node.efa_bandwidth_gbps * 1e9 / 8) * (1 - 1e-12)


def test_fp8_kv_halves_the_bytes_and_the_transfer() -> None:
    fp8 = LLAMA_70B.with_precision(kv="fp8")
    assert fp8.kv_bytes_per_token == LLAMA_70B.kv_bytes_per_token // 2 == 163_840
    # THEN the transfer halves as well: its 64 KiB messages (256 tokens x 20,480 B / 80 layers) still reach the
    # bandwidth bound on p5's 4 interfaces per GPU (65,536 x 162,100 x 4 = 42.5 GB/s)
    assert kv_message_bytes(model=fp8, tensor_parallel=8, calibration=CAL) == 65_536
    assert kv_transfer_seconds(model=fp8, instance=P5, tensor_parallel=8, tokens=8000, calibration=CAL) == (
        pytest.approx(kv_transfer_seconds(model=LLAMA_70B, instance=P5, tensor_parallel=8, tokens=8000,
                                          calibration=CAL) / 2, rel=1e-3))
    # AND NVFP4 stores 4.5 bits per element
    assert LLAMA_70B.with_precision(kv="fp4").kv_bytes_per_token == 92_160


def test_small_rdma_messages_are_bound_by_the_interfaces_message_rate() -> None:
    # GIVEN Mooncake's EFA transport constants (p5en: 16 interfaces, 2 per GPU)
    p5en = instance("ml.p5en.48xlarge")
    mooncake = CAL.with_overrides(**MOONCAKE_EFA)

    def node_gbytes(block: int) -> float:
        return rdma_rank_bytes_per_s(instance=p5en, message_bytes=block, calibration=mooncake) * 8 / 1e9

    # THEN 64 KiB blocks move the measured 97.11 GB/s per node, 2 MiB blocks the measured 366.87 GB/s, and the
    # rate never falls as blocks grow nor passes the line rate
    assert node_gbytes(65_536) == pytest.approx(97.11, rel=1e-6)
    assert node_gbytes(2 << 20) == pytest.approx(366.87, rel=1e-6)
    sizes = [1 << k for k in range(12, 25)]
    rates = [node_gbytes(size) for size in sizes]
    assert rates == sorted(rates) and max(rates) <= 400.0
    # AND vLLM-sized 16-token blocks of a TP8 70B (8 KiB per layer and rank, 5.3 GB/s at 162,100 messages per
    # second on 4 interfaces) move 8 x slower than LMCache's 256-token chunks (128 KiB, at the 42.5 GB/s bound)
    small = kv_transfer_seconds(model=LLAMA_70B, instance=P5, tensor_parallel=8, tokens=8000,
                                calibration=CAL.with_overrides(connector_block_tokens=16))
    assert small == pytest.approx(kv_transfer_seconds(model=LLAMA_70B, instance=P5, tensor_parallel=8, tokens=8000,
                                                      calibration=CAL) * 42.5e9 / (8192 * 162_100 * 4),
                                 rel=1e-3)


def test_a_layer_wise_transfer_exposes_only_its_tail() -> None:
    # GIVEN 80 layers, a 300 ms prefill and an 8 ms bulk transfer
    # THEN only the last layer's slice (0.1 ms) reaches TTFT, and all of it without layer-wise pipelining
    assert exposed_transfer_seconds(bulk_s=0.008, prefill_s=0.3, layers=80, layerwise=True) == pytest.approx(1e-4)
    assert exposed_transfer_seconds(bulk_s=0.008, prefill_s=0.3, layers=80, layerwise=False) == 0.008
    # AND a transfer slower than the prefill exposes what the prefill could not hide
    assert exposed_transfer_seconds(bulk_s=1.0, prefill_s=0.4, layers=80, layerwise=True) == pytest.approx(
        1.0 - 0.4 * 79 / 80)


def test_a_join_costs_the_decoder_hbm_traffic_and_connector_work() -> None:
    # GIVEN 8,192 tokens landing on a TP=8 p5 decoder through LMCache (one PD-buffer copy, 256-token chunks)
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    join = join_seconds(costs, tokens=8192, calibration=CAL)
    # THEN it writes, reads and writes each byte once (3 x 8192 x 40,960 B at the calibrated HBM bandwidth) plus
    # the connector's work for 32 chunks
    hbm = 3 * 8192 * 40960 / HBM
    assert join == pytest.approx(hbm + 32 * CAL.join_s_per_block)
    assert join < 0.01


@settings(max_examples=examples(60), deadline=None)
@given(low=st.integers(min_value=100, max_value=12_800), extra=st.integers(min_value=0, max_value=12_800),
       tokens=st.integers(min_value=1, max_value=131_072), key=st.sampled_from(sorted(MODELS)),
       tp=st.sampled_from([1, 2, 4, 8]))
def test_more_efa_bandwidth_never_raises_transfer_time(low: int, extra: int, tokens: int, key: str, tp: int) -> None:
    # GIVEN the same p5 node with a slower and a faster network
    slow = dataclasses.replace(P5, network_gbps=low)
    fast = dataclasses.replace(P5, network_gbps=low + extra)
    spec = MODELS[key]
    # THEN the faster one never moves the same KV more slowly
    assert kv_transfer_seconds(model=spec, instance=fast, tensor_parallel=tp, tokens=tokens, calibration=CAL) <= (
        kv_transfer_seconds(model=spec, instance=slow, tensor_parallel=tp, tokens=tokens, calibration=CAL))


@settings(max_examples=examples(60), deadline=None)
@given(batch=st.integers(min_value=1, max_value=256), more=st.integers(min_value=0, max_value=64),
       context=st.integers(min_value=0, max_value=32_768), key=st.sampled_from(sorted(MODELS)),
       name=st.sampled_from(sorted(DPD_INSTANCE_TYPES)))
def test_a_bigger_batch_never_makes_a_step_shorter(batch: int, more: int, context: int, key: str,
                                                   name: str) -> None:
    costs = step_costs(model=MODELS[key], instance=DPD_INSTANCE_TYPES[name], tensor_parallel=8, calibration=CAL)
    assert step_seconds(costs, batch=batch + more, context=(batch + more) * context) >= (
        step_seconds(costs, batch=batch, context=batch * context))


def test_kv_capacity_is_what_the_weights_overhead_and_buffer_leave() -> None:
    # GIVEN a DPD decoder on p5 at 0.75 memory utilization with an 8 GiB PD buffer
    free = free_bytes_per_gpu(model=LLAMA_70B, instance=P5, tensor_parallel=8, utilization=0.75, calibration=CAL,
                              reserved_bytes=8 * GIB)
    # THEN each GPU keeps 60 GiB - 1/8 of the weights - 3 GiB overhead - 8 GiB for KV
    expected = 80 * GIB * 0.75 - 70_553_706_496 * 2 / 8 - 3 * GIB - 8 * GIB
    assert free == pytest.approx(expected)
    tokens = kv_capacity_tokens(model=LLAMA_70B, instance=P5, tensor_parallel=8, utilization=0.75,
                                calibration=CAL, reserved_bytes=8 * GIB)
    assert tokens == pytest.approx(expected / 40960)


def test_kv_capacity_is_zero_when_the_weights_do_not_fit() -> None:
    assert kv_capacity_tokens(model=MODELS["Llama-3.1-405B"], instance=P5, tensor_parallel=8, utilization=0.9,
                              calibration=CAL) == 0.0


def test_tensor_parallel_sizes_divide_the_heads_up_to_the_node() -> None:
    assert valid_tensor_parallel_sizes(MODELS["Mixtral-8x22B"], P5) == (1, 2, 4, 8)
    assert valid_tensor_parallel_sizes(LLAMA_70B, P5) == (1, 2, 4, 8)


@pytest.mark.parametrize(("value", "expected"), [(1, 1), (8704, 16384), (16384, 16384), (16385, 32768)])
def test_next_power_of_two(value: int, expected: int) -> None:
    assert next_power_of_two(value) == expected
