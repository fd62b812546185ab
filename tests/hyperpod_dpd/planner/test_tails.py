"""Latency distributions: the M/G/1 waiting tail, its closed-loop cap, compound-Poisson TPOT and SLO attainment."""

from __future__ import annotations

import math

import pytest

from hyperpod_dpd.planner.tails import Normals, QueueDelay, Spread, Stalls


def test_an_mm1_queue_has_its_exact_waiting_quantiles() -> None:
    # GIVEN an M/M/1 queue at 80% load with a 100 ms mean service: mean wait 400 ms, P(W > t) = 0.8 exp(-t / 0.5)
    delay = QueueDelay(((1.0, 0.1, 0.8, 0.4, math.inf),))
    # THEN its P99 is 0.1 + 0.5 ln(80) and 20% of requests do not wait at all
    assert delay.quantile(0.99) == pytest.approx(0.1 + 0.5 * math.log(80), rel=1e-6)
    assert delay.cdf(0.1) == pytest.approx(0.2)
    assert delay.quantile(0.1) == pytest.approx(0.1, abs=1e-9)
    assert delay.mean == pytest.approx(0.5)


def test_a_closed_loop_caps_the_wait() -> None:
    # GIVEN the same queue where at most 10 x 100 ms of work can be ahead
    capped = QueueDelay(((1.0, 0.1, 0.8, 0.4, 1.0),))
    # THEN no request waits longer than the cap
    assert capped.quantile(0.999) == pytest.approx(1.1, abs=1e-6)
    assert capped.variance < QueueDelay(((1.0, 0.1, 0.8, 0.4, math.inf),)).variance


def test_prompt_classes_mix_by_weight() -> None:
    # GIVEN three short unqueued prompts (50 ms) for every long one (400 ms)
    mix = QueueDelay(((0.75, 0.05, 0.0, 0.0, math.inf), (0.25, 0.4, 0.0, 0.0, math.inf)))
    assert mix.quantile(0.5) == pytest.approx(0.05, abs=1e-6)
    assert mix.quantile(0.99) == pytest.approx(0.4, abs=1e-6)


def test_stalls_spread_tpot_around_its_mean_and_not_below_a_bare_step() -> None:
    # GIVEN 2 stalls per second of 300 ms each, a 10 ms step and a 25 ms mean TPOT, over 100 and 1,000 output tokens
    stalls = Stalls(rate=2.0, mean_s=0.3, second_s2=0.09)
    short = stalls.tpot(step=0.010, tpot=0.025, outputs=((101, 1.0),))
    long = stalls.tpot(step=0.010, tpot=0.025, outputs=((1001, 1.0),))
    # THEN both have the mean TPOT as median, and the short requests spread wider: sd^2 = rate x TPOT x E[s^2] / D
    assert short.quantile(0.5) == pytest.approx(0.025, abs=1e-6)
    assert short.parts[0][2] == pytest.approx(math.sqrt(2.0 * 0.025 * 0.09 / 100))
    assert short.quantile(0.99) > long.quantile(0.99) > 0.025
    assert short.quantile(0.001) >= 0.010


def test_attainment_is_the_share_within_both_slos() -> None:
    spread = Spread(ttft=QueueDelay(((1.0, 0.2, 0.0, 0.0, math.inf),)),
                    tpot=Normals(((1.0, 0.02, 0.0),), floor=0.01), outputs=((256, 1.0),))
    assert spread.attainment(None, None) == 1.0
    assert spread.attainment(0.3, 0.025) == 1.0
    assert spread.attainment(0.1, None) == 0.0
    assert spread.attainment(None, 0.015) == 0.0
    e2e = spread.e2e()
    assert e2e.quantile(0.5) == pytest.approx(0.2 + 255 * 0.02, rel=1e-6)


@pytest.mark.parametrize(("rate", "expected"), [(0.0, 0.010), (20.0, 0.010), (24.0, 0.010), (40.0, 0.010 + 0.150)])
def test_the_median_gap_is_a_bare_step_until_most_steps_carry_an_interruption(rate: float, expected: float) -> None:
    # GIVEN a stream whose bare steps take 10 ms and whose mean gap is 20 ms, interrupted at ``rate`` per second by
    # stalls of 150 ms on average: rate x 20 ms of its steps carry one (0, 40%, 48%, 80%)
    stalls = Stalls(rate=rate, mean_s=0.150, second_s2=0.150**2)
    # THEN the median gap is the bare step while at most half the steps are interrupted, else the stalled step
    assert stalls.median_gap(step=0.010, tpot=0.020) == pytest.approx(expected)
