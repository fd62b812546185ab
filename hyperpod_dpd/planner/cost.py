"""Dollars: each layout's price per hour and per million output tokens at its recommended operating point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_dpd.catalogue.prices import Price, price
from hyperpod_dpd.planner.serving import Point


@dataclass(frozen=True)
class LayoutCost:
    label: str
    nodes: int
    usd_per_hour: float
    output_tokens_per_s: float  # at the operating point
    load: float

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        if self.output_tokens_per_s <= 0:
            return None
        return self.usd_per_hour / (self.output_tokens_per_s * 3600) * 1e6


@dataclass(frozen=True)
class CostSummary:
    price: Price
    colocated: LayoutCost
    disaggregated: LayoutCost


def summarize(*, instance_type: str, overrides: Mapping[str, float] | None, colocated: tuple[str, int, Point, float],
              disaggregated: tuple[str, int, Point, float]) -> CostSummary | None:
    """``(label, nodes, point at the operating point, load)`` per mode; ``None`` when no price is known."""
    found = price(instance_type, overrides)
    if found is None:
        return None

    def layout(label: str, nodes: int, point: Point, load: float) -> LayoutCost:
        return LayoutCost(label=label, nodes=nodes, usd_per_hour=nodes * found.usd_per_hour,
                          output_tokens_per_s=0.0 if point.saturated else point.output_tokens_per_s, load=load)

    return CostSummary(price=found, colocated=layout(*colocated), disaggregated=layout(*disaggregated))
