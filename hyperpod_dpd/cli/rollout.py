"""``hpdpd rollout status|promote|abort --env NAME --endpoint NAME``: blue/green IEC generations.

Exit codes: 0 steady, promoted, aborted or nothing to do; 1 a rollout is pending, in progress or interrupted, or the endpoint is down
(status), refused (no room, another rollout holds the lease, a fixed SageMaker endpoint name), failed its checks,
failed or timed out, or the API server says the IEC's CRD (or an object the rollout needs) does not exist; 2 could not
run (the cluster could not be read or written: denied, unreachable, timed out, rejected credentials, an answer that is
not the API server's; bad options; one line).

Every Kubernetes request waits at most ``--request-timeout``; EKS authentication (one ``DescribeCluster`` as the
command starts) ends within it too; ``--timeout``, ``--drain`` and ``--probe-timeout`` bound the waits.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    positive_seconds,
    print_json,
    print_table,
)
from hyperpod_dpd.cli.verify import (
    blocked,
    cluster_arguments,
    kube_from_args,
    probe_arguments,
    probe_from_args,
    prometheus_from_args,
    window_from_args,
)

ACTIONS = ("status", "promote", "abort")
# How long one read of a smoke prompt's stream may wait (both senders' timeout_seconds): the promote renews its lease
# before each prompt unless the lease lasts that long already.
SMOKE_READ_SECONDS = 300.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "rollout", parents=[common], help="blue/green IEC generations: status, promote, abort",
        description="Run a new IEC generation beside the serving one and promote it once it is ready and passes "
                    "smoke and verify (the router policy, the client Service and the Ingress switch, the old "
                    "generation drains, then it is deleted), or abort it. One rollout at a time per endpoint: a "
                    "lease on its client Service.")
    parser.add_argument("action", choices=ACTIONS)
    environment_arguments(parser)
    add_aws_arguments(parser)
    parser.add_argument("--endpoint", required=True, metavar="NAME", help="the endpoint")
    cluster_arguments(parser)
    parser.add_argument("--in-place", action="store_true",
                        help="promote without room for two generations: delete the serving one first (downtime)")
    parser.add_argument("--timeout", type=positive_seconds, default=3600.0, metavar="SECONDS",
                        help="how long promote waits for the new generation (default 3600)")
    parser.add_argument("--interval", type=positive_seconds, default=15.0, metavar="SECONDS",
                        help="poll interval (default 15)")
    parser.add_argument("--drain", type=float, default=None, metavar="SECONDS",
                        help="how long the old generation keeps serving its open requests after the switch, before "
                             "it is deleted (default: rollout.drain_seconds, else the endpoint's longest request)")
    parser.add_argument("--lease-seconds", type=float, default=300.0, metavar="SECONDS",
                        help="how long the rollout lease lasts without renewal: a promote that was killed blocks "
                             "others this long (default 300; more than twice --interval)")
    parser.add_argument("--url", default=None,
                        help="smoke the new generation at this URL (default: its router Service, through the Kubernetes "
                             "API server's service proxy, so it works from outside the cluster)")
    parser.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (self-signed router)")
    # --probe: verify's EFA probe on the nodes a blue/green generation will take, before it is created there (their
    # EFA devices are free only then), and inside its workers once it is ready (docs/cli.md, "The probe").
    probe_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hyperpod_dpd.ops.endpoints import configured_endpoints, select_endpoints
    from hyperpod_dpd.ops.kube import ClusterNotFound, KubeError
    from hyperpod_dpd.ops.metrics import MetricsError
    from hyperpod_dpd.ops.rollout import Abort, Promotion, read_state

    _check_options(args)
    env = load_environment_from_args(args)
    (endpoint,) = select_endpoints(configured_endpoints(env), args.endpoint)
    clients = factory_from_args(args, default_region=env.region,
                                deadline=command_deadline(args.request_timeout, "--request-timeout"))
    kube = kube_from_args(args, env, clients)
    timing = {"drain_seconds": args.drain, "lease_seconds": args.lease_seconds, "interval_seconds": args.interval}
    try:
        if args.action == "status":
            state = read_state(kube, endpoint)
            ok = state.phase in ("steady", "nothing")
            data: dict[str, Any] = {"ok": ok, "outcome": state.phase, "message": state.message, **state.to_json()}
        elif args.action == "abort":
            result = Abort(kube=kube, endpoint=endpoint, **timing).run()
            ok, data = result.ok, result.to_json()
        else:
            promotion = Promotion(kube=kube, endpoint=endpoint, manifest=lambda: render_manifest(env, endpoint),
                                  checks=generation_checks(args, env, endpoint, kube, clients),
                                  fabric=fabric_probe(args, endpoint, kube), groups=env.hyperpod.instance_groups, in_place=args.in_place,
                                  timeout_seconds=args.timeout, **timing)
            result = promotion.run()
            ok, data = result.ok, result.to_json()
            data["cold_start"] = cold_start_of(kube, endpoint)  # the new generation's (docs/cold-start.md)
    except ClusterNotFound as exc:  # the first deploy creates the cluster
        print(f"{exc.reason}: nothing to roll out", file=sys.stderr)
        return 0 if args.action != "status" else 1
    except KubeError as exc:
        if exc.not_found:  # the API server's own NotFound (the IEC CRD not installed, ...): not deployable, exit 1
            print(f"hpdpd: cannot {args.action} the rollout of {endpoint.name}: {exc.reason} (is the inference "
                  "operator installed? 'hpdpd status' shows its add-on)", file=sys.stderr)
            return 1
        raise blocked(f"{args.action} the rollout of {endpoint.name}", exc) from None
    except MetricsError as exc:
        raise blocked(f"{args.action} the rollout of {endpoint.name}", exc) from None
    if args.output == "json":
        print_json(data)
    else:
        render(args.action, data)
    return 0 if ok else 1


def _check_options(args: argparse.Namespace) -> None:
    from hyperpod_dpd.errors import HpdpdError

    if args.interval <= 0 or args.timeout <= 0:
        raise HpdpdError("--interval and --timeout must be positive")
    if args.drain is not None and args.drain < 0:
        raise HpdpdError(f"--drain: {args.drain:g}: must be 0 or more seconds")
    if args.lease_seconds <= 2 * args.interval:
        raise HpdpdError(f"--lease-seconds: {args.lease_seconds:g}: must be more than twice --interval "
                         f"({args.interval:g}), so that waits renew the lease before it expires")


def generation_checks(args: argparse.Namespace, env: Any, endpoint: Any, kube: Any, clients: Any) -> Any:
    """smoke (prompts and canary) and verify against one IEC generation; failure lines, empty when it passed.

    ``rollout promote`` calls it once the new generation is ready and before it takes any traffic (the policy,
    the client Service and the Ingress move only after it returns no failure): further checks of a generation, such
    as verify's active probe, belong here. They take minutes, so they keep the rollout lease with ``keep``
    (:class:`~hyperpod_dpd.ops.rollout_lease.Keep`): before each prompt, before the canary reads the logs, before
    verify and in the polls of its probe."""
    from hyperpod_dpd.catalogue.operator import ROUTER_PORT, router_service, router_url
    from hyperpod_dpd.ops.canary import cluster_logs
    from hyperpod_dpd.ops.smoke import http_sender, run_smoke
    from hyperpod_dpd.ops.verify import Target, verify_endpoint
    from hyperpod_dpd.ops.workloads import service_proxy_sender

    window = window_from_args(args)
    prometheus = prometheus_from_args(args, clients)
    probe = probe_from_args(args)  # once it is ready: the provider inside its workers

    def check(iec: str, keep: Any) -> list[str]:
        failures = []
        path = endpoint.invocation_path.lstrip("/")
        if args.url:
            url, transport = args.url, "http"
            send = http_sender(args.url, insecure=args.insecure, timeout_seconds=SMOKE_READ_SECONDS)
        else:  # the new router has only an in-cluster name: reach it through the API server's service proxy
            url = router_url(iec, endpoint.namespace, path)
            send = service_proxy_sender(kube, service=router_service(iec, endpoint.namespace),
                                        port=ROUTER_PORT, path=path, timeout_seconds=SMOKE_READ_SECONDS)
            transport = "kubernetes-api"
        logs = cluster_logs(kube, namespace=endpoint.namespace, iec=iec)

        def kept_send(body: bytes) -> Any:
            keep.ahead(SMOKE_READ_SECONDS)
            return send(body)

        def kept_logs(seconds: float) -> Any:
            keep.ahead()
            return logs(seconds)

        smoke = run_smoke(send=kept_send, endpoint=endpoint.name, transport=transport,
                          target=url, threshold=endpoint.routing.threshold, model=endpoint.model.name,
                          chat="chat/" in url, max_tokens=16, canary=kept_logs)
        failures += [f"smoke {m.case}: {m.error}" for m in smoke.results if not m.ok]
        failures += [f"smoke {c.name}: {c.detail} (likely cause: {c.cause})" for c in smoke.canary
                     if c.status == "fail"]
        keep.ahead()
        report = verify_endpoint(kube, Target(endpoint=endpoint, iec=iec, window_seconds=window,
                                              prometheus=prometheus, probe=probe, sleep=keep.sleep))
        failures += [f"verify {c.name}: {c.detail} (likely cause: {c.cause})" for c in report.checks
                     if c.status == "fail"]
        return failures

    return check


def fabric_probe(args: argparse.Namespace, endpoint: Any, kube: Any) -> Any:
    """With ``--probe``: the probe of verify on the free nodes a new blue/green generation will take, before it is
    created (its FAIL rows are the failure lines); None without ``--probe``."""
    options = probe_from_args(args)
    if options is None:
        return None
    from hyperpod_dpd.ops.probe import run_probe

    def probe(iec: str, keep: Any) -> list[str]:
        report = run_probe(kube, endpoint, iec=iec, options=options, sleep=keep.sleep)  # keep the lease in its polls
        return [f"probe {c.name}: {c.detail} (likely cause: {c.cause})"
                for c in report.checks(floor_gbps=endpoint.kv_transfer.min_gbps) if c.status == "fail"]

    return probe


def render_manifest(env: Any, endpoint: Any) -> dict[str, Any]:
    """The desired IEC exactly as the endpoints chart renders it (cdk8s; validated against the CRD)."""
    import cdk8s

    from hyperpod_dpd.catalogue.operator_api import IEC_KIND
    from hyperpod_dpd.k8s.charts import add_environment_charts

    for chart in add_environment_charts(cdk8s.App(), env):
        for document in chart.to_json():
            meta = document.get("metadata") or {}
            if document.get("kind") == IEC_KIND and meta.get("name") == endpoint.resource_name:
                return dict(document)
    raise KeyError(f"the charts of {env.name} render no IEC {endpoint.resource_name}")


def cold_start_of(kube: Any, endpoint: Any) -> dict[str, Any]:
    """The cold-start phases of the endpoint's configured generation, as JSON (unknown with the reason when unread)."""
    from hyperpod_dpd.ops.coldstart import read_cold_start

    return read_cold_start(kube, namespace=endpoint.namespace, iec=endpoint.resource_name).to_json()


