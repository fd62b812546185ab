"""The verdict: which layout serves more requests within the user's SLA per node (and so per dollar).

Goodput (DistServe, OSDI'24) is the request rate that meets both the TTFT and the TPOT target: ``rate x share of
requests within both``. Each mode's best goodput over the predicted loads is compared per node; with one instance
type for every role that is also per dollar. DPD pays off when it beats colocated serving by ``GOODPUT_MARGIN``.
Without an SLO every request counts, and goodput is plain throughput.

Goodput only weighs the latencies an SLO names. For a latency the SLO leaves open (TTFT, TPOT, or both when no SLO is
given), DPD must not buy its goodput with it: when DPD's P50 or P99 of that latency, at any requested load, is worse
than colocated serving's by more (relatively) than DPD's goodput gain, the verdict names the trade and does not call
DPD a win. The user can weigh the trade by giving the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hyperpod_dpd.planner.serving import Point
from hyperpod_dpd.planner.threshold import Candidate

GOODPUT_MARGIN = 0.05  # DPD must serve 5% more requests within SLO per node to be worth its moving parts


@dataclass(frozen=True)
class Slo:
    """Service-level objectives on TTFT and TPOT in seconds; ``None`` is no limit."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    @property
    def given(self) -> bool:
        return self.ttft_s is not None or self.tpot_s is not None

    def describe(self) -> str:
        if not self.given:
            return "no SLO given: every request counts, goodput is throughput"
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT <= {self.ttft_s * 1e3:,.0f} ms")
        if self.tpot_s is not None:
            parts.append(f"TPOT <= {self.tpot_s * 1e3:,.1f} ms")
        return "SLO " + " and ".join(parts)


@dataclass(frozen=True)
class OperatingPoint:
    """A mode's recommended load: the most goodput among loads where at least ``target`` of requests meet the SLO,
    else the most goodput at all."""

    index: int
    load: float
    goodput_rps: float
    attainment: float
    meets_target: bool
    nodes: int

    @property
    def per_node(self) -> float:
        return self.goodput_rps / self.nodes


def operating_point(loads: Sequence[float], points: Sequence[Point], slo: Slo, *, nodes: int,
                    target: float) -> OperatingPoint:
    scored = [(p.goodput(slo.ttft_s, slo.tpot_s), p.attainment(slo.ttft_s, slo.tpot_s)) for p in points]
    meeting = [i for i, (_, share) in enumerate(scored) if share >= target]
    pool = meeting or list(range(len(points)))
    best = max(pool, key=lambda i: (scored[i][0], -i))
    return OperatingPoint(index=best, load=loads[best], goodput_rps=scored[best][0], attainment=scored[best][1],
                          meets_target=bool(meeting), nodes=nodes)


@dataclass(frozen=True, kw_only=True)
class Trade:
    """The worst latency DPD gives up at a requested load: a P50 or P99 of TTFT or TPOT the SLO leaves open."""

    metric: str  # "ttft" or "tpot"
    quantile: str  # "p50" or "p99"
    load: float
    colocated_s: float
    disaggregated_s: float

    @property
    def change(self) -> float:
        return self.disaggregated_s / self.colocated_s - 1


@dataclass(frozen=True)
class Verdict:
    pays_off: bool
    reasons: tuple[str, ...]
    gain: float | None = None  # DPD's goodput per node over colocated serving's, minus 1 (None: not comparable)
    trade: Trade | None = None  # the worst open latency DPD costs, when it costs more than it gains

    @property
    def decision(self) -> str:
        return "DPD pays off" if self.pays_off else "stay colocated"


def _ms(seconds: float) -> str:
    return "saturated" if math.isinf(seconds) else f"{seconds * 1e3:,.1f} ms"


def describe_point(point: Point, slo: Slo) -> str:
    if point.saturated:
        return "saturates"
    return (f"{point.request_rate:.2f} req/s, {point.attainment(slo.ttft_s, slo.tpot_s):.0%} within SLO "
            f"(goodput {point.goodput(slo.ttft_s, slo.tpot_s):.2f}), TTFT P50/P99 {_ms(point.ttft_p50_s)} / "
            f"{_ms(point.ttft_p99_s)}, TPOT P50/P99 {_ms(point.tpot_p50_s)} / {_ms(point.tpot_p99_s)}")


def _open_changes(loads: Sequence[float], pairs: Sequence[tuple[Point, Point]], slo: Slo) -> list[Trade]:
    """Every P50 and P99 of a latency the SLO leaves open, colocated against DPD, at each requested load where
    neither mode saturates."""
    metrics = [m for m, limit in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s)) if limit is None]
    out = []
    for load, (c, d) in zip(loads, pairs, strict=True):
        if c.saturated or d.saturated:
            continue
        for metric in metrics:
            for quantile in ("p50", "p99"):
                before, after = getattr(c, f"{metric}_{quantile}_s"), getattr(d, f"{metric}_{quantile}_s")
                if 0 < before < math.inf and 0 < after < math.inf:
                    out.append(Trade(metric=metric, quantile=quantile, load=load, colocated_s=before,
                                     disaggregated_s=after))
    return out


