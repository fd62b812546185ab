"""The verdict follows the SLA: goodput (requests within both SLOs) per node, best colocated vs best DPD layout."""

from __future__ import annotations

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import Plan, make_plan
from hyperpod_dpd.planner.report import plan_dict
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

P5 = instance("ml.p5.48xlarge")


def _plan(inputs: int, outputs: int, users: int, slo: Slo = Slo(), **layout: int) -> Plan:
    workload = Workload(inputs=LengthDistribution.fixed(inputs), outputs=LengthDistribution.fixed(outputs),
                        concurrency=(users,))
    return make_plan(model=MODELS["Llama-3.3-70B"], instance=P5, workload=workload, slo=slo, **layout)


def test_long_prompts_at_high_concurrency_disaggregate() -> None:
    # WHEN 16,000-token prompts with 512-token outputs are served to 32 users on p5 within TTFT 8 s, TPOT 25 ms
    plan = _plan(16000, 512, 32, Slo(ttft_s=8.0, tpot_s=0.025))
    # THEN DPD pays off: 3 prefill + 1 decode (2 prefillers would run above the 80% target) serve more requests per
    # node than 4 colocated nodes
    assert plan.verdict.decision == "DPD pays off"
    assert (plan.layout.prefill_nodes, plan.layout.decode_nodes, plan.layout.baseline_nodes) == (3, 1, 4)
    assert "2 would run 82% busy" in plan.recommendation.reasons[0]
    colocated, dpd = plan.operating
    assert dpd.per_node > colocated.per_node * 1.05
    point = plan.predictions[0]
    assert point.disaggregated.tpot_p99_s < point.colocated.tpot_p99_s


def test_short_prompts_at_low_concurrency_stay_colocated() -> None:
    plan = _plan(512, 256, 4)
    assert plan.verdict.decision == "stay colocated"
    assert "no prompt reaches the routing threshold" in plan.verdict.reasons[0]


def test_the_reference_setup_follows_the_sla() -> None:
    # GIVEN the documented reference: Llama-3.3-70B TP8, 4,096 / 256, 1 prefill + 1 decode against one node
    reference = {"prefill_nodes": 1, "decode_nodes": 1, "baseline_nodes": 1}
    # WHEN streaming smoothness is the target (TPOT <= 15 ms, TTFT <= 2 s)
    smooth = _plan(4096, 256, 16, Slo(ttft_s=2.0, tpot_s=0.015), **reference)
    # THEN DPD pays off: the colocated node's prefill stalls push TPOT past the target
    assert smooth.verdict.decision == "DPD pays off"
    point = smooth.predictions[0]
    assert point.colocated.attainment(2.0, 0.015) < 0.5 < point.disaggregated.attainment(2.0, 0.015)
    # WHEN a fast first token is the target (TTFT <= 250 ms)
    snappy = _plan(4096, 256, 16, Slo(ttft_s=0.25), **reference)
    # THEN colocated serving wins: one node, no queue in front of a separate prefiller
    assert snappy.verdict.decision == "stay colocated"
    assert snappy.verdict.reasons[0] == "SLO TTFT <= 250 ms"
    # AND without an SLO throughput per node decides: one colocated node beats two DPD nodes
    assert _plan(4096, 256, 16, **reference).verdict.decision == "stay colocated"


def test_an_unreachable_slo_says_so() -> None:
    plan = _plan(16000, 512, 32, Slo(ttft_s=0.05))
    assert plan.verdict.decision == "stay colocated"
    assert "neither layout serves requests within the SLO" in plan.verdict.reasons[1]


def test_without_an_slo_a_verdict_that_costs_more_ttft_than_it_gains_is_no_win() -> None:
    # GIVEN 32k-token summarization prompts with 1k outputs at concurrency 12, and no SLO
    plan = _plan(32768, 1024, 12)
    colocated, dpd = plan.predictions[0].colocated, plan.predictions[0].disaggregated
    # WHEN DPD serves a few percent more per node (past the 5% margin) but its TTFT P99 more than doubles
    assert 0.05 < (plan.verdict.gain or 0.0) < 1.0 < dpd.ttft_p99_s / colocated.ttft_p99_s - 1
    # THEN the verdict does not call DPD a win, and names the trade with both figures
    assert plan.verdict.decision == "stay colocated"
    trade = plan.verdict.trade
    assert trade is not None and (trade.metric, trade.quantile, trade.load) == ("ttft", "p99", 12)
    assert trade.disaggregated_s == dpd.ttft_p99_s and trade.colocated_s == colocated.ttft_p99_s
    assert plan.verdict.reasons[1].startswith("DPD trades TTFT for its gains")
    assert "give --ttft-slo-ms to weigh the trade" in plan.verdict.reasons[1]
    # AND the JSON names the trade
    data = plan_dict(plan)["verdict"]
    assert data["latency_trade"]["metric"] == "ttft_p99_ms" and data["latency_trade"]["concurrency"] == 12
    assert data["latency_trade"]["change"] > data["goodput_gain_per_node"] > 0


def test_an_slo_on_the_traded_latency_lets_goodput_decide() -> None:
    # GIVEN the same summarization workload with a TTFT target that DPD's tail still meets
    plan = _plan(32768, 1024, 12, Slo(ttft_s=30.0))
    # THEN TTFT is weighed by the SLO (every request within it), TPOT (open) is no worse, and goodput decides
    point = plan.predictions[0]
    assert point.disaggregated.attainment(30.0, None) == 1.0
    assert point.disaggregated.tpot_p99_s < point.colocated.tpot_p99_s
    assert plan.verdict.trade is None and plan.verdict.decision == "DPD pays off"


def test_a_tight_ttft_slo_on_the_reference_case_stays_colocated_at_every_published_concurrency() -> None:
    # GIVEN the AWS reference case (4,096 in / 256 out, concurrency 8-32, 1 prefill + 1 decode against one node)
    workload = Workload(inputs=LengthDistribution.fixed(4096), outputs=LengthDistribution.fixed(256),
                        concurrency=(8, 16, 32))
    plan = make_plan(model=MODELS["Llama-3.3-70B"], instance=P5, workload=workload, slo=Slo(ttft_s=0.25),
                     prefill_nodes=1, decode_nodes=1, baseline_nodes=1)
    # THEN a 250 ms first-token target keeps every prompt colocated, and the verdict says why
    assert plan.verdict.decision == "stay colocated"
    assert plan.verdict.reasons[0].startswith("disaggregating no prompt serves the most within the SLO")
    default = next(c for c in plan.recommendation.threshold_candidates if c.threshold == 4096)
    assert default.remote_share == 1.0 and plan.operating[0].per_node > default.goodput_per_node
