"""Latency distributions behind the percentiles: closed forms, evaluated once per predicted point (no simulation).

* **Waiting plus service** (TTFT): a mixture over prompt classes of ``shift + W``, where ``W`` is the wait of an
  M/G/1 queue with utilisation rho and mean wait ``Wq``. Its tail is the exponential approximation
  ``P(W > t) = rho exp(-rho t / Wq)`` (exact for M/M/1; Kingman's heavy-traffic form; Kleinrock, *Queueing Systems*
  vol. 2, section 2.10), so ``P(W = 0) = 1 - rho``. In a closed loop of C users at most C - 1 requests can be ahead,
  so the wait is capped at ``(C - 1) x mean service / servers``.
* **Stalled decoding** (TPOT): a request decoding ``D`` tokens meets a Poisson number of interruptions (local prefill
  chunks, KV joins) while it decodes; its mean time per output token is ``step + sum(stalls) / D``, a compound Poisson
  sum, taken as normal with the compound Poisson mean and variance, floored at one bare step.
* **End to end**: per output class, normal with the TTFT and decode means and variances added (independent parts).
* **Inter-token gaps** (ITL): a gap is one bare step, or a step an interruption lengthened. ``rate x TPOT`` of the
  steps carry one (events per second over steps per second), so while that share is at most a half the median gap is
  the bare step; above it, the bare step plus the interruptions' mean size.

Quantiles of the mixtures are found by bisection on their CDFs (a few dozen evaluations of ``exp`` or ``erf``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

_BISECTION_STEPS = 48


def _quantile(cdf: Callable[[float], float], p: float, low: float, high: float) -> float:
    """Smallest t with cdf(t) >= p, between ``low`` (cdf < p) and a ``high`` that is grown until cdf >= p."""
    for _ in range(64):
        if cdf(high) >= p:
            break
        high = high * 2 if high > 0 else 1.0
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2
        if cdf(middle) >= p:
            high = middle
        else:
            low = middle
        if high - low <= 1e-9 * max(1.0, high):
            break
    return high


def _normal_cdf(x: float, mean: float, sd: float) -> float:
    if sd <= 0:
        return 1.0 if x >= mean else 0.0
    return 0.5 * (1.0 + math.erf((x - mean) / (sd * math.sqrt(2.0))))


@dataclass(frozen=True)
class QueueDelay:
    """Mixture of ``shift + min(W, cap)`` parts: (weight, shift_s, rho, mean_wait_s, cap_s); weights sum to 1."""

    parts: tuple[tuple[float, float, float, float, float], ...]

    def cdf(self, t: float) -> float:
        total = 0.0
        for weight, shift, rho, wait, cap in self.parts:
            if t < shift:
                continue
            if rho <= 0 or wait <= 0 or t - shift >= cap:
                total += weight
            else:
                total += weight * (1.0 - rho * math.exp(-rho * (t - shift) / wait))
        return total

    def quantile(self, p: float) -> float:
        low = min(part[1] for part in self.parts)
        high = max(shift + min(cap, 10 * wait) for _, shift, _, wait, cap in self.parts)
        return _quantile(self.cdf, p, max(0.0, low - 1e-12), high)

    def _moments(self) -> tuple[float, float]:
        first = second = 0.0
        for weight, shift, rho, wait, cap in self.parts:
            mean_w = second_w = 0.0
            if rho > 0 and wait > 0:
                scale = wait / rho  # the exponential part's mean; E[min(X, cap)] and E[min(X, cap)^2]
                tail = math.exp(-cap / scale) if math.isfinite(cap) else 0.0
                mean_w = rho * scale * (1 - tail)
                second_w = rho * 2 * scale * scale * (1 - tail * (1 + (cap / scale if math.isfinite(cap) else 0)))
            first += weight * (shift + mean_w)
            second += weight * (shift * shift + 2 * shift * mean_w + second_w)
        return first, second

    @property
    def mean(self) -> float:
        return self._moments()[0]

    @property
    def variance(self) -> float:
        first, second = self._moments()
        return max(0.0, second - first * first)


@dataclass(frozen=True)
class Normals:
    """Mixture of normals (weight, mean, sd), floored at ``floor``."""

    parts: tuple[tuple[float, float, float], ...]
    floor: float = 0.0

    def cdf(self, t: float) -> float:
        if t < self.floor:
            return 0.0
        return sum(w * _normal_cdf(t, mean, sd) for w, mean, sd in self.parts)

    def quantile(self, p: float) -> float:
        high = max(mean + 6 * sd for _, mean, sd in self.parts)
        low = min(mean - 6 * sd for _, mean, sd in self.parts)
        return max(self.floor, _quantile(self.cdf, p, min(low, self.floor) - 1e-12, max(high, self.floor)))


@dataclass(frozen=True)
class Stalls:
    """Interruptions a decoding stream sees: Poisson events at ``rate`` per second with mean size ``mean_s`` and
    second moment ``second_s2`` (the extra time each adds to the step it lands in)."""

    rate: float = 0.0
    mean_s: float = 0.0
    second_s2: float = 0.0

    def tpot(self, *, step: float, tpot: float, outputs: tuple[tuple[int, float], ...]) -> Normals:
        """Per-request TPOT over output classes: ``D = output - 1`` steps each; mean ``tpot`` for every class."""
        parts = []
        for tokens, weight in outputs:
            steps = max(1, tokens - 1)
            variance = self.rate * tpot * self.second_s2 / steps  # m E[s^2] / D^2 with m = rate x D x tpot
            parts.append((weight, tpot, math.sqrt(max(0.0, variance))))
        return Normals(tuple(parts), floor=step)

    def median_gap(self, *, step: float, tpot: float) -> float:
        """The median gap between two tokens of a stream (``step``: a bare decode step)."""
        return step if self.rate * tpot <= 0.5 else step + self.mean_s


@dataclass(frozen=True)
class Spread:
    """The distributions of one predicted point, for percentiles and SLO attainment."""

    ttft: QueueDelay
    tpot: Normals
    outputs: tuple[tuple[int, float], ...]
    itl_p50: float = 0.0  # the median gap between tokens (Stalls.median_gap)

    def e2e(self) -> Normals:
        ttft_mean, ttft_var = self.ttft.mean, self.ttft.variance
        parts = []
        for (tokens, weight), (_, tpot_mean, tpot_sd) in zip(self.outputs, self.tpot.parts, strict=True):
            steps = max(1, tokens - 1)
            parts.append((weight, ttft_mean + steps * tpot_mean, math.sqrt(ttft_var + (steps * tpot_sd) ** 2)))
        return Normals(tuple(parts), floor=min(part[1] for part in self.ttft.parts) + self.tpot.floor)

    def attainment(self, ttft_slo_s: float | None, tpot_slo_s: float | None) -> float:
        """Share of requests meeting both SLOs (None: no limit), taking TTFT and TPOT as independent."""
        share = 1.0
        if ttft_slo_s is not None:
            share *= self.ttft.cdf(ttft_slo_s)
        if tpot_slo_s is not None:
            share *= self.tpot.cdf(tpot_slo_s)
        return max(0.0, min(1.0, share))
