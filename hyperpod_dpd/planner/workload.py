"""What is served: prompt and output length distributions, and the load as concurrency or request rate."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from statistics import NormalDist

STARTS = ("steady", "together")
SPREAD_POINTS = 7  # a mean~spread distribution is represented by this many equally likely lengths
_PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)=(\d+)")


@dataclass(frozen=True)
class LengthDistribution:
    """A discrete distribution of token counts: ``points`` are (tokens, probability), probabilities sum to 1."""

    points: tuple[tuple[int, float], ...]
    text: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("needs at least one length")
        for tokens, probability in self.points:
            if tokens < 1:
                raise ValueError(f"lengths must be at least 1 token, got {tokens}")
            if probability <= 0:
                raise ValueError(f"weights must be positive, got {probability}")
        if abs(sum(p for _, p in self.points) - 1.0) > 1e-9:
            raise ValueError("probabilities must sum to 1")

    @classmethod
    def fixed(cls, tokens: int) -> LengthDistribution:
        return cls(((tokens, 1.0),))

    @classmethod
    def weighted(cls, pairs: list[tuple[int, float]]) -> LengthDistribution:
        """Merge equal lengths and normalise the weights."""
        merged: dict[int, float] = {}
        for tokens, weight in pairs:
            if weight <= 0:
                raise ValueError(f"weights must be positive, got {weight:g}")
            merged[tokens] = merged.get(tokens, 0.0) + weight
        total = sum(merged.values())
        return cls(tuple((t, w / total) for t, w in sorted(merged.items())))

    @classmethod
    def spread(cls, mean: float, sd: float) -> LengthDistribution:
        """A log-normal with this mean and standard deviation, as ``SPREAD_POINTS`` equally likely lengths (the
        midpoint quantiles), so prompt lengths stay positive and skew long as real traffic does."""
        if mean < 1 or sd < 0:
            raise ValueError("a spread needs a mean of at least 1 token and a non-negative spread")
        if sd == 0:
            return cls.fixed(round(mean))
        sigma2 = math.log(1 + (sd / mean) ** 2)
        mu, sigma = math.log(mean) - sigma2 / 2, math.sqrt(sigma2)
        unit = NormalDist()
        lengths = [max(1, round(math.exp(mu + sigma * unit.inv_cdf((i + 0.5) / SPREAD_POINTS))))
                   for i in range(SPREAD_POINTS)]
        return cls.weighted([(n, 1.0) for n in lengths])

    @classmethod
    def percentiles(cls, marks: list[tuple[float, int]]) -> LengthDistribution:
        """Lengths at given percentiles (``p50=2000,p90=8000,p99=16000``): each length stands for the requests
        between the previous percentile and its own, the last one also for those above it (a conservative step)."""
        marks = sorted(marks)
        if any(not 0 < p <= 100 for p, _ in marks):
            raise ValueError("percentiles must be between 0 and 100")
        if any(b[1] < a[1] for a, b in zip(marks, marks[1:], strict=False)):
            raise ValueError("lengths must not fall as the percentile rises")
        pairs, below = [], 0.0
        for index, (p, tokens) in enumerate(marks):
            top = 100.0 if index == len(marks) - 1 else p
            if top > below:
                pairs.append((tokens, top - below))
            below = top
        return cls.weighted(pairs)

    @classmethod
    def parse(cls, text: str) -> LengthDistribution:
        """``8192``, ``2048,8192`` (equally likely), ``2048:3,8192:1`` (weighted), ``4096~2048`` (mean~spread) or
        ``p50=2000,p90=8000,p99=16000`` (percentiles)."""
        return replace(cls._parse(text.strip()), text=text.strip())

    @classmethod
    def _parse(cls, text: str) -> LengthDistribution:
        if "~" in text:
            mean_text, _, sd_text = text.partition("~")
            try:
                mean, sd = float(mean_text), float(sd_text)
            except ValueError:
                raise ValueError("expected MEAN~SPREAD in tokens, e.g. 4096~2048") from None
            return cls.spread(mean, sd)
        if "=" in text:
            marks = []
            for item in text.split(","):
                match = _PERCENTILE.fullmatch(item.strip().lower())
                if not match:
                    raise ValueError("expected percentiles such as p50=2000,p90=8000,p99=16000")
                tokens = int(match.group(2))
                if tokens < 1:
                    raise ValueError(f"lengths must be at least 1 token, got {tokens}")
                marks.append((float(match.group(1)), tokens))
            return cls.percentiles(marks)
        pairs: list[tuple[int, float]] = []
        for item in text.split(","):
            tokens_text, _, weight_text = item.strip().partition(":")
            try:
                tokens = int(tokens_text)
                weight = float(weight_text) if weight_text else 1.0
            except ValueError:
                raise ValueError("expected N, N,M or N:weight,M:weight with whole token counts") from None
            if tokens < 1:
                raise ValueError(f"lengths must be at least 1 token, got {tokens}")
            pairs.append((tokens, weight))
        return cls.weighted(pairs)

    @property
    def mean(self) -> float:
        return sum(t * p for t, p in self.points)

    @property
    def second_moment(self) -> float:
        return sum(t * t * p for t, p in self.points)

    @property
    def maximum(self) -> int:
        return max(t for t, _ in self.points)

    def share_at_least(self, threshold: int) -> float:
        return sum(p for t, p in self.points if t >= threshold)

    def describe(self) -> str:
        if self.text:
            return self.text
        if len(self.points) == 1:
            return str(self.points[0][0])
        return ",".join(f"{t}:{p:.3g}" for t, p in self.points)


@dataclass(frozen=True)
class Workload:
    """Prompt and output lengths plus the loads to predict: closed-loop concurrencies or open-loop request rates."""

    inputs: LengthDistribution
    outputs: LengthDistribution
    concurrency: tuple[int, ...] = ()
    request_rates: tuple[float, ...] = ()
    prefix_hit_rate: float = 0.0  # share of prompt tokens served from the prefix cache
    offline: bool = False  # maximum-throughput run: the closed loop keeps ``concurrency`` requests in flight
    # "steady": users spread out (the steady state of a long run); "together": a benchmark's users all start at the
    # same instant with fixed lengths and stay in step (``lockstep``; colocated replicas only)
    start: str = "steady"

    def __post_init__(self) -> None:
        if not 0.0 <= self.prefix_hit_rate < 1.0:
            raise ValueError("the prefix hit rate must be at least 0 and below 1")
        if bool(self.concurrency) == bool(self.request_rates):
            raise ValueError("give either concurrency levels or request rates")
        if min(t for t, _ in self.outputs.points) < 2:
            raise ValueError("output lengths must be at least 2 tokens: TPOT is the time between output tokens")
        if self.offline and len(self.concurrency) != 1:
            raise ValueError("an offline run holds one number of requests in flight")
        if any(c < 1 for c in self.concurrency):
            raise ValueError("concurrency must be at least 1")
        if any(r <= 0 for r in self.request_rates):
            raise ValueError("request rates must be positive")
        if self.start not in STARTS:
            raise ValueError(f"start must be one of {', '.join(STARTS)}")
        if self.start == "together":
            if not self.concurrency or self.offline:
                raise ValueError("users that start together are a closed loop: give concurrency levels")
            if len(self.inputs.points) != 1 or len(self.outputs.points) != 1:
                raise ValueError("users stay in step only with fixed input and output lengths")
            if self.prefix_hit_rate:
                raise ValueError("a prefix hit rate is not modelled for users that start together")

    @property
    def closed_loop(self) -> bool:
        return bool(self.concurrency)

    @property
    def loads(self) -> tuple[float, ...]:
        return tuple(float(c) for c in self.concurrency) or self.request_rates

    @property
    def decode_context(self) -> float:
        """Mean context of a decoding request: its prompt plus, weighted by time spent decoding, half its output."""
        outputs = self.outputs
        return self.inputs.mean + outputs.second_moment / (2 * outputs.mean)

    @property
    def peak_tokens(self) -> int:
        """The longest request, prompt plus output: what ``max_model_len`` must admit."""
        return self.inputs.maximum + self.outputs.maximum


def parse_counts(text: str) -> tuple[int, ...]:
    """``8,16,32`` -> (8, 16, 32); positive whole numbers, sorted, duplicates dropped."""
    try:
        values = {int(v) for v in text.split(",") if v.strip()}
    except ValueError:
        raise ValueError("expected whole numbers separated by commas, e.g. 8,16,32") from None
    if not values:
        raise ValueError("expected at least one value")
    if min(values) < 1:
        raise ValueError("values must be at least 1")
    return tuple(sorted(values))


def parse_rates(text: str) -> tuple[float, ...]:
    """``0.5,1,2`` -> (0.5, 1.0, 2.0) requests per second."""
    try:
        values = {float(v) for v in text.split(",") if v.strip()}
    except ValueError:
        raise ValueError("expected numbers separated by commas, e.g. 0.5,1,2") from None
    if not values:
        raise ValueError("expected at least one value")
    if min(values) <= 0 or any(v != v or v == float("inf") for v in values):
        raise ValueError("rates must be positive and finite")
    return tuple(sorted(values))
