"""``hpdpd rebalance --env NAME --from prefill --to decode --count N [--apply]``: move running nodes between the
environment's prefill and decode instance groups with SageMaker's ``MoveClusterNodes``, keeping their capacity.

A dry run by default: it reads the cluster (``DescribeCluster``, ``ListClusterNodes``; with ``--kubeconfig`` also the
pods, to prefer idle nodes), prints the nodes it would move, the new counts and the config change to commit, and
changes nothing. ``--apply`` makes the move (a ClientToken derived from the plan, so a re-run after a lost answer is
the same request), then waits until every moved node runs in the target group, within ``--timeout``.

Exit codes: 0 the plan (dry run) or the move succeeded; 1 refused (by hpdpd's checks or by the service: one line with
the reasons), partly failed (the nodes named), a node lost, or the wait timed out; 2 it could not run (unknown
environment or group, no cluster, no or rejected credentials, access denied, ``--timeout`` ran out while reading).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.catalogue.operator import DpdRole
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    positive_seconds,
    print_json,
    print_table,
)
from hyperpod_dpd.errors import HpdpdError

if TYPE_CHECKING:
    from hyperpod_dpd.ops.deadline import Deadline
    from hyperpod_dpd.ops.kube import Kube
    from hyperpod_dpd.ops.rebalance import Outcome, RebalancePlan, RebalanceResult
    from hyperpod_dpd.ops.rebalance_live import LiveCluster

DEFAULT_TIMEOUT_SECONDS = 3600.0  # a move includes the target group's lifecycle scripts on each node
FINAL_POLL_SECONDS = 5.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    # the roles from the catalogue, not hyperpod_dpd.ops.rebalance: that one imports the configuration models, which
    # would cost every command's start-up (`hpdpd plan --help` builds this parser too)
    roles = get_args(DpdRole)
    parser = subparsers.add_parser(
        "rebalance", parents=[common], help="move nodes between the prefill and decode groups (dry run by default)",
        description="Move running nodes from one DPD instance group to the other with MoveClusterNodes: the instances "
                    "and their capacity stay, their EBS volumes are replaced. Prints the plan and changes nothing "
                    "unless --apply is given.")
    environment_arguments(parser)
    parser.add_argument("--from", dest="source_role", required=True, choices=roles, help="the role that gives nodes")
    parser.add_argument("--to", dest="target_role", required=True, choices=roles, help="the role that gets them")
    parser.add_argument("--count", type=_count, required=True, metavar="N", help="nodes to move (1 to 50)")
    parser.add_argument("--from-group", default=None, metavar="NAME",
                        help="the source instance group, when the role has several")
    parser.add_argument("--to-group", default=None, metavar="NAME",
                        help="the target instance group, when the role has several")
    parser.add_argument("--apply", action="store_true", help="make the move (without it: a dry run)")
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help="read the cluster's pods to prefer nodes that run none (default: KUBECONFIG)")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="give up after this many seconds; every AWS and Kubernetes call, its retries included, "
                             f"ends by then (default {DEFAULT_TIMEOUT_SECONDS:g})")
    parser.add_argument("--interval", type=positive_seconds, default=15.0, metavar="SECONDS",
                        help="first poll interval while the nodes move; doubles up to 60 (default 15)")
    parser.add_argument("--client-token", default=None, metavar="TOKEN",
                        help="the MoveClusterNodes ClientToken (default: derived from the plan); a new one makes the "
                             "service treat the move as a new request")
    add_aws_arguments(parser)
    parser.set_defaults(func=run)


def _count(text: str) -> int:
    from hyperpod_dpd.ops.rebalance_live import MAX_NODES_PER_MOVE

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_NODES_PER_MOVE:
        raise argparse.ArgumentTypeError(f"{value}: must be 1 to {MAX_NODES_PER_MOVE} (MoveClusterNodes moves at most "
                                         f"{MAX_NODES_PER_MOVE} nodes per call)")
    return value


def run(args: argparse.Namespace) -> int:
    from hyperpod_dpd.ops.kube import Kube
    from hyperpod_dpd.ops.rebalance import RebalanceResult, plan_rebalance, resolve_group
    from hyperpod_dpd.ops.rebalance_live import read_cluster

    if args.source_role == args.target_role:
        raise HpdpdError(f"--from and --to are both {args.source_role}: move nodes from one role to the other")
    token = args.client_token
    if token is not None and not (1 <= len(token) <= 64 and all(0x21 <= ord(c) <= 0x7E for c in token)):
        raise HpdpdError(f"--client-token {token!r}: must be 1 to 64 printable ASCII characters without spaces "
                         "(MoveClusterNodes ClientToken)")
    env = load_environment_from_args(args)
    source = resolve_group(env, args.source_role, args.from_group, option="--from-group")
    target = resolve_group(env, args.target_role, args.to_group, option="--to-group")
    final_poll = min(FINAL_POLL_SECONDS, max(1.0, args.timeout / 10))
    deadline = command_deadline(args.timeout + final_poll, "--timeout and its last poll")
    sagemaker = factory_from_args(args, default_region=env.region, deadline=deadline).client("sagemaker")
    live = read_cluster(sagemaker, env.hyperpod.cluster_name)
    if live is None:
        raise HpdpdError(f"HyperPod cluster {env.hyperpod.cluster_name} not found in {env.region}: deploy the platform "
                         "first")
    gpus, access_note = _gpus_in_use(Kube.from_environment(args.kubeconfig, deadline=deadline), live)
    plan = plan_rebalance(env, live, source=source, target=target, count=args.count, gpus_in_use=gpus)
    plan = replace(plan, client_token=token or plan.client_token,
                   notes=plan.notes + ((access_note,) if access_note else ()))
    if plan.refused:
        result = RebalanceResult(plan=plan, outcome="refused", message="; ".join(plan.refusals))
    elif not args.apply:
        result = RebalanceResult(plan=plan, outcome="planned")
    else:
        result = _apply(sagemaker, plan, deadline=deadline, last_poll=final_poll, interval=args.interval)
    report(result, args.output, _count_lines(args, (source.name, target.name)))
    return 0 if result.ok else 1


def _gpus_in_use(kube: Kube, live: LiveCluster) -> tuple[dict[str, int | None] | None, str]:
    """GPUs that pods request on each instance (None without cluster access), and a note when the cluster could not
    be read: the pods only rank the nodes, so the plan goes on without them and says so."""
    from hyperpod_dpd.ops.kube import KubeError
    from hyperpod_dpd.ops.rebalance_live import gpu_pods_by_instance
    from hyperpod_dpd.ops.workloads import gpu_requests, nodes

    if kube.unavailable():
        return None, ""
    try:
        return gpu_pods_by_instance(live.nodes, list(nodes(kube)), gpu_requests(kube).by_node), ""
    except KubeError as exc:
        return None, f"the cluster's pods could not be read ({' '.join(exc.reason.split())}): nodes chosen without them"


def _apply(sagemaker: Any, plan: RebalancePlan, *, deadline: Deadline, last_poll: float,
           interval: float) -> RebalanceResult:
    """The move, then its wait with what is left of ``--timeout`` (the deadline holds ``last_poll`` more for the last
    poll, as ``hpdpd wait``'s does)."""
    import time

    from hyperpod_dpd.cli.wait import Progress
    from hyperpod_dpd.ops.clusters import describe_hyperpod
    from hyperpod_dpd.ops.rebalance import RebalanceResult, count_warnings
    from hyperpod_dpd.ops.rebalance_live import move, move_probe, move_request
    from hyperpod_dpd.ops.wait import Backoff, wait_for

    started = time.monotonic()
    answer = move(sagemaker, move_request(cluster_arn=plan.cluster_arn, source=plan.source, target=plan.target,
                                          node_ids=plan.node_ids, token=plan.client_token))
    if answer.refused:
        return RebalanceResult(plan=plan, outcome="refused", applied=True,
                               message=f"MoveClusterNodes refused the move: {answer.refused}")
    failed_text = "; ".join(f"{i}: {c}: {m}" for i, c, m in answer.failed)
    if not answer.accepted:
        return RebalanceResult(plan=plan, outcome="partial", applied=True, failed=answer.failed,
                               message=f"no node was accepted: {failed_text}")
    probe = move_probe(sagemaker, plan.cluster, node_ids=answer.accepted, target=plan.target)
    with Progress(f"moving {', '.join(answer.accepted)} to {plan.target}") as progress:
        waited = wait_for(probe, target="move", timeout_seconds=max(0.0, deadline.remaining() - last_poll),
                          backoff=Backoff(initial_seconds=interval, max_seconds=max(interval, 60.0)),
                          on_poll=progress.update)
    elapsed = time.monotonic() - started
    counts: dict[str, tuple[int, int]] = {}
    warnings: list[str] = []
    if waited.outcome == "ready":  # what the groups target now (the move's effect on TargetCount is not documented)
        cluster = describe_hyperpod(sagemaker, plan.cluster)
        counts = {g.name: (g.current, g.target) for g in (cluster.groups if cluster else ())
                  if g.name in (plan.source, plan.target)}
        warnings = count_warnings(plan, counts, len(answer.accepted))
    outcomes: dict[str, Outcome] = {"ready": "partial" if answer.failed else "moved", "failed": "failed",
                                    "timeout": "timeout"}
    outcome = outcomes[waited.outcome]
    message = {"moved": f"moved after {elapsed:.0f} s: {waited.state}",
               "partial": f"moved {', '.join(answer.accepted)}",
               "failed": f"{waited.message} ({waited.state})",
               "timeout": waited.message}[outcome] + (f"; not moved: {failed_text}" if answer.failed else "")
    return RebalanceResult(plan=plan, outcome=outcome, applied=True, accepted=answer.accepted, failed=answer.failed,
                           message=message, elapsed_seconds=elapsed, counts=counts, warnings=tuple(warnings))


def _count_lines(args: argparse.Namespace, groups: tuple[str, ...]) -> dict[str, int]:
    """The line of each group's ``count:`` in the environment file (1-based), where the file says it plainly."""
    import yaml

    from hyperpod_dpd.config.loader import config_dir

    path = Path(config_dir(args.config_dir)) / f"{args.env}.yaml"
    try:
        root = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):  # the file parsed a moment ago; anything odd just leaves the line numbers out
        return {}
    found: dict[str, int] = {}
    listed = _mapping_items(_mapping_items(root).get("hyperpod")).get("instance_groups")
    for group in listed.value if isinstance(listed, yaml.SequenceNode) else ():
        items = _mapping_items(group)
        name, count = items.get("name"), items.get("count")
        if name is not None and count is not None and name.value in groups:
            found[str(name.value)] = count.start_mark.line + 1
    return found


