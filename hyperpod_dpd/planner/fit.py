"""Refit the calibrated constants to their calibration rows (``fit()`` returns the refitted ``Calibration``).

Each constant has exactly one calibration row (``measurements.py``); the constants interact (the prefill efficiency
changes the Dynamo transfer residual, the overlap loss changes every roofline fit), so they are fitted in turn,
each by bisection on its own row, for a few rounds until none moves. ``calibration.py`` holds the rounded result.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.measurements import predict, published_value


@dataclass(frozen=True, kw_only=True)
class Fit:
    constant: str
    row: str
    low: float
    high: float


FITS: tuple[Fit, ...] = (
    Fit(constant="hbm_efficiency", row="nim-itl-500-c1", low=0.2, high=1.0),
    Fit(constant="low_precision_efficiency", row="nim-ttft-5000-c1", low=0.2, high=1.0),
    Fit(constant="prefill_efficiency", row="dynamo-ttft-aggregated", low=0.2, high=1.0),
    Fit(constant="overlap_loss", row="trtllm-llama-3.1-8b-h200-tp1-128-2048", low=0.0, high=1.0),
    Fit(constant="join_s_per_block", row="dynamo-itl-disaggregated", low=0.0, high=2e-3),
    Fit(constant="transfer_fixed_s", row="dynamo-ttft-disaggregated", low=0.0, high=0.1),
)


def _solve(fit: Fit, calibration: Calibration, steps: int = 40) -> float:
    target = published_value(fit.row)

    def gap(value: float) -> float:
        return predict(fit.row, calibration.with_overrides(**{fit.constant: value})) - target

    low, high = fit.low, fit.high
    g_low = gap(low)
    if (g_low > 0) == (gap(high) > 0):  # no crossing in range: keep the better end
        return low if abs(g_low) < abs(gap(high)) else high
    for _ in range(steps):
        middle = (low + high) / 2
        if (gap(middle) > 0) == (g_low > 0):
            low, g_low = middle, gap(middle)
        else:
            high = middle
    return (low + high) / 2


def fit(calibration: Calibration = DEFAULT_CALIBRATION, rounds: int = 4) -> Calibration:
    """Every constant of ``FITS`` solved on its row, in turn, ``rounds`` times."""
    current = calibration
    for _ in range(rounds):
        for one in FITS:
            current = current.with_overrides(**{one.constant: _solve(one, current)})
    return current
