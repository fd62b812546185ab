"""Room for a second IEC generation beside the serving one, before ``hpdpd rollout promote`` creates it.

Per role, the new generation's pods (``gpus_per_pod`` ``nvidia.com/gpu`` each) must fit on the role's nodes: the
nodes' allocatable GPUs minus what unfinished pods of every namespace request (the Kubernetes scheduler's own sum).
An autoscaled instance group (``hyperpod.instance_groups[].autoscaling``) may still add ``max_nodes`` minus the nodes
it runs now: HyperPod's Karpenter launches them for pods that are pending (``hyperpod_dpd.config.hyperpod``,
``InstanceGroup``; its NodePool's limits are ``max_nodes``), so their GPUs count too, less what pods already waiting
for such nodes request. Those are "may add" nodes: the new pods stay Pending until Karpenter brings them (or the
wait times out), and pods that wait by node affinity rather than ``nodeSelector`` are not seen here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.config.capacity import gpus_per_node
from hyperpod_dpd.config.hyperpod import GROUP_LABEL
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.workloads import gpu_requests, nodes


@dataclass(frozen=True, kw_only=True)
class Room:
    """Free GPUs on one role's nodes, how many of the new generation's pods fit there, and how many more the role's
    autoscaled groups may still add."""

    role: str
    nodes: int
    free_gpus: int
    fits: int
    needed: int
    may_add_nodes: int = 0
    may_add_pods: int = 0
    groups: tuple[str, ...] = ()  # the autoscaled groups that may add them

    @property
    def enough(self) -> bool:
        return self.fits + self.may_add_pods >= self.needed

    @property
    def waits_for_nodes(self) -> bool:
        """The pods fit only once Karpenter adds nodes."""
        return self.fits < self.needed <= self.fits + self.may_add_pods

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "nodes": self.nodes, "free_gpus": self.free_gpus, "fits": self.fits,
                "needed": self.needed, "may_add_nodes": self.may_add_nodes, "may_add_pods": self.may_add_pods,
                "autoscaled_groups": list(self.groups)}


def _within(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def room(kube: Kube, endpoint: Any, groups: Sequence[Any] = ()) -> list[Room]:
    """Per role: pods of ``gpus_per_pod`` GPUs that fit on the role's nodes, and what its autoscaled groups (of
    ``groups``, the environment's instance groups) may add (a role sharing nodes with the other role counts both
    roles' pods against the same nodes)."""
    cluster, requests = nodes(kube), gpu_requests(kube)
    per_pod = endpoint.gpus_per_pod
    selectors = {role: endpoint.node_selector(role) for role in ("prefill", "decode")}
    rooms = []
    for role, selector in selectors.items():
        chosen = [n for n in cluster.values() if n.matches(selector)]
        free = {n.name: max(0, n.allocatable_gpus - requests.by_node.get(n.name, 0)) for n in chosen}
        needed = sum(endpoint.role(r).replicas for r, s in selectors.items() if s == selector)
        named = endpoint.role(role).instance_group
        scaling = [g for g in groups if g.role == role and g.autoscaling is not None
                   and named in (None, g.name) and _within(selector, g.node_labels)]
        add_nodes = add_pods = 0
        for group in scaling:
            running = sum(1 for n in cluster.values() if n.labels.get(GROUP_LABEL) == group.name)
            extra = max(0, group.autoscaling.max_nodes - running)
            waiting = sum(gpus for wanted, gpus in requests.unscheduled if _within(wanted, group.node_labels))
            pods_per_node = gpus_per_node(group) // per_pod if per_pod else 0
            add_nodes += extra
            add_pods += max(0, extra * pods_per_node - (math.ceil(waiting / per_pod) if per_pod else 0))
        rooms.append(Room(role=role, nodes=len(chosen), free_gpus=sum(free.values()),
                          fits=sum(f // per_pod for f in free.values()) if per_pod else 0, needed=needed,
                          may_add_nodes=add_nodes, may_add_pods=add_pods, groups=tuple(g.name for g in scaling)))
    return rooms


def room_problem(rooms: Sequence[Room], per_pod: int) -> str | None:
    short = [r for r in rooms if not r.enough]
    if not short:
        return None
    parts = "; ".join(f"{r.role}: {r.free_gpus} free GPU(s) on {r.nodes} node(s)"
                      + (f", and Karpenter may add {r.may_add_nodes} node(s) of {', '.join(r.groups)} for "
                         f"{r.may_add_pods} pod(s)" if r.groups else "")
                      + f", {r.needed} pod(s) of {per_pod} GPU(s) needed" for r in short)
    return (f"no room for a second generation beside the serving one ({parts}): add nodes to the instance groups, "
            "or pass --in-place to replace the serving generation (downtime)")


def room_notes(rooms: Sequence[Room]) -> list[str]:
    """What the promote waits for when the pods fit only on nodes Karpenter may still add."""
    return [f"room: {r.role} has room for {r.fits} of {r.needed} pod(s) on its nodes; Karpenter may add "
            f"{r.may_add_nodes} node(s) of {', '.join(r.groups)}: the new pods stay Pending until it does"
            for r in rooms if r.waits_for_nodes]
