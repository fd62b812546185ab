"""Whole plans: the clear-cut verdicts, the layout they assume, their warnings and their JSON form."""

from __future__ import annotations

import json

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import Plan, PlanError, make_plan
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

GIB = 1024**3


def _plan(key: str, inputs: str, outputs: str, loads: tuple[int, ...] = (), rates: tuple[float, ...] = (),
          name: str = "ml.p5.48xlarge", **layout: int) -> Plan:
    workload = Workload(inputs=LengthDistribution.parse(inputs), outputs=LengthDistribution.parse(outputs),
                        concurrency=loads, request_rates=rates)
    return make_plan(model=MODELS[key], instance=instance(name), workload=workload, **layout)


def test_a_small_model_with_short_prompts_stays_colocated() -> None:
    # WHEN an 8B model serves 512-token prompts
    plan = _plan("Llama-3.1-8B", "512", "256", (8, 16, 32))
    # THEN no prompt reaches the threshold, the prefill node would idle, and colocated serving wins
    assert plan.verdict.decision == "stay colocated"
    assert "no prompt reaches the routing threshold" in plan.verdict.reasons[0]
    assert all(p.colocated.output_tokens_per_s > p.disaggregated.output_tokens_per_s for p in plan.predictions[1:])


def test_seventy_b_with_long_prompts_on_p5_pays_off() -> None:
    # WHEN Llama-3.3-70B serves 8k prompts and 512-token outputs to 32 users on p5
    plan = _plan("Llama-3.3-70B", "8192", "512", (32,))
    # THEN DPD pays off: two prefill nodes per decoder, no prefill stall on the decoder, more throughput
    assert plan.verdict.decision == "DPD pays off"
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


def test_json_has_the_documented_shape() -> None:
    data = json.loads(json.dumps(_plan("Llama-3.3-70B", "8192", "512", (8, 16, 32)).to_dict()))
    assert data["kv_bytes_per_token"] == 327_680
    assert data["kv_transfer_ms"] == pytest.approx(8192 * 40960 / 9.6e6 + 37, abs=1e-3)
    assert set(data["recommendation"]) >= {"prefill_replicas", "decode_replicas", "routing_threshold",
                                           "pd_buffer_size_bytes", "tensor_parallel_size"}
    assert [p["concurrency"] for p in data["predictions"]] == [8, 16, 32]
    for prediction in data["predictions"]:
        for mode in ("colocated", "disaggregated"):
            assert set(prediction[mode]) >= {"ttft_ms", "tpot_ms", "output_tokens_per_s"}
            assert prediction[mode]["ttft_ms"] > 0 and prediction[mode]["tpot_ms"] > 0
    assert data["verdict"]["decision"] in ("DPD pays off", "stay colocated") and data["verdict"]["reasons"]


def test_request_rates_give_open_loop_predictions_and_nulls_when_saturated() -> None:
    # WHEN a request rate beyond any layout's capacity is planned next to a sustainable one
    data = _plan("Llama-3.3-70B", "8192", "512", rates=(1.0, 500.0), prefill_nodes=2).to_dict()
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
