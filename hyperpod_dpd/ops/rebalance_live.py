"""The live side of ``hpdpd rebalance``: what SageMaker says of the cluster, the move itself, and watching it.

Facts (SageMaker API, botocore 1.44.8 ``botocore/data/sagemaker/2017-07-24/service-2.json``, operation
``MoveClusterNodes`` and its shapes; the same text is the API reference page ``API_MoveClusterNodes``):

* "Both clusters must be ``InService``, use Amazon EKS orchestration, and use ``Continuous`` as the
  ``NodeProvisioningMode``" (read here from ``DescribeCluster``: ``ClusterStatus``, ``Orchestrator.Eks``,
  ``NodeProvisioningMode``).
* "The operation is asynchronous and returns after it accepts the nodes for the move. While a node moves, its status
  is ``DetachInProgress`` and then ``AttachInProgress`` [...] To track the node, call ``DescribeClusterNode`` or
  ``ListClusterNodes``": the move is done when every accepted node is listed in the target group as ``Running``.
* ``NodeIds`` "Each node is evaluated separately, so some nodes can be moved while others fail"; the response's
  ``Successful`` (accepted instance ids) and ``Failed`` (``NodeId``, ``Code``, ``Message``) are returned "when you
  specify ``NodeIds``", so the toolkit always names the nodes.
* ``ClientToken``: "If you retry the request with the same client token and the same parameters within 8 hours, the
  service returns the original response. It doesn't start a new move. If you reuse a client token with different
  parameters, the request fails." Length 1-64, pattern ``[\\x21-\\x7E]+``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.aws import error_code, error_message, is_not_found
from hyperpod_dpd.ops.wait import Observation, Probe

# ClusterInstanceStatus values (service-2.json) while a node moves, when it is done, and when it will not get there.
MOVING = frozenset({"DetachInProgress", "AttachInProgress"})
RUNNING = "Running"
LOST = frozenset({"Failure", "ShuttingDown", "NotFound"})
CONTINUOUS = "Continuous"  # ClusterNodeProvisioningMode
MAX_NODES_PER_MOVE = 50  # MoveClusterNodeIds: max 50
CLIENT_TOKEN_PREFIX = "hpdpd-rebalance-"  # + 40 hex characters: 56 of the 64 allowed  # noqa: S105 - an idempotency key
# The Kubernetes node name of a HyperPod EKS instance: "hyperpod-<instance id>", as public HyperPod EKS examples show
# it; no API page states it [?]. A node matched neither by it nor by the instance's PrivateDnsHostname
# (ClusterNodeSummary) is "pods unknown": never preferred over a node known to be idle.
KUBE_NODE_PREFIX = "hyperpod-"


@dataclass(frozen=True, kw_only=True)
class LiveGroup:
    """One instance group as ``DescribeCluster`` reports it (``ClusterInstanceGroupDetails``)."""

    name: str
    instance_type: str
    current: int
    target: int
    min_count: int | None
    status: str
    training_plan_arn: str | None
    threads_per_core: int | None
    subnets: tuple[str, ...]  # OverrideVpcConfig.Subnets; () when the group uses the cluster's
    active_operations: Mapping[str, int]


@dataclass(frozen=True, kw_only=True)
class LiveNode:
    instance_id: str
    group: str
    status: str
    dns_name: str = ""  # PrivateDnsHostname


@dataclass(frozen=True, kw_only=True)
class LiveCluster:
    arn: str
    name: str
    status: str
    eks: bool
    provisioning_mode: str | None
    groups: Mapping[str, LiveGroup]
    nodes: tuple[LiveNode, ...]

    def nodes_of(self, group: str) -> tuple[LiveNode, ...]:
        return tuple(n for n in self.nodes if n.group == group)


def _group(data: Mapping[str, Any]) -> LiveGroup:
    override = data.get("OverrideVpcConfig") or {}
    return LiveGroup(name=str(data.get("InstanceGroupName", "")), instance_type=str(data.get("InstanceType", "")),
                     current=int(data.get("CurrentCount", 0)), target=int(data.get("TargetCount", 0)),
                     min_count=data.get("MinCount"), status=str(data.get("Status") or ""),
                     training_plan_arn=data.get("TrainingPlanArn") or None, threads_per_core=data.get("ThreadsPerCore"),
                     subnets=tuple(sorted(override.get("Subnets") or ())),
                     active_operations=dict(data.get("ActiveOperations") or {}))


def read_cluster(sagemaker: Any, name: str) -> LiveCluster | None:
    """The cluster, its groups and every node (``ListClusterNodes``, all pages); None when it does not exist (any
    other failure raises: the command stops with one line)."""
    try:
        data = sagemaker.describe_cluster(ClusterName=name)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    nodes = read_nodes(sagemaker, name)
    groups = {g.name: g for g in (_group(item) for item in data.get("InstanceGroups") or [])}
    return LiveCluster(arn=str(data.get("ClusterArn", "")), name=str(data.get("ClusterName", name)),
                       status=str(data.get("ClusterStatus", "")), eks=bool((data.get("Orchestrator") or {}).get("Eks")),
                       provisioning_mode=data.get("NodeProvisioningMode"), groups=groups, nodes=tuple(nodes))


def gpu_pods_by_instance(nodes: Sequence[LiveNode], kube_nodes: Sequence[str],
                         gpus_by_kube_node: Mapping[str, int]) -> dict[str, int | None]:
    """GPUs that unfinished pods request on each instance's Kubernetes node; None when no Kubernetes node is known to
    be that instance (see :data:`KUBE_NODE_PREFIX`)."""
    known = set(kube_nodes)
    found: dict[str, int | None] = {}
    for node in nodes:
        names = [n for n in (f"{KUBE_NODE_PREFIX}{node.instance_id}", node.dns_name) if n and n in known]
        found[node.instance_id] = gpus_by_kube_node.get(names[0], 0) if names else None
    return found


def client_token(cluster_arn: str, source: str, target: str, node_ids: Sequence[str],
                 group_nodes: Sequence[str]) -> str:
    """The same move of the same cluster state gets the same token, so a re-run after a lost answer is the same
    request to the service (its 8-hour idempotency window). ``group_nodes`` (the two groups' instance ids before the
    move) makes a move of the same node after the cluster changed a new request."""
    text = "\n".join([cluster_arn, source, target, ",".join(sorted(node_ids)), ",".join(sorted(group_nodes))])
    return CLIENT_TOKEN_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:40]


def move_request(*, cluster_arn: str, source: str, target: str, node_ids: Sequence[str], token: str) -> dict[str, Any]:
    """``MoveClusterNodes`` within one cluster (source and target cluster ARN are the same), naming the nodes."""
    return {"SourceClusterArn": cluster_arn, "SourceInstanceGroupName": source, "TargetClusterArn": cluster_arn,
            "TargetInstanceGroupName": target, "NodeIds": list(node_ids), "ClientToken": token}


@dataclass(frozen=True, kw_only=True)
class MoveAnswer:
    """What ``MoveClusterNodes`` accepted and refused; ``refused`` when the whole request failed (the service's
    reason: "If none of the specified nodes can be moved, the request fails and no nodes are moved")."""

    accepted: tuple[str, ...] = ()
    failed: tuple[tuple[str, str, str], ...] = ()  # (NodeId, Code, Message)
    refused: str = ""


def move(sagemaker: Any, request: Mapping[str, Any]) -> MoveAnswer:
    """Call ``MoveClusterNodes``. A ``ValidationException`` (the request refused as a whole) is the answer's
    ``refused``; any other failure (denied, throttled beyond the retries, unreachable) raises."""
    from botocore.exceptions import ClientError

    try:
        answer = sagemaker.move_cluster_nodes(**request)
    except ClientError as exc:
        if error_code(exc) == "ValidationException":
            return MoveAnswer(refused=error_message(exc) or "ValidationException")
        raise
    failed = tuple((str(f.get("NodeId", "")), str(f.get("Code", "")), " ".join(str(f.get("Message", "")).split()))
                   for f in answer.get("Failed") or [])
    return MoveAnswer(accepted=tuple(str(i) for i in answer.get("Successful") or []), failed=failed)


def move_probe(sagemaker: Any, cluster: str, *, node_ids: Sequence[str], target: str) -> Probe:
    """Ready when every node of ``node_ids`` is listed in ``target`` as Running; failed when one is ``Failure``,
    ``ShuttingDown`` or ``NotFound``. A node not listed at all is still moving (it leaves the source before it
    appears in the target)."""
    wanted = tuple(node_ids)

    def probe() -> Observation:
        seen = {n.instance_id: n for n in read_nodes(sagemaker, cluster) if n.instance_id in wanted}
        states = []
        for node_id in wanted:
            node = seen.get(node_id)
            states.append(f"{node_id} {node.status} in {node.group}" if node else f"{node_id} not listed")
            if node and node.status in LOST:
                return Observation(state="; ".join(states), failed=True,
                                   message=f"{node_id} is {node.status} in instance group {node.group}")
        done = all(node_id in seen and seen[node_id].group == target and seen[node_id].status == RUNNING
                   for node_id in wanted)
        return Observation(state="; ".join(states), ready=done)

    return probe


def read_nodes(sagemaker: Any, cluster: str) -> list[LiveNode]:
    """Every node of the cluster (``ListClusterNodes``, all pages)."""
    nodes = []
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster):
        for node in page.get("ClusterNodeSummaries") or []:
            nodes.append(LiveNode(instance_id=str(node.get("InstanceId", "")), group=str(node.get("InstanceGroupName", "")),
                                  status=str((node.get("InstanceStatus") or {}).get("Status", "")),
                                  dns_name=str(node.get("PrivateDnsHostname") or "")))
    return nodes
