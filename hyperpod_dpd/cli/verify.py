"""``hpdpd verify --env NAME [--endpoint NAME] [--window 5m] [--probe]``: the KV-fabric gate of each endpoint.

Exit codes: 0 no check failed (warnings allowed), 1 a check failed (an IEC, or its CRD, that the API server says does
not exist included), 2 could not run (bad environment, the cluster or the metrics could not be read: denied,
unreachable, timed out, rejected credentials, an answer that is not the API server's, ``--timeout`` ran out; one line,
never a traceback), 130 interrupted (Ctrl-C or SIGTERM; the probe's pods are deleted first).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    non_negative_seconds,
    positive_seconds,
    print_json,
    print_table,
    status_label,
)
from hyperpod_dpd.errors import HpdpdError

DEFAULT_TIMEOUT_SECONDS = 600.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "verify", parents=[common], help="check the KV fabric: placement, EFA, transfer backend and throughput",
        description="Check from the live cluster and its metrics that prefill and decode run in one AZ on different "
                    "nodes with EFA devices, move the KV cache with libfabric over EFA, and reach the configured "
                    "transfer throughput floor.")
    environment_arguments(parser)
    add_aws_arguments(parser)
    parser.add_argument("--endpoint", default=None, metavar="NAME", help="one endpoint (default: every endpoint)")
    cluster_arguments(parser)
    parser.add_argument("--iec", default=None, metavar="NAME", help="the IEC generation to check (default: the "
                                                                    "configured one, <name>-<generation>)")
    parser.add_argument("--wait-ready", type=non_negative_seconds, default=0.0, metavar="SECONDS",
                        help="first wait up to SECONDS for the IEC to reach DeploymentComplete (default 0)")
    probe_arguments(parser)
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="how long the reads may take, after --wait-ready and the probe's --probe-timeout: "
                             "every AWS, Kubernetes and Prometheus call, its retries included, ends by then "
                             f"(default {DEFAULT_TIMEOUT_SECONDS:g})")
    parser.set_defaults(func=run)


def probe_arguments(parser: argparse.ArgumentParser) -> None:
    """``--probe``, ``--probe-image`` and ``--probe-timeout`` (docs/cli.md, "The probe")."""
    parser.add_argument("--probe", action="store_true",
                        help="also probe the EFA path: fi_info -p efa and the effective FI_PROVIDER inside the "
                             "running workers (exec), and where EFA devices are free, two short-lived pods of the "
                             "worker image that list the efa provider and run fi_pingpong between a prefill and a "
                             "decode node")
    parser.add_argument("--probe-image", default=None, metavar="IMAGE",
                        help="image of the probe pods (default: the workers' image); one with libfabric's fi_info "
                             "and fi_pingpong")
    parser.add_argument("--probe-timeout", type=float, default=600.0, metavar="SECONDS",
                        help="how long the probe pods may take to start and finish (default 600)")


def probe_from_args(args: argparse.Namespace) -> Any:
    """The probe's options, or None without ``--probe``."""
    if not getattr(args, "probe", False):
        return None
    from hyperpod_dpd.ops.probe import ProbeOptions

    if not args.probe_timeout > 0:
        raise HpdpdError(f"--probe-timeout: {args.probe_timeout:g} is not allowed; give a positive number of seconds")
    return ProbeOptions(image=args.probe_image, timeout_seconds=args.probe_timeout)


def cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig``, ``--prometheus`` and ``--window``: how verify, smoke's canary and rollout read the cluster."""
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help="kubeconfig (default: KUBECONFIG, else EKS authentication with the AWS credentials)")
    parser.add_argument("--prometheus", default=None, metavar="URL",
                        help="Prometheus query URL, or an AMP workspace URL (default: $HPDPD_PROMETHEUS_URL; "
                             "without one the decoder's log is measured)")
    parser.add_argument("--window", default="5m", help="how far back to measure the KV transfer (default 5m)")
    parser.add_argument("--request-timeout", type=positive_seconds, default=30.0, metavar="SECONDS",
                        help="timeout of each Kubernetes API and Prometheus request (default 30)")


def kube_from_args(args: argparse.Namespace, env: Any, clients: Any, *, deadline: Any = None) -> Any:
    from hyperpod_dpd.ops.kube import EksAccess, Kube

    return Kube.from_environment(args.kubeconfig, eks=EksAccess(clients=clients, cluster_name=env.eks.cluster_name,
                                                                  region=clients.region),
                                 timeout_seconds=getattr(args, "request_timeout", 30.0), deadline=deadline)


