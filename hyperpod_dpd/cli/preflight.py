"""``hpdpd preflight --env NAME``: PASS / WARN / FAIL per check, with the reason and the fix.

Exit codes: 0 no check failed (warnings allowed unless ``--strict``), 1 a check failed, 2 the checks could not run
(unknown environment, no or rejected credentials, an answer that is not AWS's, ``--timeout`` ran out).
"""

from __future__ import annotations

import argparse

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    print_json,
    print_table,
    status_label,
    timeout_argument,
)

DEFAULT_TIMEOUT_SECONDS = 300.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "preflight", parents=[common], help="check quotas, capacity, network, EKS, add-ons and models before deploying",
        description="Check that an environment can be deployed: credentials, quotas, AZ offerings, subnet IPs, "
                    "zones (names and AZ IDs, training plans' zones), EKS version and authentication mode, add-on "
                    "versions, model locations, HyperPod cluster state.")
    environment_arguments(parser)
    add_aws_arguments(parser)
    parser.add_argument("--strict", action="store_true", help="treat warnings (checks that could not run) as failures")
    timeout_argument(parser, default=DEFAULT_TIMEOUT_SECONDS, what="give up after this many seconds")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here, not at the top: the checks and the configuration models cost most of `hpdpd`'s start-up, and
    # every other command's parser is built with this one's (`hpdpd plan --help` stays well under a second)
    from hyperpod_dpd.config.global_gateway import has_global, read_global
    from hyperpod_dpd.ops.checks import Report
    from hyperpod_dpd.ops.global_preflight import global_checks
    from hyperpod_dpd.ops.ownership import with_ownership
    from hyperpod_dpd.ops.preflight import run_preflight

    env = load_environment_from_args(args)
    clients = factory_from_args(args, default_region=env.region, deadline=command_deadline(args.timeout))
    # then whether the names its stacks create already belong to another stack (hyperpod_dpd/ops/ownership.py)
    report = with_ownership(run_preflight(env, clients, strict=args.strict), env, clients)
    # a member of a global inference gateway (global.yaml): its Region and load-balancer subnets, the home's quota
    if has_global(getattr(args, "config_dir", None)):
        gateways = read_global(getattr(args, "config_dir", None))
        report = Report(checks=(*report.checks, *global_checks(env, gateways, clients)), strict=report.strict)
    if args.output == "json":
        print_json(report.to_json(environment=env.name, region=args.region or env.region))
    else:
        rows = [(status_label(c.status), escape_cell(c.name), escape_cell(c.detail), escape_cell(c.fix or ""))
                for c in report.checks]
        counts = report.counts()
        print_table(("Status", "Check", "Detail", "Fix"), rows,
                    title=f"preflight {env.name} ({args.region or env.region}): {counts['pass']} pass, "
                          f"{counts['warn']} warn, {counts['fail']} fail")
    return 0 if report.ok else 1
