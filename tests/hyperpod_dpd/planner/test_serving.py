"""The serving model: interference, Little's law, monotone behaviour under load, saturation and KV limits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION as CAL
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.formulas import (
    exposed_transfer_seconds,
    join_seconds,
    kv_transfer_seconds,
    prefill_seconds,
    step_costs,
    step_seconds,
)
from hyperpod_dpd.planner.serving import Colocated, Disaggregated
from hyperpod_dpd.planner.workload import LengthDistribution, Workload
from tests.examples import examples

GIB = 1024**3
P5 = instance("ml.p5.48xlarge")
LLAMA_70B = MODELS["Llama-3.3-70B"]


def _workload(inputs: str, outputs: str = "512", concurrency: tuple[int, ...] = (8,), hit: float = 0.0) -> Workload:
    return Workload(inputs=LengthDistribution.parse(inputs), outputs=LengthDistribution.parse(outputs),
                    concurrency=concurrency, prefix_hit_rate=hit)


def _colocated(workload: Workload, nodes: int = 2, key: str = "Llama-3.3-70B",
               calibration: Calibration = CAL) -> Colocated:
    return Colocated(model=MODELS[key], instance=P5, tensor_parallel=8, nodes=nodes, workload=workload,
                     calibration=calibration)


def _dpd(workload: Workload, prefill: int = 1, threshold: int = 4096, key: str = "Llama-3.3-70B") -> Disaggregated:
    return Disaggregated(model=MODELS[key], instance=P5, tensor_parallel=8, prefill=prefill, decode=1,
                         threshold=threshold, workload=workload, calibration=CAL, pd_buffer_bytes=8 * GIB)


def test_closed_loop_obeys_littles_law() -> None:
    # WHEN 32 users are served colocated and disaggregated
    for system in (_colocated(_workload("8192")), _dpd(_workload("8192"), prefill=2)):
        point = system.at_concurrency(32)
        # THEN rate x (TTFT + (output - 1) x TPOT) is the 32 users
        assert point.request_rate * (point.ttft_s + 511 * point.tpot_s) == pytest.approx(32, rel=1e-3)
        assert point.output_tokens_per_s == pytest.approx(point.request_rate * 512)


def test_a_long_local_prefill_stalls_every_colocated_stream() -> None:
    # GIVEN the same load with short and with long prompts
    short = _colocated(_workload("512")).at_concurrency(16)
    long = _colocated(_workload("8192")).at_concurrency(16)
    # THEN the 8k prompt makes one step as long as its whole prefill, and TPOT rises
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    assert long.max_itl_s >= prefill_seconds(costs, tokens=8192, chunk_tokens=8192)
    assert long.tpot_s > short.tpot_s * 1.1


def test_chunked_prefill_spreads_the_stall_over_smaller_steps() -> None:
    # GIVEN 8k prompts with 8,192-token and with 1,024-token prefill chunks
    whole = _colocated(_workload("8192")).at_concurrency(16)
    chunked = _colocated(_workload("8192"), calibration=CAL.with_overrides(chunk_tokens=1024)).at_concurrency(16)
    # THEN the longest step a stream sees shrinks several times
    assert chunked.max_itl_s < whole.max_itl_s / 4


def test_the_decoder_sees_no_prefill_stall_when_every_prompt_is_disaggregated() -> None:
    # GIVEN all prompts above the threshold
    point = _dpd(_workload("8192"), prefill=2).at_concurrency(16)
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    step = step_seconds(costs, batch=point.decode_batch, context=point.decode_batch * 8448)
    # THEN the longest step is a plain decode step of the decoder's batch
    assert point.max_itl_s == pytest.approx(step)
    # AND the joins (HBM traffic and connector work, 6.6 ms per 8k request) cost it only a few percent of TPOT
    join = join_seconds(costs, tokens=8192, calibration=CAL)
    assert point.tpot_s == pytest.approx(step / (1 - point.request_rate * join), rel=1e-3)
    assert point.tpot_s < step * 1.1


def test_unloaded_dpd_ttft_is_prefill_send_hand_off_and_one_decode_step() -> None:
    # GIVEN a single request in an otherwise idle DPD layout on LMCache's PD path (the default)
    point = _dpd(_workload("8192"), prefill=1).at_rate(1e-6)
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    prefill = prefill_seconds(costs, tokens=8192, chunk_tokens=8192)
    bulk = kv_transfer_seconds(model=LLAMA_70B, instance=P5, tensor_parallel=8, tokens=8192, calibration=CAL)
    copy = 8192 * costs.kv_read_s_per_token * 2  # into the sender's PD buffer: a read and a write of each byte
    # THEN TTFT is its prefill, the send in the prefiller's step (copy and the whole bulk transfer: LMCache's PD
    # send is not layer-wise), the hand-off and the decoder's first step
    assert not CAL.transfer_layerwise and CAL.transfer_holds_prefiller
    expected = prefill + copy + bulk + CAL.transfer_fixed_s + step_seconds(costs, batch=1, context=8448)
    assert point.ttft_s == pytest.approx(expected, rel=1e-3)


def test_lmcache_send_holds_the_prefiller_and_a_pulling_connector_does_not() -> None:
    # GIVEN the same 8k workload on LMCache's PD path, on the same path with layer-wise overlap, and with the
    # decoder pulling (NixlConnector: the prefiller's step does not wait for the transfer)
    workload = _workload("8192")
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    prefill = prefill_seconds(costs, tokens=8192, chunk_tokens=8192)
    bulk = kv_transfer_seconds(model=LLAMA_70B, instance=P5, tensor_parallel=8, tokens=8192, calibration=CAL)

    def system(**overrides: object) -> Disaggregated:
        return Disaggregated(model=LLAMA_70B, instance=P5, tensor_parallel=8, prefill=1, decode=1, threshold=4096,
                             workload=workload, calibration=CAL.with_overrides(**overrides),
                             pd_buffer_bytes=8 * GIB)

    pushing, pulling = system(), system(transfer_holds_prefiller=False)
    layerwise = system(transfer_layerwise=True, transfer_holds_prefiller=False)
    # THEN the push keeps the prefiller busy for its prefill, copy and transfer; the pull for its prefill alone
    assert pushing.service == pytest.approx(prefill + 8192 * costs.kv_read_s_per_token * 2 + bulk, rel=1e-9)
    assert pulling.service == pytest.approx(prefill, rel=1e-9)
    # AND at the same load the pushing prefiller runs busier and its users wait longer for a first token
    load = 2.0
    assert pushing.at_rate(load).prefill_utilization > pulling.at_rate(load).prefill_utilization
    assert pushing.at_rate(load).ttft_s > pulling.at_rate(load).ttft_s > layerwise.at_rate(load).ttft_s
    # AND layer-wise overlap would leave only the last layer's share of the transfer after the prefill
    assert exposed_transfer_seconds(bulk_s=bulk, prefill_s=prefill, layers=80, layerwise=True) == pytest.approx(
        bulk / 80)


def test_a_prefix_hit_lowers_the_prefill_load_in_both_modes() -> None:
    # GIVEN the same 8k workload with no prefix hits and with half of every prompt cached
    cold, warm = _workload("8192"), _workload("8192", hit=0.5)
    # THEN the prefiller's service time and the colocated stall both shrink, and both modes serve faster
    assert _dpd(warm).service < 0.6 * _dpd(cold).service
    for make in (_colocated, _dpd):
        before, after = make(cold).at_concurrency(16), make(warm).at_concurrency(16)  # type: ignore[operator]
        assert after.ttft_s < 0.75 * before.ttft_s
        assert after.prefill_utilization < before.prefill_utilization
    assert _colocated(warm).at_concurrency(16).tpot_s < _colocated(cold).at_concurrency(16).tpot_s


def test_percentiles_bracket_the_mean_and_p99_exceeds_p50() -> None:
    point = _colocated(_workload("2048:3,16384:1")).at_concurrency(16)
    assert point.ttft_p50_s < point.ttft_s < point.ttft_p99_s
    assert point.tpot_p50_s <= point.tpot_p99_s
    assert point.e2e_p50_s < point.e2e_p99_s
    assert 0 < point.attainment(point.ttft_p99_s, None) <= 1


def test_prompts_below_the_threshold_stay_on_the_decoder() -> None:
    system = _dpd(_workload("2048:3,8192:1"), threshold=4096)
    assert system.remote_share == pytest.approx(0.25)
    assert _dpd(_workload("512"), threshold=4096).remote_share == 0


def test_an_impossible_rate_saturates() -> None:
    point = _colocated(_workload("8192")).at_rate(1000.0)
    assert point.saturated and math.isinf(point.ttft_s) and point.output_tokens_per_s == 0


def test_users_beyond_the_decoders_kv_cache_wait_in_front_of_it() -> None:
    # GIVEN 32k-token prompts: one p5 decoder holds only about 18 of them
    workload = _workload("32768", "256", (64, 128))
    system = _dpd(workload, prefill=50)
    streams = system.kv_slots / workload.decode_context
    at_64, at_128 = system.at_concurrency(64), system.at_concurrency(128)
    # THEN the decode batch stops at the KV capacity, TPOT stops rising and the extra users queue in TTFT
    assert at_64.decode_batch <= streams and at_128.decode_batch <= streams
    assert at_128.tpot_s == pytest.approx(at_64.tpot_s, rel=1e-2)
    assert at_128.ttft_s > at_64.ttft_s + 60 / at_64.request_rate * 0.9


@settings(max_examples=examples(40), deadline=None)
@given(users=st.integers(min_value=1, max_value=96), more=st.integers(min_value=1, max_value=64),
       inputs=st.sampled_from(["512", "4096", "8192", "1024:3,16384:1"]), outputs=st.sampled_from(["64", "512"]),
       key=st.sampled_from(["Llama-3.1-8B", "Llama-3.3-70B", "Mixtral-8x22B"]),
       prefill=st.integers(min_value=1, max_value=3))
def test_more_concurrency_never_lowers_tpot(users: int, more: int, inputs: str, outputs: str, key: str,
                                            prefill: int) -> None:
    workload = _workload(inputs, outputs)
    for system in (_colocated(workload, nodes=prefill + 1, key=key), _dpd(workload, prefill=prefill, key=key)):
        low, high = system.at_concurrency(users), system.at_concurrency(users + more)
        # THEN neither TPOT nor TTFT falls when users are added, and throughput does not drop (up to the solver's
        # precision: at the KV-capacity boundary the rate is found to 1e-7 of its bracket)
        assert high.tpot_s >= low.tpot_s * (1 - 1e-4)
        assert high.ttft_s >= low.ttft_s * (1 - 1e-3)
        assert high.output_tokens_per_s >= low.output_tokens_per_s * (1 - 1e-3)


@settings(max_examples=examples(30), deadline=None)
@given(rate=st.floats(min_value=0.05, max_value=3.0), more=st.floats(min_value=0.01, max_value=3.0))
def test_a_higher_request_rate_never_lowers_tpot(rate: float, more: float) -> None:
    system = _colocated(_workload("4096"), nodes=2)
    low, high = system.at_rate(rate), system.at_rate(rate + more)
    assert high.saturated or high.tpot_s >= low.tpot_s


def test_a_per_request_cost_outside_the_steps_delays_the_first_token_and_nothing_else() -> None:
    # GIVEN one open-loop load of 2,048- and 8,192-token prompts, planned without and with a 30 ms per-request cost
    workload = Workload(inputs=LengthDistribution.parse("2048:3,8192:1"), outputs=LengthDistribution.parse("256"),
                        request_rates=(2.0,))
    costly = CAL.with_overrides(request_overhead_s=0.030)
    for build in (lambda c: _colocated(workload, calibration=c),
                  lambda c: Disaggregated(model=MODELS["Llama-3.3-70B"], instance=P5, tensor_parallel=8, prefill=1,
                                          decode=1, threshold=4096, workload=workload, calibration=c,
                                          pd_buffer_bytes=8 * GIB)):
        before, after = build(CAL).at_rate(2.0), build(costly).at_rate(2.0)
        # THEN the mean, median and P99 TTFT and the median E2E move by the cost; the steps, TPOT and the
        # throughput do not
        for which in ("ttft_s", "ttft_p50_s", "ttft_p99_s", "e2e_p50_s"):
            assert getattr(after, which) - getattr(before, which) == pytest.approx(0.030, abs=1e-4), which
        assert (after.tpot_s, after.itl_p50_s, after.output_tokens_per_s, after.prefill_utilization) == (
            before.tpot_s, before.itl_p50_s, before.output_tokens_per_s, before.prefill_utilization)


def test_users_inside_the_per_request_cost_are_neither_decoding_nor_queued() -> None:
    # GIVEN 32 closed-loop users of 8,192-token prompts, without and with a half-second per-request cost
    workload = _workload("8192")
    before = _colocated(workload).at_concurrency(32)
    after = _colocated(workload, calibration=CAL.with_overrides(request_overhead_s=0.5)).at_concurrency(32)
    # THEN Little's law still counts the 32 users, the cost inside each response
    assert after.request_rate * (after.ttft_s + 511 * after.tpot_s) == pytest.approx(32, rel=1e-3)
    # AND the users it holds (rate x 0.5 s) leave the decode batch: fewer decode, and the rate falls
    assert after.decode_batch <= 32 - after.request_rate * 0.5 + 1e-6
    assert after.decode_batch < before.decode_batch and after.request_rate < before.request_rate


def test_a_lone_user_finds_its_engine_idle_and_waits_for_no_step() -> None:
    # GIVEN one user in a closed loop on one colocated replica, with a short prompt (its prefill is a few steps long)
    system = _colocated(_workload("256", concurrency=(1,)), nodes=1)
    costs = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)
    prefill = prefill_seconds(costs, tokens=256, chunk_tokens=CAL.chunk_tokens)
    step = step_seconds(costs, batch=1, context=256 + 256)
    # WHEN it sends its request
    lone = system.at_concurrency(1)
    # THEN its TTFT is its own prefill: nobody else is decoding, so no step is in flight when it arrives (the
    # arrival theorem), where half a decode step would add a quarter to this prefill
    assert step > 0.2 * prefill
    assert lone.ttft_s == pytest.approx(prefill, rel=0.02)
    # AND with eight users each arrival finds the others' step in flight and waits for part of it
    crowded = _colocated(_workload("256", concurrency=(8,)), nodes=1).at_concurrency(8)
    assert crowded.ttft_s >= prefill + 0.4 * step
