"""``hpdpd status --env NAME``: the HyperPod cluster, groups, nodes, add-ons and endpoints.

Exit codes: 0 healthy, 1 something is not ready, not found (an endpoint's IEC or its CRD included), has failed or is
Unknown (could not be read: the reason is in its Detail and in the warnings), 2 the status could not be collected at
all (unknown environment, no or rejected credentials, an answer that is not the service's, an unreadable kubeconfig,
``--timeout`` ran out).
"""

from __future__ import annotations

import argparse
import sys

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    print_json,
    print_table,
    timeout_argument,
)
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.lookup import NOT_FOUND, UNKNOWN
from hyperpod_dpd.ops.status import NODE_HEALTHY, EndpointStatus, StatusReport, collect_status

DEFAULT_TIMEOUT_SECONDS = 300.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "status", parents=[common], help="show the HyperPod cluster, nodes, add-ons and endpoints",
        description="Show the HyperPod cluster, its instance groups and nodes, the EKS add-ons, and each endpoint's "
                    "SageMaker endpoint and InferenceEndpointConfig state.")
    environment_arguments(parser)
    add_aws_arguments(parser)
    kubeconfig_argument(parser)
    timeout_argument(parser, default=DEFAULT_TIMEOUT_SECONDS, what="give up after this many seconds")
    parser.set_defaults(func=run)


def kubeconfig_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help="kubeconfig for reading InferenceEndpointConfig status (default: KUBECONFIG)")


def run(args: argparse.Namespace) -> int:
    env = load_environment_from_args(args)
    deadline = command_deadline(args.timeout)
    report = collect_status(env, factory_from_args(args, default_region=env.region, deadline=deadline),
                            kubectl=Kube.from_environment(args.kubeconfig, deadline=deadline))
    if args.output == "json":
        print_json(report.to_json())
    else:
        render(report)
    return 0 if report.healthy else 1


def render(report: StatusReport) -> None:
    cluster, eks = report.cluster, report.eks.value
    print_table(("Cluster", "Name", "Status", "Detail"), [
        ("HyperPod", escape_cell(report.cluster_name), escape_cell(report.cluster_status),
         escape_cell(report.hyperpod.reason or (cluster.failure_message if cluster else ""))),
        ("EKS", escape_cell(report.eks_cluster_name), escape_cell(report.eks_status),
         escape_cell(report.eks.reason or (f"Kubernetes {eks.version}" if eks else ""))),
    ], title=f"Clusters of {escape_cell(report.environment)} ({escape_cell(report.region)})")
    if cluster and cluster.groups:
        print_table(("Instance group", "Instance type", "Current", "Target"),
                    [(escape_cell(g.name), escape_cell(g.instance_type), g.current, g.target) for g in cluster.groups],
                    title=escape_cell(f"Instance groups of {report.cluster_name}"))
    _render_nodes(report)
    _render_addons(report)
    if report.endpoints:
        print_table(("Endpoint", "Namespace", "IEC", "IEC state", "SageMaker endpoint", "SageMaker status", "Detail"),
                    [(escape_cell(e.name), escape_cell(e.namespace), escape_cell(e.resource_name),
                      escape_cell(e.iec_state), escape_cell(e.sagemaker_endpoint or "-"),
                      escape_cell(e.sagemaker_status or "-"), escape_cell(_endpoint_detail(e)))
                     for e in report.endpoints],
                    title="Endpoints")
    for warning in report.warnings:
        print(f"hpdpd: warning: {warning}", file=sys.stderr)
    print(f"{'healthy' if report.healthy else 'NOT healthy'}", file=sys.stderr)


def _render_nodes(report: StatusReport) -> None:
    nodes = report.node_states
    if report.nodes.unknown and report.cluster is not None:
        print_table(("Node", "Group", "Type", "Status", "Message"),
                    [("-", "-", "-", UNKNOWN, escape_cell(report.nodes.reason))], title=f"Nodes: {UNKNOWN}")
    elif nodes:
        healthy = sum(1 for n in nodes if n.status == NODE_HEALTHY)
        print_table(("Node", "Group", "Type", "Status", "Message"),
                    [(escape_cell(n.instance_id), escape_cell(n.instance_group), escape_cell(n.instance_type),
                      escape_cell(n.status), escape_cell(n.message)) for n in nodes],
                    title=f"Nodes: {healthy}/{len(nodes)} {NODE_HEALTHY}")


def _render_addons(report: StatusReport) -> None:
    if not report.addons:
        return
    reasons = {a.reason for a in report.addons if a.reason}
    title = "EKS add-ons"
    if reasons:  # one read lists them all: the reason once, in the title, not on every row
        title += f": {UNKNOWN} ({'; '.join(sorted(reasons))})"
    elif report.eks.absent:
        title += f": EKS cluster {report.eks_cluster_name} {NOT_FOUND}"
    print_table(("Add-on", "Version", "Status", "Configured", "Minimum", "OK", "Issues"),
                [(escape_cell(a.name), escape_cell(a.version or "-"), escape_cell(a.status),
                  escape_cell(a.configured or "-"), escape_cell(a.minimum or "-"), "yes" if a.ok else "NO",
                  escape_cell("; ".join(a.issues))) for a in report.addons],
                title=escape_cell(title))


def _endpoint_detail(endpoint: EndpointStatus) -> str:
    parts = [endpoint.sagemaker_failure or "",
             f"SageMaker: {endpoint.sagemaker_reason}" if endpoint.sagemaker_reason else "",
             endpoint.iec_message, f"IEC: {endpoint.iec_reason}" if endpoint.iec_reason else ""]
    return "; ".join(p for p in parts if p)
