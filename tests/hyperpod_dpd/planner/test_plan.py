"""Whole plans: the clear-cut verdicts, the layout they assume, their warnings and their JSON form."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import Plan, PlanError, make_plan
from hyperpod_dpd.planner.report import plan_dict
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

GIB = 1024**3


def _plan(key: str, inputs: str, outputs: str, loads: tuple[int, ...] = (), rates: tuple[float, ...] = (),
          name: str = "ml.p5.48xlarge", hit: float = 0.0, **layout: Any) -> Plan:
    workload = Workload(inputs=LengthDistribution.parse(inputs), outputs=LengthDistribution.parse(outputs),
                        concurrency=loads, request_rates=rates, prefix_hit_rate=hit)
    return make_plan(model=MODELS[key], instance=instance(name), workload=workload, **layout)


def test_a_small_model_with_short_prompts_stays_colocated() -> None:
    # WHEN an 8B model serves 512-token prompts
    plan = _plan("Llama-3.1-8B", "512", "256", (8, 16, 32))
    # THEN colocated serving wins: even with every prompt disaggregated (the best threshold), two colocated nodes
    # serve more per node than one prefill and one decode node
    assert plan.verdict.decision == "stay colocated"
    colocated, dpd = plan.operating
    assert colocated.per_node > dpd.per_node
    assert all(p.colocated.output_tokens_per_s > p.disaggregated.output_tokens_per_s for p in plan.predictions[1:])
    # AND the colocated layout it compares against is the better of TP8 and TP1 replicas: at 32 users on 16 GPUs
    # the lower latency of TP8 serves more requests in the closed loop
    assert (plan.layout.colocated_tp, plan.layout.colocated_replicas) == (8, 2)


def test_seventy_b_with_long_prompts_on_p5_pays_off() -> None:
    # WHEN Llama-3.3-70B serves 8k prompts and 512-token outputs to 32 users on p5 within TTFT 2 s, TPOT 20 ms
    plan = _plan("Llama-3.3-70B", "8192", "512", (32,), slo=Slo(ttft_s=2.0, tpot_s=0.02))
    # THEN DPD pays off: two prefill nodes per decoder, no prefill stall on the decoder, more throughput
    assert plan.verdict.decision == "DPD pays off" and plan.verdict.trade is None
    assert any("prefill pool runs 56% busy" in r and "1 would run 94% busy" in r for r in plan.recommendation.reasons)
    r = plan.recommendation
    assert (r.prefill_replicas, r.decode_replicas, r.tensor_parallel_size) == (2, 1, 8)
    assert r.routing_threshold == 4096 and r.max_model_len == 16384
    assert r.pd_buffer_size_bytes == 16 * GIB  # 32 x 8192 x 40 KiB x 1.1 = 11 GiB -> 16 GiB
    point = plan.predictions[0]
    assert point.disaggregated.max_itl_s < point.colocated.max_itl_s / 10
    assert point.disaggregated.output_tokens_per_s > point.colocated.output_tokens_per_s


def test_the_baseline_defaults_to_the_same_node_count() -> None:
    plan = _plan("Llama-3.3-70B", "8192", "512", (16,), prefill_nodes=3)
    assert (plan.layout.prefill_nodes, plan.layout.decode_nodes, plan.layout.baseline_nodes) == (3, 1, 4)
    assert _plan("Llama-3.3-70B", "8192", "512", (16,), prefill_nodes=1, baseline_nodes=6).layout.baseline_nodes == 6


def test_more_than_one_decoder_is_modelled_with_a_warning() -> None:
    plan = _plan("Llama-3.3-70B", "8192", "512", (32,), prefill_nodes=2, decode_nodes=2)
    assert plan.layout.decode_nodes == 2 and plan.recommendation.decode_replicas == 1
    assert any("supports 1 decode replica" in w for w in plan.warnings)


def test_a_decoder_short_of_kv_cache_is_a_warning_not_more_decoders() -> None:
    plan = _plan("Llama-3.3-70B", "32768", "256", (64,))
    assert plan.recommendation.decode_replicas == 1
    assert any("KV cache holds about" in w and "supports 1 decoder" in w for w in plan.warnings)


def test_moe_models_carry_the_docs_caveat() -> None:
    plan = _plan("Mixtral-8x22B", "8192", "512", (16,))
    assert any("mixture of experts" in w for w in plan.warnings)


def test_an_impossible_layout_is_refused() -> None:
    with pytest.raises(PlanError, match="prefill nodes must be at least 1"):
        _plan("Llama-3.3-70B", "8192", "512", (8,), prefill_nodes=0)
    with pytest.raises(PlanError, match="needs 812 GB"):
        _plan("Llama-3.1-405B", "8192", "512", (8,))
    with pytest.raises(PlanError, match="fp4 needs a GPU with FP4 tensor cores"):
        _plan("Llama-3.3-70B", "8192", "512", (8,), kv_dtype="fp4")
    with pytest.raises(PlanError, match="shorter than the longest request"):
        _plan("Llama-3.3-70B", "8192", "512", (8,), max_model_len=8192)


def test_json_has_the_documented_shape() -> None:
    data = json.loads(json.dumps(plan_dict(_plan("Llama-3.3-70B", "8192", "512", (8, 16, 32))), allow_nan=False))
    assert data["kv_bytes_per_token"] == 327_680
    assert data["kv_transfer_ms"] == pytest.approx(8192 * 40960 / 42.5e6, abs=1e-3)
    # LMCache's PD send is not layer-wise: all of the transfer follows the prefill
    assert data["kv_transfer_exposed_ms"] == pytest.approx(data["kv_transfer_ms"], abs=1e-3)
    assert data["efa_line_rate_gbytes_per_s"] == 400.0 and data["efa_effective_gbytes_per_s"] == 340.0
    assert data["precision"] == {"weights": "bf16", "kv_cache": "bf16"}
    assert set(data["operating_point"]) == {"colocated", "disaggregated"}
    assert data["cost"]["usd_per_instance_hour"] == 55.04 and data["cost"]["disaggregated"]["usd_per_hour"] == 165.12
    assert set(data["recommendation"]) >= {"prefill_replicas", "decode_replicas", "routing_threshold",
                                           "pd_buffer_size_bytes", "tensor_parallel_size"}
    assert [p["concurrency"] for p in data["predictions"]] == [8, 16, 32]
    for prediction in data["predictions"]:
        for mode in ("colocated", "disaggregated"):
            point = prediction[mode]
            assert set(point) >= {"ttft_ms", "tpot_ms", "output_tokens_per_s", "ttft_p50_ms", "ttft_p95_ms",
                                  "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "e2e_p50_ms",
                                  "e2e_p99_ms", "goodput_per_s", "slo_attainment"}
            assert point["ttft_ms"] > 0 and point["tpot_ms"] > 0
            assert point["ttft_p99_ms"] >= point["ttft_p95_ms"] >= point["ttft_p50_ms"]
            # the median gap is a bare decode step: at most the mean gap, at least a tenth of it
            assert point["tpot_ms"] / 10 < point["itl_p50_ms"] <= point["tpot_ms"]
    assert data["verdict"]["decision"] in ("DPD pays off", "stay colocated") and data["verdict"]["reasons"]


def test_request_rates_give_open_loop_predictions_and_nulls_when_saturated() -> None:
    # WHEN a request rate beyond any layout's capacity is planned next to a sustainable one
    data = plan_dict(_plan("Llama-3.3-70B", "8192", "512", rates=(1.0, 500.0), prefill_nodes=2))
    sustainable, impossible = data["predictions"]
    # THEN the first has figures, the second says it saturates with nulls instead of infinities
    assert sustainable["request_rate_per_s"] == 1.0 and sustainable["disaggregated"]["output_tokens_per_s"] == 512.0
    assert impossible["disaggregated"]["saturated"] and impossible["disaggregated"]["ttft_ms"] is None
    assert impossible["colocated"]["tpot_ms"] is None
    json.dumps(data, allow_nan=False)


def test_mixed_prompts_split_at_the_threshold() -> None:
    # GIVEN three 2k prompts for every 16k one
    plan = _plan("Llama-3.3-70B", "2048:3,16384:1", "1024", (16,))
    # THEN only the long quarter disaggregates and the buffer is sized for those
    assert "25% of prompts reach the routing threshold (4,096 tokens)" in plan.verdict.reasons
    assert plan.recommendation.pd_buffer_size_bytes == 8 * GIB  # 4 x 16384 x 40 KiB x 1.1 = 2.75 GiB


def test_fp8_kv_halves_the_kv_bytes_and_the_transfer() -> None:
    bf16 = _plan("Llama-3.3-70B", "8192", "512", (16,))
    fp8 = _plan("Llama-3.3-70B", "8192", "512", (16,), kv_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token == 327_680
    assert fp8.kv_transfer_s == pytest.approx(bf16.kv_transfer_s / 2, rel=1e-3)  # 64 KiB messages: at the knee
    # AND FP4 is refused on H100 but planned on B200
    assert _plan("Llama-3.3-70B", "8192", "512", (16,), name="ml.p6-b200.48xlarge",
                 kv_dtype="fp4").kv_bytes_per_token == 92_160


def test_a_half_prefix_hit_lowers_prefill_load_in_both_modes() -> None:
    cold = _plan("Llama-3.3-70B", "8192", "512", (16,), prefill_nodes=2)
    warm = _plan("Llama-3.3-70B", "8192", "512", (16,), prefill_nodes=2, hit=0.5)
    for mode in ("colocated", "disaggregated"):
        before, after = getattr(cold.predictions[0], mode), getattr(warm.predictions[0], mode)
        assert after.prefill_utilization < 0.7 * before.prefill_utilization
        assert after.ttft_s < before.ttft_s
    assert any("50% of prompt tokens come from the prefix cache" in r for r in warm.verdict.reasons)


def test_max_model_len_is_used_as_given() -> None:
    plan = _plan("Llama-3.3-70B", "8192", "512", (16,), max_model_len=10_000)
    assert plan.recommendation.max_model_len == 10_000


def test_a_sweep_predicts_both_modes_at_every_load_and_marks_the_operating_point() -> None:
    plan = _plan("Llama-3.3-70B", "8192", "512", (32,), sweep=(1, 2, 4, 8, 16, 32, 64),
                 slo=Slo(ttft_s=1.5, tpot_s=0.018))
    assert [p.load for p in plan.curve] == [1, 2, 4, 8, 16, 32, 64]
    colocated, dpd = plan.operating
    # THEN the operating point is the most goodput among loads where 90% of requests meet the SLO
    assert (colocated.load, dpd.load) == (16, 32) and dpd.meets_target and dpd.attainment >= 0.9
    assert plan.cost is not None and plan.cost.disaggregated.usd_per_million_output_tokens is not None
    assert plan.cost.disaggregated.usd_per_million_output_tokens < plan.cost.colocated.usd_per_million_output_tokens


def test_a_price_override_replaces_the_catalogue() -> None:
    plan = _plan("Llama-3.3-70B", "8192", "512", (16,), prices={"ml.p5.48xlarge": 40.0})
    assert plan.cost is not None and plan.cost.price.usd_per_hour == 40.0
    assert plan.cost.colocated.usd_per_hour == 40.0 * plan.layout.baseline_nodes
    assert plan.cost.price.basis == "environment override"


@pytest.mark.parametrize(("threshold", "share"), [(0, 1.0), (3000, 0.25), (20000, 0.0)])
def test_a_given_routing_threshold_is_the_one_planned(threshold: int, share: float) -> None:
    # GIVEN a mix of 2,048- and 8,192-token prompts (3:1) and the router's threshold as deployed
    plan = _plan("Llama-3.3-70B", "2048:3,8192:1", "256", (16,), prefill_nodes=1, routing_threshold=threshold)
    # THEN the plan uses that threshold alone: the prompts at or above it disaggregate, no other is scored
    assert plan.recommendation.routing_threshold == threshold
    assert [c.threshold for c in plan.recommendation.threshold_candidates] == [threshold]
    assert plan.recommendation.threshold_candidates[0].remote_share == pytest.approx(share)
    assert any("as given" in reason for reason in plan.recommendation.reasons)


def test_a_negative_routing_threshold_is_refused() -> None:
    with pytest.raises(PlanError, match="routing threshold must be at least 0 tokens, got -1"):
        _plan("Llama-3.1-8B", "512", "256", (8,), routing_threshold=-1)
