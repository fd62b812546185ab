"""On-demand prices of the DPD instance types, per instance-hour in USD, with where each figure comes from.

These are list prices for planning, not a quote: Regions, SageMaker's ``ml.`` premium, Savings Plans, training plans
and capacity blocks all change them, and AWS revises GPU prices (it cut P4/P5 On-Demand prices by up to 45% in
June 2025). An environment can override any of them with ``cost: {prices: {<instance type>: <usd per hour>}}`` in
``config/<env>.yaml``; ``hpdpd plan --env`` and ``hpdpd cost`` then use the override and say so.

Confidence, as in the instance catalogue: ``V`` verified from an AWS price page, ``D`` derived (arithmetic on a
verified figure), ``U`` unverified or third-party. Check a ``U`` price before relying on a cost comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

HOURS_PER_MONTH = 730.0  # AWS pricing pages' convention (8,760 hours / 12)


@dataclass(frozen=True)
class Price:
    """USD per instance-hour and its provenance."""

    instance_type: str
    usd_per_hour: float
    basis: str
    source: str
    as_of: str
    confidence: str

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_hour * HOURS_PER_MONTH


_PRICES = (
    Price("ml.p5.48xlarge", 55.04, "EC2 p5.48xlarge On-Demand, Linux, us-east-1",
          "EC2 On-Demand price list after the June 2025 P5 price reduction (AWS What's New, 'Announcing up to 45% "
          "price reduction for Amazon EC2 NVIDIA GPU-accelerated instances', 2025-06-05): $98.32 x (1 - 0.44)",
          "2025-06", "D"),
    Price("ml.p5e.48xlarge", 43.26, "EC2 Capacity Blocks effective hourly rate (p5e is not sold On-Demand)",
          "EC2 Capacity Blocks for ML pricing page, 8 x H200 row, US East (Ohio)", "2024-12", "U"),
    Price("ml.p5en.48xlarge", 63.30, "EC2 p5en.48xlarge On-Demand, Linux, us-east-2",
          "EC2 On-Demand price list after the June 2025 GPU price reduction (third-party price trackers)",
          "2025-06", "U"),
    Price("ml.p6-b200.48xlarge", 113.93, "EC2 p6-b200.48xlarge On-Demand, Linux, us-west-2",
          "EC2 On-Demand price list at the P6-B200 launch (third-party price trackers)", "2025-05", "U"),
    Price("ml.p6-b300.48xlarge", 142.42, "EC2 p6-b300.48xlarge On-Demand, Linux",
          "EC2 On-Demand price list at the P6-B300 launch (third-party price trackers)", "2025-11", "U"),
)

PRICES: Mapping[str, Price] = MappingProxyType({p.instance_type: p for p in _PRICES})


def price(instance_type: str, overrides: Mapping[str, float] | None = None) -> Price | None:
    """The catalogue price of ``instance_type``, or the environment's override; ``None`` when neither knows it."""
    if overrides and instance_type in overrides:
        return Price(instance_type, float(overrides[instance_type]), "environment override",
                     "cost.prices in the environment file", "as configured", "V")
    return PRICES.get(instance_type)
