"""``hpdpd status --env NAME``: the HyperPod cluster, groups, nodes, add-ons and endpoints.

Exit codes: 0 healthy, 1 something is not ready, has failed or could not be read (see the warnings),
2 the status could not be collected at all (unknown environment, no credentials).
"""

from __future__ import annotations

import argparse
import sys

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    print_json,
    print_table,
)
from hyperpod_dpd.ops.kube import Kubectl
from hyperpod_dpd.ops.status import NODE_HEALTHY, StatusReport, collect_status


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "status", parents=[common], help="show the HyperPod cluster, nodes, add-ons and endpoints",
        description="Show the HyperPod cluster, its instance groups and nodes, the EKS add-ons, and each endpoint's "
                    "SageMaker endpoint and InferenceEndpointConfig state.")
    environment_arguments(parser)
    add_aws_arguments(parser)
    kubeconfig_argument(parser)
    parser.set_defaults(func=run)


def kubeconfig_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help="kubeconfig for reading InferenceEndpointConfig status with kubectl (default: KUBECONFIG)")


def run(args: argparse.Namespace) -> int:
    env = load_environment_from_args(args)
    report = collect_status(env, factory_from_args(args, default_region=env.region),
                            kubectl=Kubectl.from_environment(args.kubeconfig))
    if args.output == "json":
        print_json(report.to_json())
    else:
        render(report)
    return 0 if report.healthy else 1


def render(report: StatusReport) -> None:
    cluster = report.cluster
    status = cluster.status if cluster else "NotFound"
    failure = f": {cluster.failure_message}" if cluster and cluster.failure_message else ""
    healthy_nodes = sum(1 for n in report.nodes if n.status == NODE_HEALTHY)
    print_table(("Instance group", "Instance type", "Current", "Target"),
                [(escape_cell(g.name), escape_cell(g.instance_type), g.current, g.target)
                 for g in (cluster.groups if cluster else ())],
                title=escape_cell(f"HyperPod cluster {report.cluster_name} ({report.region}): {status}{failure}"))
    if report.nodes:
        print_table(("Node", "Group", "Type", "Status", "Message"),
                    [(escape_cell(n.instance_id), escape_cell(n.instance_group), escape_cell(n.instance_type),
                      escape_cell(n.status), escape_cell(n.message)) for n in report.nodes],
                    title=f"Nodes: {healthy_nodes}/{len(report.nodes)} {NODE_HEALTHY}")
    if report.addons:
        print_table(("Add-on", "Version", "Status", "Configured", "Minimum", "OK", "Issues"),
                    [(escape_cell(a.name), escape_cell(a.version or "-"), escape_cell(a.status),
                      escape_cell(a.configured or "-"), escape_cell(a.minimum or "-"), "yes" if a.ok else "NO",
                      escape_cell("; ".join(a.issues))) for a in report.addons],
                    title="EKS add-ons")
    if report.endpoints:
        print_table(("Endpoint", "Namespace", "IEC", "IEC state", "SageMaker endpoint", "SageMaker status", "Message"),
                    [(escape_cell(e.name), escape_cell(e.namespace), escape_cell(e.resource_name),
                      escape_cell(e.iec_state), escape_cell(e.sagemaker_endpoint or "-"),
                      escape_cell(e.sagemaker_status or "-"),
                      escape_cell(e.sagemaker_failure or e.iec_message)) for e in report.endpoints],
                    title="Endpoints")
    for warning in report.warnings:
        print(f"hpdpd: warning: {warning}", file=sys.stderr)
    print(f"{'healthy' if report.healthy else 'NOT healthy'}", file=sys.stderr)
