"""Recommendations: tensor parallelism, prefill:decode ratio, routing threshold, PD buffer, verdict rules."""

from __future__ import annotations

import math

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE, DEFAULT_ROUTING_THRESHOLD
from hyperpod_dpd.planner import recommend
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION as CAL
from hyperpod_dpd.planner.formulas import step_costs
from hyperpod_dpd.planner.recommend import PlanError, compare, verdict
from hyperpod_dpd.planner.serving import Point

GIB = 1024**3
P5 = instance("ml.p5.48xlarge")


def _point(*, ttft: float = 0.4, tpot: float = 0.015, tokens: float = 2000.0, stall: float = 0.015,
           saturated: bool = False) -> Point:
    return Point(request_rate=tokens / 512, concurrency=32, ttft_s=ttft, tpot_s=tpot, output_tokens_per_s=tokens,
                 max_itl_s=stall, decode_batch=16, prefill_utilization=0.5, saturated=saturated)


def test_tensor_parallelism_fills_the_node_and_says_why() -> None:
    decision = recommend.tensor_parallel_size(model=MODELS["Llama-3.3-70B"], instance=P5, calibration=CAL)
    assert decision.value == 8
    assert any("fit at TP=4" in r for r in decision.reasons)


def test_replicated_kv_heads_are_explained() -> None:
    decision = recommend.tensor_parallel_size(model=MODELS["Qwen3-235B-A22B"], instance=instance("ml.p5e.48xlarge"),
                                              calibration=CAL)
    assert any("4 KV heads" in r and "replicates" in r for r in decision.reasons)


def test_a_model_larger_than_one_node_is_refused() -> None:
    with pytest.raises(PlanError, match="Llama-3.1-405B-Instruct needs 812 GB of BF16 weights, more than one "
                                        "ml.p5.48xlarge holds"):
        recommend.tensor_parallel_size(model=MODELS["Llama-3.1-405B"], instance=P5, calibration=CAL)


def test_the_decoder_must_hold_the_longest_request_next_to_weights_and_buffer() -> None:
    # GIVEN 405B on p5e: 94.5 GiB of weights per GPU leave ~4,200 tokens of KV at 0.75 utilization with 8 GiB buffer
    with pytest.raises(PlanError, match="KV room for 4,2[0-9]{2} tokens"):
        recommend.require_decoder_room(model=MODELS["Llama-3.1-405B"], instance=instance("ml.p5e.48xlarge"),
                                       tensor_parallel=8, peak_tokens=8704, calibration=CAL)
    recommend.require_decoder_room(model=MODELS["Llama-3.1-405B"], instance=instance("ml.p5e.48xlarge"),
                                   tensor_parallel=8, peak_tokens=2048, calibration=CAL)


def test_max_model_len_is_the_next_power_of_two_within_the_context() -> None:
    assert recommend.max_model_len(model=MODELS["Llama-3.3-70B"], peak_tokens=8704) == 16384
    assert recommend.max_model_len(model=MODELS["Qwen2.5-72B"], peak_tokens=20000) == 32768
    with pytest.raises(PlanError, match="exceeds Qwen2.5-72B-Instruct's context of 32,768 tokens"):
        recommend.max_model_len(model=MODELS["Qwen2.5-72B"], peak_tokens=33024)


def test_prefill_replicas_keep_up_with_the_decoder_at_the_target_utilization() -> None:
    # GIVEN one decoder that sustains 4 req/s, all disaggregated, at 316 ms of prefill each: 1.264 nodes busy
    decision = recommend.prefill_replicas(decode_limited_rate=4.0, remote_share=1.0, mean_service_s=0.316,
                                          calibration=CAL)
    # THEN 1.264 / 0.8 = 1.58 rounds up to 2
    assert decision.value == 2
    assert recommend.prefill_replicas(decode_limited_rate=4.0, remote_share=0.0, mean_service_s=0.0,
                                      calibration=CAL).value == 1


def test_threshold_keeps_the_measured_default_near_the_break_even() -> None:
    for break_even in (2048, 4096, 8192):
        assert recommend.routing_threshold(break_even, limit=131072).value == DEFAULT_ROUTING_THRESHOLD
    lowered = recommend.routing_threshold(1024, limit=131072)
    assert lowered.value == 1024 and "lower the threshold to 1,024" in lowered.reasons[0]
    raised = recommend.routing_threshold(24576, limit=16384)
    assert raised.value == 16384 and raised.reasons[0].startswith("raise")
    assert recommend.routing_threshold(None, limit=131072).value == DEFAULT_ROUTING_THRESHOLD


