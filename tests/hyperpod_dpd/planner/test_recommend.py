"""Recommendations: tensor parallelism, max_model_len, decoder room, prefill:decode estimate, PD buffer."""

from __future__ import annotations

import dataclasses

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE
from hyperpod_dpd.planner import recommend
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION as CAL
from hyperpod_dpd.planner.plan import make_plan
from hyperpod_dpd.planner.recommend import PlanError
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

GIB = 1024**3
P5 = instance("ml.p5.48xlarge")


def test_tensor_parallelism_fills_the_node_and_says_why() -> None:
    decision = recommend.tensor_parallel_size(model=MODELS["Llama-3.3-70B"], instance=P5, calibration=CAL)
    assert decision.value == 8
    assert any("fit at TP=4" in r for r in decision.reasons)


def test_replicated_kv_heads_are_explained() -> None:
    decision = recommend.tensor_parallel_size(model=MODELS["Qwen3-235B-A22B"], instance=instance("ml.p5e.48xlarge"),
                                              calibration=CAL)
    assert any("4 KV heads" in r and "replicates" in r for r in decision.reasons)


def test_a_model_larger_than_one_node_is_refused_unless_fp8_makes_it_fit() -> None:
    with pytest.raises(PlanError, match="Llama-3.1-405B-Instruct needs 812 GB of BF16 weights, more than one "
                                        "ml.p5.48xlarge holds"):
        recommend.tensor_parallel_size(model=MODELS["Llama-3.1-405B"], instance=P5, calibration=CAL)
    # GIVEN FP8 weights: 406 GB over 8 x 60 GiB
    fp8 = MODELS["Llama-3.1-405B"].with_precision(weights="fp8")
    assert recommend.tensor_parallel_size(model=fp8, instance=P5, calibration=CAL).value == 8


def test_heads_the_node_cannot_split_are_named_not_blamed_on_memory() -> None:
    # GIVEN a 7B model with 28 attention heads (TP 1, 2 or 4 divide them; 8 does not) that fits one GPU
    odd = dataclasses.replace(MODELS["Llama-3.1-8B"], key="Odd-7B", attention_heads=28, kv_heads=4)
    # WHEN the planner picks the whole node's tensor parallelism
    with pytest.raises(PlanError) as caught:
        recommend.tensor_parallel_size(model=odd, instance=P5, calibration=CAL)
    # THEN the refusal names the heads and the per-role flags with the sizes that work, not the weights' size
    text = str(caught.value)
    assert "28 attention heads" in text and "8 GPUs of ml.p5.48xlarge cannot split evenly" in text
    assert "--prefill-tp and --decode-tp (possible: 1, 2, 4)" in text and "weights" not in text
    # AND planning with those flags works
    workload = Workload(inputs=LengthDistribution.fixed(4096), outputs=LengthDistribution.fixed(256),
                        concurrency=(8,))
    plan = make_plan(model=odd, instance=P5, workload=workload, prefill_tp=4, decode_tp=4)
    assert plan.recommendation.tensor_parallel_size == 4
    # AND the colocated baseline only weighs tensor parallelisms vLLM can start (never TP8 over 28 heads)
    assert plan.layout.colocated_tp in (1, 2, 4)
    assert plan.layout.colocated_replicas == plan.layout.baseline_nodes * 8 // plan.layout.colocated_tp


def test_the_decoder_must_hold_the_longest_request_next_to_weights_and_buffer() -> None:
    # GIVEN 405B on p5e: 94.5 GiB of weights per GPU leave ~4,200 tokens of KV at 0.75 utilization with 8 GiB buffer
    with pytest.raises(PlanError, match="KV room for 4,2[0-9]{2} tokens"):
        recommend.require_decoder_room(model=MODELS["Llama-3.1-405B"], instance=instance("ml.p5e.48xlarge"),
                                       tensor_parallel=8, peak_tokens=8704, calibration=CAL)
    recommend.require_decoder_room(model=MODELS["Llama-3.1-405B"], instance=instance("ml.p5e.48xlarge"),
                                   tensor_parallel=8, peak_tokens=2048, calibration=CAL)


def test_max_model_len_is_used_as_given_or_recommended_as_a_power_of_two() -> None:
    model = MODELS["Llama-3.3-70B"]
    # WHEN the deployed value is given THEN it is used as is
    given = recommend.max_model_len(model=model, peak_tokens=8704, given=10_000)
    assert given.value == 10_000 and "as deployed" in given.reasons[0]
    # WHEN it is not THEN the longest request rounded up to a power of two is recommended
    assert recommend.max_model_len(model=model, peak_tokens=8704).value == 16384
    assert recommend.max_model_len(model=MODELS["Qwen2.5-72B"], peak_tokens=20000).value == 32768
    with pytest.raises(PlanError, match="shorter than the longest request"):
        recommend.max_model_len(model=model, peak_tokens=8704, given=8192)
    with pytest.raises(PlanError, match="exceeds Qwen2.5-72B-Instruct's context of 32,768 tokens"):
        recommend.max_model_len(model=MODELS["Qwen2.5-72B"], peak_tokens=33024)


def test_prefill_estimate_keeps_up_with_the_decoder_at_the_target_utilization() -> None:
    # GIVEN one decoder that sustains 4 req/s, all disaggregated, at 316 ms of prefill each: 1.264 nodes busy
    decision = recommend.prefill_replicas(decode_limited_rate=4.0, remote_share=1.0, mean_service_s=0.316,
                                          calibration=CAL)
    # THEN 1.264 / 0.8 = 1.58 rounds up to 2
    assert decision.value == 2
    assert recommend.prefill_replicas(decode_limited_rate=4.0, remote_share=0.0, mean_service_s=0.0,
                                      calibration=CAL).value == 1


def test_pd_buffer_matches_the_operator_docs_arithmetic() -> None:
    # GIVEN the platform doc: 70B at TP=8, 40 KiB per token per rank, 6,000-token prompts: 8 GiB holds ~35
    assert 8 * GIB // (6000 * 40960) == 34
    # WHEN 35 such transfers must fit (35 x 6000 x 40960 x 1.1 = 8.81 GiB)
    decision = recommend.pd_buffer_size(in_flight=35, prompt_tokens=6000, bytes_per_token_per_rank=40960,
                                        decoder_free_bytes=40 * GIB)
    # THEN the next power of two, 16 GiB, is recommended (the doc's suggested next step)
    assert decision.value == 16 * GIB == 17179869184


def test_pd_buffer_never_goes_below_the_default() -> None:
    decision = recommend.pd_buffer_size(in_flight=2, prompt_tokens=512, bytes_per_token_per_rank=16384,
                                        decoder_free_bytes=40 * GIB)
    assert decision.value == DEFAULT_PD_BUFFER_SIZE and "default 8 GiB is enough" in decision.reasons[-1]
    assert recommend.pd_buffer_size(in_flight=0, prompt_tokens=512, bytes_per_token_per_rank=16384,
                                    decoder_free_bytes=40 * GIB).value == DEFAULT_PD_BUFFER_SIZE


def test_pd_buffer_is_capped_to_leave_the_decoder_kv_room() -> None:
    # GIVEN 64 transfers of 32k tokens (80 GiB) and 40 GiB free per GPU
    decision = recommend.pd_buffer_size(in_flight=64, prompt_tokens=32768, bytes_per_token_per_rank=40960,
                                        decoder_free_bytes=40 * GIB)
    # THEN the buffer stops at 16 GiB (a power of two within half the free HBM), holding 12 such transfers
    assert decision.value == 16 * GIB
    assert "holds 12 such transfers" in decision.reasons[-1]