def render(action: str, data: dict[str, Any]) -> None:
    rows = [(escape_cell(g["name"]), escape_cell(g["state"]), "yes" if g["serving"] else "",
             "yes" if g["desired"] else "", escape_cell(g.get("sagemaker_endpoint_name") or ""))
            for g in data["generations"]]
    print_table(("Generation", "State", "Serving", "Configured", "SageMaker endpoint"), rows,
                title=escape_cell(f"rollout {action} {data['endpoint']} ({data['namespace']}): {data['outcome']}"))
    if data.get("room"):
        print_table(("Role", "Nodes", "Free GPUs", "Pods that fit", "Karpenter may add", "Pods needed"),
                    [(r["role"], r["nodes"], r["free_gpus"], r["fits"],
                      f"{r['may_add_nodes']} node(s), {r['may_add_pods']} pod(s)" if r["autoscaled_groups"] else "",
                      r["needed"]) for r in data["room"]],
                    title="room for the new generation")
    for step in data.get("steps", []):
        print(f"  {escape_cell(step)}")
    if data.get("cold_start"):
        from hyperpod_dpd.cli.wait import print_cold_starts

        print_cold_starts([data["cold_start"]])
    for failure in data.get("failures", []):
        print(f"hpdpd: {failure}", file=sys.stderr)
    stream = sys.stdout if data["ok"] else sys.stderr
    print(("" if data["ok"] else "hpdpd: ") + data["message"], file=stream)
