"""The verdict follows the SLA: goodput (requests within both SLOs) per node, best colocated vs best DPD layout."""

from __future__ import annotations

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import Plan, make_plan
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

P5 = instance("ml.p5.48xlarge")


def _plan(inputs: int, outputs: int, users: int, slo: Slo = Slo(), **layout: int) -> Plan:
    workload = Workload(inputs=LengthDistribution.fixed(inputs), outputs=LengthDistribution.fixed(outputs),
                        concurrency=(users,))
    return make_plan(model=MODELS["Llama-3.3-70B"], instance=P5, workload=workload, slo=slo, **layout)


def test_long_prompts_at_high_concurrency_disaggregate() -> None:
    # WHEN 16,000-token prompts with 512-token outputs are served to 32 users on p5
    plan = _plan(16000, 512, 32)
    # THEN DPD pays off: 2 prefill + 1 decode serve more requests per node than 3 colocated nodes
    assert plan.verdict.decision == "DPD pays off"
    assert (plan.layout.prefill_nodes, plan.layout.decode_nodes, plan.layout.baseline_nodes) == (2, 1, 3)
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
