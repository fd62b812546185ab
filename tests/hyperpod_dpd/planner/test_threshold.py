"""The routing threshold comes from the workload's length distribution, keeps 4096 without a clear gain, and has no
cliff: every value between two lengths routes the same prompts."""

from __future__ import annotations

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import make_plan
from hyperpod_dpd.planner.threshold import Candidate, candidate_thresholds, choose
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import LengthDistribution, Workload


def test_candidates_are_the_distinct_routing_sets() -> None:
    # GIVEN prompts of exactly 4,096 tokens: "all disaggregate" (the default routes them so) or "none" (above 4,096)
    assert candidate_thresholds([4096], 4096) == [4096, 4352]
    # AND short prompts: "all" at a round number at or below 512, or "none" at the default
    assert candidate_thresholds([512], 4096) == [512, 4096]
    # AND a mix: one candidate per length, round numbers just above the shorter neighbour
    assert candidate_thresholds([1000, 3000, 9000], 4096) == [768, 2816, 4096, 9216]


def _candidate(threshold: int, goodput: float) -> Candidate:
    return Candidate(threshold, 1.0, 1, goodput, False)


def test_the_default_stays_without_a_ten_percent_gain() -> None:
    scores = {768: 1.05, 2816: 1.08, 4096: 1.0, 9216: 0.5}
    choice = choose([1000, 3000, 9000], 4096, lambda t: _candidate(t, scores[t]), load_label="concurrency 32")
    assert choice.chosen.threshold == 4096
    assert "changes goodput per node by +8%" in choice.reasons[0] and "a change needs +10%" in choice.reasons[0]
    # WHEN one candidate clearly wins THEN it is chosen, with the reason
    scores[2816] = 1.2
    choice = choose([1000, 3000, 9000], 4096, lambda t: _candidate(t, scores[t]), load_label="concurrency 32")
    assert choice.chosen.threshold == 2816 and choice.reasons[0].startswith("lower routing_threshold to 2,816")


@pytest.mark.parametrize("name", ["ml.p5.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge"])
def test_prompts_of_4096_tokens_keep_4096_on_every_instance(name: str) -> None:
    # GIVEN a workload whose prompts are all 4,096 tokens long
    workload = Workload(inputs=LengthDistribution.fixed(4096), outputs=LengthDistribution.fixed(512),
                        concurrency=(32,))
    plan = make_plan(model=MODELS["Llama-3.3-70B"], instance=instance(name), workload=workload)
    # THEN the threshold is the documented default everywhere (no jump to 1,536 or 384)
    assert plan.recommendation.routing_threshold == 4096
    assert any("routing_threshold 4096" in r for r in plan.recommendation.reasons)


def test_a_spread_of_prompt_lengths_is_planned_class_by_class() -> None:
    # GIVEN prompts of 4,096 +- 2,048 tokens (seven log-normal classes from 1,834 to 7,320)
    workload = Workload(inputs=LengthDistribution.parse("4096~2048"), outputs=LengthDistribution.fixed(512),
                        concurrency=(32,))
    plan = make_plan(model=MODELS["Llama-3.3-70B"], instance=instance("ml.p5.48xlarge"), workload=workload,
                     slo=Slo(ttft_s=2.0, tpot_s=0.03))
    candidates = plan.recommendation.threshold_candidates
    # THEN every routing set was planned with its own prefill pool, and the chosen one is reported with a reason
    assert len(candidates) == 8
    assert {c.threshold for c in candidates} >= {4096}
    assert plan.recommendation.routing_threshold in {c.threshold for c in candidates}
    assert any("routing_threshold" in r for r in plan.recommendation.reasons)