def prometheus_from_args(args: argparse.Namespace, clients: Any, *, deadline: Any = None) -> Any:
    from hyperpod_dpd.ops.metrics import PROMETHEUS_ENV, Prometheus

    url = args.prometheus or os.environ.get(PROMETHEUS_ENV)
    return Prometheus(url=url, clients=clients, timeout_seconds=args.request_timeout, deadline=deadline) if url \
        else None


def window_from_args(args: argparse.Namespace) -> int:
    from hyperpod_dpd.ops.metrics import window_seconds

    try:
        return window_seconds(args.window)
    except ValueError as exc:
        raise HpdpdError(f"--window: {exc}") from None


def blocked(what: str, exc: Any) -> HpdpdError:
    """One line for a read that stopped the command (denied, unreachable, timed out, not found)."""
    return HpdpdError(f"cannot {what}: {exc.reason}")


def run(args: argparse.Namespace) -> int:
    from hyperpod_dpd.ops.endpoints import configured_endpoints, iec_name, select_endpoints
    from hyperpod_dpd.ops.kube import KubeError
    from hyperpod_dpd.ops.metrics import MetricsError
    from hyperpod_dpd.ops.verify import Target, verify_endpoint

    env = load_environment_from_args(args)
    window = window_from_args(args)
    probe = probe_from_args(args)
    endpoints = select_endpoints(configured_endpoints(env), args.endpoint)
    if not endpoints:
        print(f"hpdpd: environment {env.name} declares no endpoint; nothing to verify", file=sys.stderr)
    budget = args.wait_ready + (probe.timeout_seconds if probe is not None else 0.0) + args.timeout
    deadline = command_deadline(budget, "--timeout" if budget == args.timeout else
                                "--wait-ready, --probe-timeout and --timeout")
    clients = factory_from_args(args, default_region=env.region, deadline=deadline)
    kube = kube_from_args(args, env, clients, deadline=deadline)
    prometheus = prometheus_from_args(args, clients, deadline=deadline)
    reports = []
    for endpoint in endpoints:
        iec = args.iec or iec_name(endpoint)
        try:
            if args.wait_ready > 0:
                wait_ready(kube, name=iec, namespace=endpoint.namespace, seconds=args.wait_ready)
            reports.append(verify_endpoint(kube, Target(endpoint=endpoint, iec=iec, window_seconds=window,
                                                        prometheus=prometheus, probe=probe)))
        except (KubeError, MetricsError) as exc:
            raise blocked(f"verify {endpoint.name} ({iec})", exc) from None
    ok = all(r.ok for r in reports)
    if args.output == "json":
        print_json({"ok": ok, "environment": env.name, "window_seconds": window,
                    "endpoints": [r.to_json() for r in reports]})
    else:
        for report in reports:
            render(report)
    return 0 if ok else 1


def wait_ready(kube: Any, *, name: str, namespace: str, seconds: float, interval: float = 10.0) -> None:
    """Poll the IEC until it is DeploymentComplete, failed, or ``seconds`` pass (transient reads keep polling)."""
    from hyperpod_dpd.ops.kube import wait_for_iec

    wait_for_iec(kube, name=name, namespace=namespace, seconds=seconds, interval=interval)


def render(report: Any) -> None:
    rows = [(status_label(c.status), escape_cell(c.name), escape_cell(c.detail), escape_cell(c.cause or ""))
            for c in report.checks]
    fails = sum(1 for c in report.checks if c.status == "fail")
    warns = sum(1 for c in report.checks if c.status == "warn")
    print_table(("Status", "Check", "Detail", "Likely cause"), rows,
                title=escape_cell(f"verify {report.endpoint} ({report.namespace}/{report.iec}): "
                                  f"{len(report.checks) - fails - warns} pass, {warns} warn, {fails} fail"))
    load = report.decoder_kv_load
    if load is not None:
        print(f"  decoder KV load time (a local copy from the decoder's PD buffer, not the fabric): "
              f"{load.mean_ms:.2f} ms per rank on average over {load.lines} line(s), {load.bytes / 1024**3:.2f} GiB")
    if report.probe is not None and report.probe.created:
        print(f"  probe pods {', '.join(report.probe.created)}: "
              + ("deleted" if not report.probe.left_behind else f"not deleted: {', '.join(report.probe.left_behind)}"))