def _mapping_items(node: Any) -> dict[str, Any]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def report(result: RebalanceResult, output: str, lines: dict[str, int]) -> None:
    plan = result.plan
    if output == "json":
        data = result.to_json()
        data["config_change"]["file_lines"] = {group: line for group, line in lines.items()}
        print_json(data)
    else:
        mode = " (dry run)" if result.outcome == "planned" else ""
        print(f"rebalance {plan.env}: {plan.count} node(s) of cluster {plan.cluster} from '{plan.source}' to "
              f"'{plan.target}'{mode}")
        if plan.nodes:
            print_table(["Node", "Why this one"], [(escape_cell(n.instance_id), escape_cell(n.why)) for n in plan.nodes])
        print_table(["Group", "Count now", "After the move"],
                    [(escape_cell(c.group), c.before, c.after) for c in plan.changes])
        print(f"nodes chosen by {plan.chosen_by}")
        for note in plan.notes:
            print(f"note: {note}")
        if not plan.refused:
            print(f"commit this change to {plan.source_file} (a deploy with the old counts would undo the move):")
            for change in plan.changes:
                where = f" (line {lines[change.group]})" if change.group in lines else ""
                print(f"  {change.line()}{where}")
        if result.outcome == "planned":
            print("dry run: nothing changed; run again with --apply to move")
        elif result.outcome == "moved":
            print(result.message)
    for warning in result.warnings:
        print(f"hpdpd: warning: {warning}", file=sys.stderr)
    if result.outcome not in ("planned", "moved"):
        what = "refused" if result.outcome == "refused" else result.outcome
        print(f"hpdpd: rebalance {what}: {' '.join(result.message.split())}", file=sys.stderr)
