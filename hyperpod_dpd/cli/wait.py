"""``hpdpd wait --for cluster|addons|endpoint --env NAME``: block until ready, failed, or ``--timeout``.

Progress goes to stderr: a live spinner line on a terminal, one line per change of state elsewhere (CI logs).
A read that fails for a transient reason (throttling, a connection error, a timeout) shows as ``Unknown (<reason>)``
and is retried until the deadline; one that waiting cannot fix (access denied) ends the wait at once.
Exit codes: 0 ready, 1 terminal failure or timeout (also when the state was still unknown at the deadline: every read
of a poll, its retries included, ends by ``--timeout``), 2 the wait could not run (unknown environment, no or rejected
credentials, access denied, an answer that is not the service's, or another error waiting cannot fix).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    print_json,
    print_table,
)
from hyperpod_dpd.cli.status import kubeconfig_argument
from hyperpod_dpd.ops.coldstart import ColdStart, json_rows, read_cold_start
from hyperpod_dpd.ops.endpoints import EndpointLike, configured_endpoints, iec_name, select_endpoints
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.wait import TARGETS, Backoff, Observation, WaitResult, probe_for, wait_for

FINAL_POLL_SECONDS = 5.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "wait", parents=[common], help="wait until the cluster, add-ons or endpoints are ready",
        description="Poll with exponential back-off until the target is ready, fails (the AWS failure message is "
                    "shown), or the timeout passes.")
    parser.add_argument("--for", dest="target", required=True, choices=TARGETS, help="what to wait for")
    environment_arguments(parser)
    add_aws_arguments(parser)
    kubeconfig_argument(parser)
    parser.add_argument("--endpoint", default=None, metavar="NAME", help="with --for endpoint: only this endpoint")
    parser.add_argument("--timeout", type=_seconds, default=3600.0, metavar="SECONDS",
                        help="give up after this many seconds; every AWS and Kubernetes call of a poll, its retries "
                             "included, ends by then (default 3600)")
    parser.add_argument("--interval", type=_seconds, default=5.0, metavar="SECONDS",
                        help="first poll interval; doubles after each poll (default 5)")
    parser.add_argument("--max-interval", type=_seconds, default=60.0, metavar="SECONDS",
                        help="longest poll interval (default 60)")
    parser.set_defaults(func=run)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


class Progress:
    """A live status line on a terminal; elsewhere one line whenever the observed state changes."""

    def __init__(self, title: str) -> None:
        from rich.console import Console

        self.console = Console(file=sys.stderr, highlight=False)
        self.title = title
        self.last_state: str | None = None
        self.status: Any = None

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            self.status = self.console.status(escape_cell(self.title))
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)

    def update(self, seen: Observation, elapsed: float, delay: float | None) -> None:
        after = f"; next check in {delay:.0f} s" if delay is not None else ""
        line = f"{self.title}: {seen.state} [{elapsed:.0f} s{after}]"
        if self.status is not None:
            self.status.update(escape_cell(line))
        elif seen.state != self.last_state:
            self.console.print(escape_cell(line), soft_wrap=True)  # one unbroken line per change in CI logs
        self.last_state = seen.state


def run(args: argparse.Namespace) -> int:
    env = load_environment_from_args(args)
    endpoints = select_endpoints(configured_endpoints(env), args.endpoint)
    # the last poll starts at --timeout at the latest and may take a tenth of it more (1 to FINAL_POLL_SECONDS s)
    final_poll = min(FINAL_POLL_SECONDS, max(1.0, args.timeout / 10))
    deadline = command_deadline(args.timeout + final_poll, "--timeout and its last poll")
    kubectl = Kube.from_environment(args.kubeconfig, deadline=deadline)
    probe = probe_for(args.target, env, factory_from_args(args, default_region=env.region, deadline=deadline),
                      endpoints=endpoints, kubectl=kubectl)
    backoff = Backoff(initial_seconds=args.interval, max_seconds=max(args.interval, args.max_interval))
    with Progress(f"waiting for {args.target} of {env.name}") as progress:
        result = wait_for(probe, target=args.target, timeout_seconds=args.timeout, backoff=backoff,
                          on_poll=progress.update)
    cold = cold_starts(kubectl, endpoints) if args.target == "endpoint" else None
    report(result, args.output, cold)
    return 0 if result.ok else 1


def cold_starts(kubectl: Kube, endpoints: tuple[EndpointLike, ...]) -> tuple[ColdStart, ...]:
    """The cold-start phases of each endpoint's configured generation (none without a way to reach the cluster)."""
    if kubectl.unavailable():
        return ()
    return tuple(read_cold_start(kubectl, namespace=e.namespace, iec=iec_name(e)) for e in endpoints)


def print_cold_starts(cold: Sequence[Mapping[str, Any]]) -> None:
    """One table per IEC (:meth:`ColdStart.to_json` each): every pod's phases with start, end and duration
    (``unknown`` without evidence)."""
    for item in cold:
        title = escape_cell(f"cold start of {item['iec']} ({item['namespace']})")
        if item.get("unknown"):
            print(f"{title}: unknown ({escape_cell(item['unknown'])})")
            continue
        print_table(("Role", "Pod", "Phase", "Start", "End", "Duration", "Detail"),
                    [tuple(escape_cell(cell) for cell in row) for row in json_rows(item)], title=title)


def report(result: WaitResult, output: str, cold: tuple[ColdStart, ...] | None = None) -> None:
    if output == "json":
        data = result.to_json()
        if cold is not None:
            data["cold_start"] = [c.to_json() for c in cold]
        print_json(data)
        return
    if result.outcome == "ready":
        print(f"{result.target} ready after {result.elapsed_seconds:.0f} s: {result.state}")
    elif result.outcome == "failed":
        print(f"hpdpd: {result.target} failed: {result.state}: {result.message}", file=sys.stderr)
    else:
        print(f"hpdpd: timed out waiting for {result.target}: {result.message}", file=sys.stderr)
    print_cold_starts([c.to_json() for c in cold or ()])