def _break_even(key: str, name: str = "ml.p5.48xlarge", batch: float = 30.0) -> int | None:
    spec = MODELS[key]
    node = instance(name)
    costs = step_costs(model=spec, instance=node, tensor_parallel=8, calibration=CAL)
    return recommend.break_even_tokens(model=spec, instance=node, tensor_parallel=8, costs=costs, batch=batch,
                                       decode_context=8448, limit=spec.max_context, calibration=CAL)


def test_the_70b_break_even_on_p5_is_within_twice_the_measured_default() -> None:
    # GIVEN the case HyperPod measured its 4096 default on: Llama 70B at TP=8 on p5 under load
    # THEN the model's break-even is within 2x of it, so the default stands
    break_even = _break_even("Llama-3.3-70B")
    assert break_even is not None and 2048 <= break_even <= 8192


def test_bigger_models_pay_for_the_transfer_with_shorter_prompts() -> None:
    # THEN an 8B model needs far longer prompts than a 70B one before disaggregating pays, and 405B shorter still
    small, large = _break_even("Llama-3.1-8B"), _break_even("Llama-3.3-70B")
    huge = _break_even("Llama-3.1-405B", "ml.p6-b200.48xlarge")
    assert small is not None and large is not None and huge is not None
    assert small > 2 * large > 2 * huge


def test_nothing_to_stall_means_no_break_even() -> None:
    assert _break_even("Llama-3.3-70B", batch=0.5) is None


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


def test_dpd_wins_a_load_when_it_cuts_tpot_without_losing_throughput() -> None:
    won, text = compare(_point(tpot=0.016), _point(tpot=0.013, tokens=1950, ttft=0.6))
    assert won and "TPOT 16.0 ms -> 13.0 ms (-19%)" in text


def test_dpd_wins_a_load_when_it_removes_the_prefill_stall() -> None:
    assert compare(_point(stall=0.316), _point(stall=0.013, tpot=0.0155))[0]


@pytest.mark.parametrize("dpd", [
    _point(tpot=0.010, tokens=1800),  # loses 10% throughput
    _point(tpot=0.016),  # no TPOT or stall gain
    _point(tpot=0.010, ttft=0.9),  # more than doubles TTFT
    _point(saturated=True, ttft=math.inf, tpot=math.inf, tokens=0.0),
])
def test_dpd_loses_a_load_otherwise(dpd: Point) -> None:
    assert not compare(_point(tpot=0.016), dpd)[0]


def test_verdict_follows_the_majority_and_the_highest_load_breaks_ties() -> None:
    win = (_point(tpot=0.016), _point(tpot=0.012))
    loss = (_point(tpot=0.016), _point(tpot=0.016))
    assert verdict(loads=(8, 16, 32), pairs=[loss, win, win], remote_share=1.0, threshold=4096,
                   load_name="concurrency").pays_off
    assert not verdict(loads=(8, 16, 32), pairs=[win, loss, loss], remote_share=1.0, threshold=4096,
                       load_name="concurrency").pays_off
    tie_won = verdict(loads=(8, 32), pairs=[loss, win], remote_share=1.0, threshold=4096, load_name="concurrency")
    tie_lost = verdict(loads=(8, 32), pairs=[win, loss], remote_share=1.0, threshold=4096, load_name="concurrency")
    assert tie_won.decision == "DPD pays off" and tie_lost.decision == "stay colocated"
    assert tie_won.reasons[0] == ("DPD wins at 1 of 2 loads (it must keep 95% of colocated throughput, cut TPOT by "
                                  "10% or the longest step 2x, and stay within 2x colocated TTFT)")


def test_no_disaggregated_prompt_means_stay_colocated() -> None:
    result = verdict(loads=(8,), pairs=[(_point(tpot=0.016), _point(tpot=0.010))], remote_share=0.0,
                     threshold=4096, load_name="concurrency")
    assert result.decision == "stay colocated"
    assert "no prompt reaches the routing threshold (4,096 tokens)" in result.reasons[0]
