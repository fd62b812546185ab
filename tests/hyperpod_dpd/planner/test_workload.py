"""Workload parsing and the statistics the serving model reads from it."""

from __future__ import annotations

import pytest

from hyperpod_dpd.planner.workload import LengthDistribution, Workload, parse_counts, parse_rates


def test_a_single_length_is_a_fixed_distribution() -> None:
    fixed = LengthDistribution.parse("8192")
    assert fixed.points == ((8192, 1.0),)
    assert (fixed.mean, fixed.maximum, fixed.describe()) == (8192, 8192, "8192")


def test_weighted_lengths_are_normalised_and_merged() -> None:
    # GIVEN three short prompts for every long one, with the short length given twice
    mixed = LengthDistribution.parse("2048:2, 8192:1, 2048:1")
    # THEN the weights become probabilities of 3/4 and 1/4
    assert mixed.points == ((2048, 0.75), (8192, 0.25))
    assert mixed.mean == pytest.approx(0.75 * 2048 + 0.25 * 8192)
    assert mixed.second_moment == pytest.approx(0.75 * 2048**2 + 0.25 * 8192**2)
    assert mixed.share_at_least(4096) == pytest.approx(0.25)


def test_unweighted_lengths_are_equally_likely() -> None:
    assert LengthDistribution.parse("1024,4096").points == ((1024, 0.5), (4096, 0.5))


@pytest.mark.parametrize(("text", "message"), [
    ("0", "lengths must be at least 1 token, got 0"),
    ("-5", "lengths must be at least 1 token, got -5"),
    ("many", "expected N, N,M or N:weight,M:weight"),
    ("1024:0", "weights must be positive, got 0"),
    ("1.5", "expected N, N,M or N:weight,M:weight"),
])
def test_bad_lengths_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LengthDistribution.parse(text)


def test_decode_context_weights_long_outputs_by_their_decode_time() -> None:
    # GIVEN 8,192-token prompts and 512-token outputs
    workload = Workload(inputs=LengthDistribution.fixed(8192), outputs=LengthDistribution.fixed(512),
                        concurrency=(8,))
    # THEN a decoding request has on average its prompt plus half its output cached
    assert workload.decode_context == 8192 + 256
    assert workload.peak_tokens == 8704
    # AND with outputs of 100 or 900 tokens, the long ones weigh nine times more: E[O^2] / (2 E[O]) = 410
    mixed = Workload(inputs=LengthDistribution.fixed(1000), outputs=LengthDistribution.parse("100,900"),
                     concurrency=(8,))
    assert mixed.decode_context == pytest.approx(1000 + (0.5 * 100**2 + 0.5 * 900**2) / (2 * 500))


def test_a_workload_takes_concurrency_or_rates_but_not_both() -> None:
    lengths = LengthDistribution.fixed(100)
    assert Workload(inputs=lengths, outputs=lengths, concurrency=(1, 2)).loads == (1.0, 2.0)
    assert Workload(inputs=lengths, outputs=lengths, request_rates=(0.5,)).closed_loop is False
    with pytest.raises(ValueError, match="either concurrency levels or request rates"):
        Workload(inputs=lengths, outputs=lengths)
    with pytest.raises(ValueError, match="either concurrency levels or request rates"):
        Workload(inputs=lengths, outputs=lengths, concurrency=(1,), request_rates=(1.0,))


def test_outputs_need_two_tokens_for_a_time_per_output_token() -> None:
    with pytest.raises(ValueError, match="output lengths must be at least 2 tokens"):
        Workload(inputs=LengthDistribution.fixed(100), outputs=LengthDistribution.parse("1:1,512:1"),
                 concurrency=(4,))


def test_counts_are_sorted_and_deduplicated() -> None:
    assert parse_counts("32,8,16,8") == (8, 16, 32)
    with pytest.raises(ValueError, match="at least 1"):
        parse_counts("8,0")
    with pytest.raises(ValueError, match="whole numbers"):
        parse_counts("8,x")


def test_rates_are_positive_and_finite() -> None:
    assert parse_rates("2,0.5") == (0.5, 2.0)
    for bad in ("0", "-1", "inf", "nan"):
        with pytest.raises(ValueError):
            parse_rates(bad)


def test_a_mean_and_spread_become_seven_log_normal_lengths() -> None:
    spread = LengthDistribution.parse("4096~2048")
    assert len(spread.points) == 7 and all(p == pytest.approx(1 / 7) for _, p in spread.points)
    assert spread.points[0][0] == 1834 and spread.points[-1][0] == 7320
    assert spread.mean == pytest.approx(4096, rel=0.05)
    assert spread.describe() == "4096~2048"
    assert LengthDistribution.parse("512~0").points == ((512, 1.0),)


def test_percentiles_become_steps_up_to_each_percentile() -> None:
    marks = LengthDistribution.parse("p50=2000,p90=8000,p99=16000")
    assert marks.points == ((2000, 0.5), (8000, 0.4), (16000, pytest.approx(0.1)))
    with pytest.raises(ValueError, match="must not fall"):
        LengthDistribution.parse("p50=8000,p90=2000")
    with pytest.raises(ValueError, match="expected percentiles"):
        LengthDistribution.parse("p50=2000,q90=3")


def test_a_prefix_hit_rate_is_a_fraction_below_one() -> None:
    lengths = LengthDistribution.fixed(100)
    assert Workload(inputs=lengths, outputs=lengths, concurrency=(1,), prefix_hit_rate=0.5).prefix_hit_rate == 0.5
    with pytest.raises(ValueError, match="prefix hit rate"):
        Workload(inputs=lengths, outputs=lengths, concurrency=(1,), prefix_hit_rate=1.0)