def worst_trade(loads: Sequence[float], pairs: Sequence[tuple[Point, Point]], slo: Slo) -> Trade | None:
    """The largest relative increase of an open latency from colocated serving to DPD; ``None`` when DPD is no
    slower in any of them."""
    slower = [t for t in _open_changes(loads, pairs, slo) if t.change > 0]
    return max(slower, key=lambda t: t.change, default=None)


def best_improvement(loads: Sequence[float], pairs: Sequence[tuple[Point, Point]], slo: Slo) -> Trade | None:
    """The open latency DPD improves most, measured the same way round as a cost (colocated / DPD - 1), so that
    halving a latency weighs as much as doubling one."""
    faster = [t for t in _open_changes(loads, pairs, slo) if t.change < 0]
    return max(faster, key=lambda t: t.colocated_s / t.disaggregated_s, default=None)


_NAMES = {"ttft": "TTFT", "tpot": "TPOT"}
_FLAGS = {"ttft": "--ttft-slo-ms", "tpot": "--tpot-slo-ms"}


def _describe_change(t: Trade, load_name: str) -> str:
    return (f"{_NAMES[t.metric]} {t.quantile.upper()} {_ms(t.disaggregated_s)} against {_ms(t.colocated_s)} "
            f"colocated at {load_name} {t.load:g} ({t.change:+.0%})")


def verdict(*, loads: Sequence[float], pairs: Sequence[tuple[Point, Point]], colocated: OperatingPoint,
            disaggregated: OperatingPoint, slo: Slo, remote_share: float, threshold: int, load_name: str,
            colocated_label: str, dpd_label: str, context: Sequence[str] = (),
            rejected: Candidate | None = None) -> Verdict:
    """DPD pays off when its best goodput per node beats colocated serving's by ``GOODPUT_MARGIN``.

    ``rejected`` is the default threshold's candidate when the threshold search chose to disaggregate nothing."""
    if remote_share <= 0:
        if rejected is not None and rejected.remote_share > 0:
            head = (f"disaggregating no prompt serves the most within the SLO ({slo.describe()}): at the default "
                    f"routing threshold ({rejected.threshold:,} tokens) {rejected.remote_share:.0%} of prompts would "
                    f"disaggregate and DPD would serve {rejected.goodput_per_node:.3f} req/s within SLO per node, "
                    "less than keeping every prompt on one engine (threshold_candidates)")
        else:
            head = (f"no prompt reaches the routing threshold ({threshold:,} tokens): every request would be "
                    "prefilled and decoded by the single decoder while the prefill nodes idle")
        return Verdict(False, (head, *context))
    colo, dpd = colocated.per_node, disaggregated.per_node
    gain = math.inf
    if colo <= 0 and dpd <= 0:
        pays, head = False, (f"neither layout serves requests within the SLO at these loads ({slo.describe()}); "
                             "loosen the SLO or lower the load")
    else:
        pays = dpd > colo * (1 + GOODPUT_MARGIN)
        gain = dpd / colo - 1 if colo > 0 else math.inf
        change = f"{gain:+.0%}" if colo > 0 else "from none"
        head = (f"best goodput per node: colocated {colo:.3f} req/s ({colocated_label}, {load_name} "
                f"{colocated.load:g}) vs DPD {dpd:.3f} req/s ({dpd_label}, {load_name} {disaggregated.load:g}), "
                f"{change}; DPD must win by {GOODPUT_MARGIN:.0%} on the same nodes and budget")
    reasons = [slo.describe(), head]
    trade = worst_trade(loads, pairs, slo) if pays else None
    better = best_improvement(loads, pairs, slo) if pays else None
    # the gain: more goodput per node, or the open latency DPD shortens most, whichever is larger
    benefit = max(gain, better.colocated_s / better.disaggregated_s - 1 if better is not None else -math.inf)
    if trade is not None and trade.change > benefit:
        pays = False
        name = _NAMES[trade.metric]
        gains = f"{change} goodput per node"
        if better is not None:
            gains += f" and {_describe_change(better, load_name)}"
        reasons.insert(1, (
            f"DPD trades {name} for its gains: {gains}, but {_describe_change(trade, load_name)}, a larger cost than "
            f"any gain; that is no win while no SLO bounds {name} (give {_FLAGS[trade.metric]} to weigh the trade)"))
    else:
        trade = None
    for load, (c, d) in zip(loads, pairs, strict=True):
        reasons.append(f"{load_name} {load:g}: colocated {describe_point(c, slo)}; DPD {describe_point(d, slo)}")
    reasons.extend(context)
    return Verdict(pays, tuple(reasons), gain=None if colo <= 0 else gain, trade=trade)
