"""``hpdpd cost --env NAME``: what an environment's GPU instance groups cost per hour and per month (no AWS calls).

Prices come from ``hyperpod_dpd.catalogue.prices`` (on-demand list prices with their source and date) unless the
environment overrides them under ``cost.prices``. System (CPU) groups are left out: the catalogue prices GPU types.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hyperpod_dpd.cli.output import environment_arguments, load_environment_from_args, print_json, print_table


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "cost", parents=[common], help="price an environment's GPU instance groups per hour and per month",
        description="Price the prefill and decode instance groups of config/NAME.yaml at the catalogue's on-demand "
                    "prices (or the environment's cost.prices overrides), per hour and per month of 730 hours.")
    environment_arguments(parser)
    parser.set_defaults(func=run)


def cost_report(env: Any) -> dict[str, Any]:
    from hyperpod_dpd.catalogue.prices import HOURS_PER_MONTH, price

    overrides = dict(env.cost.prices)
    groups, unpriced = [], []
    for group in env.hyperpod.instance_groups:
        if not group.is_gpu:
            continue
        found = price(group.instance_type, overrides)
        if found is None:
            unpriced.append(group.name)
            continue
        hourly = found.usd_per_hour * group.count
        groups.append({"name": group.name, "role": group.role, "instance_type": group.instance_type,
                       "count": group.count, "max_count": group.max_nodes,  # an autoscaled group grows to max_count
                       "max_usd_per_hour": round(found.usd_per_hour * group.max_nodes, 2),
                       "usd_per_instance_hour": found.usd_per_hour,
                       "usd_per_hour": round(hourly, 2), "usd_per_month": round(hourly * HOURS_PER_MONTH, 2),
                       "price_basis": found.basis, "price_source": found.source, "price_as_of": found.as_of,
                       "price_confidence": found.confidence})
    total = sum(g["usd_per_hour"] for g in groups)
    return {"environment": env.name, "groups": groups, "unpriced_groups": unpriced,
            "total_usd_per_hour": round(total, 2), "total_usd_per_month": round(total * HOURS_PER_MONTH, 2),
            "hours_per_month": HOURS_PER_MONTH}


def run(args: argparse.Namespace) -> int:
    report = cost_report(load_environment_from_args(args))
    if args.output == "json":
        print_json(report)
        return 0
    rows = [(g["name"], g["role"], g["instance_type"], g["count"], f"${g['usd_per_instance_hour']:,.2f}",
             f"${g['usd_per_hour']:,.2f}", f"${g['usd_per_month']:,.0f}", f"{g['price_as_of']} ({g['price_confidence']})")
            for g in report["groups"]]
    rows.append(("total", "", "", sum(g["count"] for g in report["groups"]), "", f"${report['total_usd_per_hour']:,.2f}",
                 f"${report['total_usd_per_month']:,.0f}", ""))
    print_table(("group", "role", "instance type", "nodes", "$/node-hour", "$/hour", "$/month", "price as of"), rows,
                title=f"GPU pools of {report['environment']} (parked groups cost nothing)", stream=sys.stdout)
    sources = {g["instance_type"]: f"{g['price_basis']}; {g['price_source']}" for g in report["groups"]}
    for instance_type, source in sources.items():
        sys.stdout.write(f"  - {instance_type}: {source}\n")
    if report["unpriced_groups"]:
        sys.stdout.write(f"  - no price for {', '.join(report['unpriced_groups'])}: add it under cost.prices\n")
    return 0
