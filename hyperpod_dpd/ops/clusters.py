"""Reading the HyperPod cluster (groups, nodes) and its EKS cluster.

``describe_*`` return ``None`` for a missing cluster and raise any other error; ``read_*`` give the three-way
:class:`~hyperpod_dpd.ops.lookup.Lookup` (found, not found, or unknown with the reason and the permission it needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.aws import is_not_found
from hyperpod_dpd.ops.answers import member
from hyperpod_dpd.ops.lookup import Lookup, look_up

IN_SERVICE = "InService"
FAILED = "Failed"
# Statuses after which a cluster will not become InService without someone acting (SageMaker API, ClusterStatus).
HYPERPOD_TERMINAL = frozenset({FAILED, "Deleting"})
EKS_ACTIVE = "ACTIVE"
HYPERPOD_PERMISSION = "sagemaker:DescribeCluster"
NODES_PERMISSION = "sagemaker:ListClusterNodes"
EKS_PERMISSION = "eks:DescribeCluster"


@dataclass(frozen=True, kw_only=True)
class GroupState:
    name: str
    instance_type: str
    current: int
    target: int


@dataclass(frozen=True, kw_only=True)
class NodeState:
    instance_id: str
    instance_group: str
    instance_type: str
    status: str
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class HyperPodState:
    name: str
    status: str
    failure_message: str
    groups: tuple[GroupState, ...]

    @property
    def complete(self) -> bool:
        """Every group has as many instances as it asked for."""
        return all(g.current >= g.target for g in self.groups)

    def current_counts(self) -> dict[str, int]:
        return {g.name: g.current for g in self.groups}


@dataclass(frozen=True, kw_only=True)
class EksState:
    name: str
    status: str
    version: str
    authentication_mode: str | None


def describe_hyperpod(sagemaker: Any, name: str) -> HyperPodState | None:
    try:
        data = sagemaker.describe_cluster(ClusterName=name)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    groups = tuple(
        GroupState(name=str(g.get("InstanceGroupName", "")), instance_type=g.get("InstanceType", ""),
                   current=int(g.get("CurrentCount", 0)), target=int(g.get("TargetCount", g.get("InstanceCount", 0))))
        for g in data.get("InstanceGroups", []))
    return HyperPodState(name=data.get("ClusterName", name), status=data.get("ClusterStatus", ""),
                         failure_message=" ".join(str(data.get("FailureMessage") or "").split()), groups=groups)


def list_nodes(sagemaker: Any, name: str) -> tuple[NodeState, ...]:
    nodes: list[NodeState] = []
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=name):
        for node in page.get("ClusterNodeSummaries", []):
            status = node.get("InstanceStatus") or {}
            nodes.append(NodeState(instance_id=node.get("InstanceId", ""), instance_group=node.get("InstanceGroupName", ""),
                                   instance_type=node.get("InstanceType", ""), status=status.get("Status", ""),
                                   message=" ".join(str(status.get("Message") or "").split())))
    return tuple(nodes)


def describe_eks(eks: Any, name: str) -> EksState | None:
    try:
        data = member(eks.describe_cluster(name=name), "cluster", client=eks, operation="DescribeCluster")
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    access = data.get("accessConfig") or {}
    return EksState(name=data.get("name", name), status=data.get("status", ""), version=str(data.get("version", "")),
                    authentication_mode=access.get("authenticationMode"))


def read_hyperpod(sagemaker: Any, name: str) -> Lookup[HyperPodState]:
    return look_up(lambda: describe_hyperpod(sagemaker, name), permission=HYPERPOD_PERMISSION)


def read_nodes(sagemaker: Any, name: str) -> Lookup[tuple[NodeState, ...]]:
    return look_up(lambda: list_nodes(sagemaker, name), permission=NODES_PERMISSION)


def read_eks(eks: Any, name: str) -> Lookup[EksState]:
    return look_up(lambda: describe_eks(eks, name), permission=EKS_PERMISSION)
