"""The verdict: which layout serves more requests within the user's SLA per node (and so per dollar).

Goodput (DistServe, OSDI'24) is the request rate that meets both the TTFT and the TPOT target: ``rate x share of
requests within both``. Each mode's best goodput over the predicted loads is compared per node; with one instance
type for every role that is also per dollar. DPD pays off when it beats colocated serving by ``GOODPUT_MARGIN``.
Without an SLO every request counts, and goodput is plain throughput.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hyperpod_dpd.planner.serving import Point

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


@dataclass(frozen=True)
class Verdict:
    pays_off: bool
    reasons: tuple[str, ...]

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


def verdict(*, loads: Sequence[float], pairs: Sequence[tuple[Point, Point]], colocated: OperatingPoint,
            disaggregated: OperatingPoint, slo: Slo, remote_share: float, threshold: int, load_name: str,
            colocated_label: str, dpd_label: str, context: Sequence[str] = ()) -> Verdict:
    """DPD pays off when its best goodput per node beats colocated serving's by ``GOODPUT_MARGIN``."""
    if remote_share <= 0:
        return Verdict(False, (f"no prompt reaches the routing threshold ({threshold:,} tokens): every request would "
                               "be prefilled and decoded by the single decoder while the prefill nodes idle",
                               *context))
    colo, dpd = colocated.per_node, disaggregated.per_node
    if colo <= 0 and dpd <= 0:
        pays, head = False, (f"neither layout serves requests within the SLO at these loads ({slo.describe()}); "
                             "loosen the SLO or lower the load")
    else:
        pays = dpd > colo * (1 + GOODPUT_MARGIN)
        change = f"{dpd / colo - 1:+.0%}" if colo > 0 else "from none"
        head = (f"best goodput per node: colocated {colo:.3f} req/s ({colocated_label}, {load_name} "
                f"{colocated.load:g}) vs DPD {dpd:.3f} req/s ({dpd_label}, {load_name} {disaggregated.load:g}), "
                f"{change}; DPD must win by {GOODPUT_MARGIN:.0%} on the same nodes and budget")
    reasons = [slo.describe(), head]
    for load, (c, d) in zip(loads, pairs, strict=True):
        reasons.append(f"{load_name} {load:g}: colocated {describe_point(c, slo)}; DPD {describe_point(d, slo)}")
    reasons.extend(context)
    return Verdict(pays, tuple(reasons))
