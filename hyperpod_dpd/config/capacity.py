"""Capacity-aware scaling: what the endpoints' replicas need of the HyperPod GPU groups, and the prefill:decode ratio.

* **Demand** of one DPD role: its maximum replicas (``autoscaling.max_replicas``, else ``replicas``) and minimum
  replicas (``autoscaling.min_replicas``, else ``replicas``), each pod taking ``gpus_per_pod`` GPUs.
* **Capacity** of one group: its most nodes (``autoscaling.max_nodes``, else ``count``; 0 when parked) times the
  GPUs of its instance type.
* **Placement**: a role runs on its named ``instance_group``; a role placed by its role label alone runs on the role's
  only active group, or on the pool of the role's active groups when there are several.
* **Ratio**: prefill replicas per decode replica within ``endpoints[].ratio`` (default 1 to 4): the fixed replicas,
  and with autoscaling the floor (minimum replicas) and the ceiling (maximum replicas) of both roles.

:func:`role_capacity_issues` checks one role against its named group (called by the endpoint checks);
:func:`shared_capacity_issues` checks every GPU group against all the endpoints of the environment that can land on it
(called once by the environment); :func:`placements` is what ``hpdpd preflight`` reports as headroom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_sections import DEFAULT_RATIO as DEFAULT_RATIO  # re-exported: the ratio model
from hyperpod_dpd.config.endpoint_sections import DEFAULT_RATIO_MAX as DEFAULT_RATIO_MAX
from hyperpod_dpd.config.endpoint_sections import DEFAULT_RATIO_MIN as DEFAULT_RATIO_MIN
from hyperpod_dpd.config.endpoint_sections import ReplicaRatio as ReplicaRatio
from hyperpod_dpd.config.hyperpod import HyperPodConfig, InstanceGroup
from hyperpod_dpd.errors import Issue

if TYPE_CHECKING:
    from hyperpod_dpd.catalogue.operator import DpdRole
    from hyperpod_dpd.config.endpoint_fields import EndpointFields, RoleConfig

# -- demand and placement ------------------------------------------------------------------------------------------------

def max_replicas(config: RoleConfig) -> int:
    return config.autoscaling.max_replicas if config.autoscaling else config.replicas


def min_replicas(config: RoleConfig) -> int:
    return config.autoscaling.min_replicas if config.autoscaling else config.replicas


def gpus_per_node(group: InstanceGroup) -> int:
    return INSTANCE_TYPES[group.instance_type].gpu_count


@dataclass(frozen=True)
class Demand:
    """One role of one endpoint: its pods' GPUs at its minimum and maximum replicas."""

    endpoint: str
    role: str
    gpus_per_pod: int
    min_replicas: int
    max_replicas: int
    named: bool  # placed on a named instance_group (checked on its own by role_capacity_issues)

    @property
    def max_gpus(self) -> int:
        return self.max_replicas * self.gpus_per_pod

    @property
    def min_gpus(self) -> int:
        return self.min_replicas * self.gpus_per_pod

    def describe(self) -> str:
        return f"{self.endpoint} {self.role} {self.max_replicas} x {self.gpus_per_pod}"


@dataclass(frozen=True)
class Placement:
    """Where the endpoints' roles land: ``by_group`` (a named group, or the role's only active group) and
    ``by_role`` (roles placed by role label over several active groups of that role)."""

    by_group: dict[str, list[Demand]] = field(default_factory=dict)
    by_role: dict[str, list[Demand]] = field(default_factory=dict)


def placements(hyperpod: HyperPodConfig, endpoints: Iterable[EndpointFields]) -> Placement:
    """The demand on each group; roles whose placement the endpoint checks refuse are left out."""
    groups = {g.name: g for g in hyperpod.instance_groups}
    placed = Placement()
    for endpoint in endpoints:
        for role in DPD_ROLES:
            config = endpoint.role(role)
            gpus = endpoint.gpus_per_pod
            if gpus > endpoint.instance.gpu_count:
                continue  # tensor_parallel_size beyond the instance: refused by the endpoint checks
            demand = Demand(endpoint.name, role, gpus, min_replicas(config), max_replicas(config),
                            named=config.instance_group is not None)
            if config.instance_group is not None:
                group = groups.get(config.instance_group)
                if group and group.role == role and group.instance_type == endpoint.instance_type and not group.parked:
                    placed.by_group.setdefault(group.name, []).append(demand)
                continue
            pool = [g for g in hyperpod.groups(role) if not g.parked]
            if len(pool) == 1:
                placed.by_group.setdefault(pool[0].name, []).append(demand)
            elif pool:
                placed.by_role.setdefault(role, []).append(demand)
    return placed


def _held(group: InstanceGroup) -> str:
    """``count 2`` or ``autoscaling.max_nodes 4``: what bounds the group."""
    return f"autoscaling.max_nodes {group.max_nodes}" if group.autoscaled else f"count {group.count}"


LISTED = 6  # demands named in one line; the rest are counted (an environment may declare dozens of endpoints)


def _listed(demands: Iterable[Demand]) -> str:
    items = [d.describe() for d in demands]
    shown = ", ".join(items[:LISTED]) or "no endpoint"
    return shown + (f" and {len(items) - LISTED} more" if len(items) > LISTED else "")


# -- checks --------------------------------------------------------------------------------------------------------------

def role_capacity_issues(endpoint: EndpointFields, role: DpdRole, group: InstanceGroup, path: str) -> Iterator[Issue]:
    """One role on its named, active group of the right role and type: its replicas, then its maximum replicas, must
    fit the group's most nodes."""
    config = endpoint.role(role)
    gpus = endpoint.gpus_per_pod
    per_node = gpus_per_node(group) // gpus if gpus else 0
    if not per_node:
        return  # tensor_parallel_size beyond the instance: refused by the endpoint checks
    nodes = math.ceil(config.replicas / per_node)
    if nodes > group.max_nodes:
        yield Issue(join(path, f"{role}.replicas"), config.replicas,
                    f"needs {nodes} nodes ({per_node} pod(s) of {gpus} GPUs per node), but instance group "
                    f"'{group.name}' has {_held(group)}")
        return
    top = max_replicas(config)
    nodes = math.ceil(top / per_node)
    if config.autoscaling and nodes > group.max_nodes:
        yield Issue(join(path, f"{role}.autoscaling.max_replicas"), top,
                    f"needs {nodes} nodes at its maximum ({top} x {gpus} = {top * gpus} GPUs, {per_node} pod(s) per "
                    f"node), but instance group '{group.name}' has {_held(group)} "
                    f"({group.max_nodes * gpus_per_node(group)} GPUs); raise the group's maximum or lower max_replicas")


def nodes_needed(demands: Iterable[Demand], gpn: int) -> int:
    """The nodes of ``gpn`` GPUs that hold the demands' pods at their maximum replicas (a pod never spans nodes).

    When every pod size divides the next larger one and ``gpn`` (the endpoint checks make tensor_parallel_size divide
    the instance's GPU count, and every GPU type of the catalogue has 8), pods pack without gaps and the GPU total
    decides: ``ceil(GPUs / gpn)``. Otherwise each size is counted on nodes of its own, which is never fewer than
    needed (fail safe: such a set may be refused although it would just fit)."""
    pods: dict[int, int] = {}
    for d in demands:
        pods[d.gpus_per_pod] = pods.get(d.gpus_per_pod, 0) + d.max_replicas
    sizes = sorted(pods)
    chain = all(b % a == 0 for a, b in zip(sizes, sizes[1:], strict=False))
    if chain and all(size <= gpn and gpn % size == 0 for size in sizes):
        return math.ceil(sum(size * count for size, count in pods.items()) / gpn)
    return sum(math.ceil(count / (gpn // size)) if size <= gpn else count * math.ceil(size / gpn)
               for size, count in pods.items())


@dataclass(frozen=True, kw_only=True)
class _Overflow:
    """One group (or pool) the endpoints' maximum replicas do not fit; ``endpoints`` is who shares it."""

    path: str
    value: int
    message: str
    also: str  # the same overflow, told as a clause of another group's line
    endpoints: tuple[str, ...]


def shared_capacity_issues(root: Any, groups_path: str) -> Iterator[Issue]:
    """Every active GPU group against every endpoint that can land on it: the endpoints' replicas (autoscaled roles at
    ``max_replicas``) must fit the group's most nodes together (``count``, or ``autoscaling.max_nodes``; a parked group
    holds none, and an endpoint on it is refused by the endpoint checks); an autoscaled group's ``min_nodes`` must be
    held by their minimum replicas; roles placed by role label over several groups must fit the pool of them.

    Groups that the same endpoints overfill are told in one line (two endpoints on one prefill and one decode node are
    one mistake). Skipped while the groups themselves are invalid; an endpoint with issues of its own (a role beyond its
    group included, :func:`role_capacity_issues`) is left out: its own line names the root cause."""
    hyperpod: HyperPodConfig = root.hyperpod
    if next(iter(hyperpod.issues(root, "hyperpod")), None) is not None:
        return  # root cause alone
    # An endpoint refused on its own (a duplicate name or namespace, a role beyond its group) is not counted again.
    endpoints = [e for i, e in enumerate(getattr(root, "endpoints", ()))
                 if next(iter(e.issues(root, join("endpoints", i))), None) is None]
    placed = placements(hyperpod, endpoints)
    indexes = {g.name: i for i, g in enumerate(hyperpod.instance_groups)}
    overflows: list[_Overflow] = []
    for group in hyperpod.instance_groups:
        gpn = gpus_per_node(group)
        if group.role == "system" or group.parked or not gpn:
            continue  # a CPU type in a GPU role is refused with the group's allowed types
        where = join(groups_path, indexes[group.name])
        demands = placed.by_group.get(group.name, [])
        overflow = _group_overflow(group, demands, gpn, where)
        if overflow:
            overflows.append(overflow)
        if group.autoscaling is not None:
            floor = math.ceil(sum(d.min_gpus for d in demands) / gpn)
            if group.autoscaling.min_nodes > floor and group.role not in placed.by_role:
                yield Issue(join(join(where, "autoscaling"), "min_nodes"), group.autoscaling.min_nodes,
                            f"the endpoints' minimum replicas on instance group '{group.name}' occupy {floor} node(s) "
                            f"({_listed(demands)}); Karpenter removes empty nodes, so the group would drop below "
                            "min_nodes: lower min_nodes, or raise the endpoints' min_replicas")
    for role, demands in placed.by_role.items():
        overflow = _pool_overflow(hyperpod, role, demands, placed, indexes, groups_path)
        if overflow:
            overflows.append(overflow)
    yield from _merged(overflows)


def _group_overflow(group: InstanceGroup, demands: list[Demand], gpn: int, where: str) -> _Overflow | None:
    nodes = nodes_needed(demands, gpn)
    if nodes <= group.max_nodes:
        return None
    capacity, need = group.max_nodes * gpn, sum(d.max_gpus for d in demands)
    if group.autoscaled:
        path, value = join(join(where, "autoscaling"), "max_nodes"), group.max_nodes
        text = (f"holds {capacity} GPUs ({group.max_nodes} x {gpn}), but the endpoints' maximum replicas on instance "
                f"group '{group.name}' need {need}: {_listed(demands)}; raise max_nodes to {nodes} or lower the "
                "endpoints' max_replicas")
    else:
        path, value = join(where, "count"), group.count
        text = (f"holds {capacity} GPUs ({group.count} x {gpn}), but the endpoints' replicas on instance group "
                f"'{group.name}' need {need}{_at_most(demands)}: {_listed(demands)}; an environment's endpoints share "
                f"its groups: raise count to {nodes}, or lower the endpoints' replicas, or remove an endpoint")
    also = (f"instance group '{group.name}' is short too: {path} {value} holds {capacity} GPUs, they need {need} "
            f"({_listed(demands)}); raise it to {nodes}")
    return _Overflow(path=path, value=value, message=text, also=also, endpoints=_names(demands))


def _pool_overflow(hyperpod: HyperPodConfig, role: str, demands: list[Demand], placed: Placement,
                   indexes: dict[str, int], groups_path: str) -> _Overflow | None:
    """Roles placed by role label over several active groups of ``role``, with the named roles on those groups."""
    pool = [g for g in hyperpod.groups(role) if not g.parked]
    shared = demands + [d for g in pool for d in placed.by_group.get(g.name, [])]
    capacity = sum(g.max_nodes * gpus_per_node(g) for g in pool)
    need = sum(d.max_gpus for d in shared)
    if need <= capacity:
        return None
    names = ", ".join(f"'{g.name}'" for g in pool)
    scaled = [g for g in pool if g.autoscaled]
    if scaled:
        path = join(join(join(groups_path, indexes[scaled[0].name]), "autoscaling"), "max_nodes")
        value = scaled[0].max_nodes
        text = (f"the {role} groups {names} hold {capacity} GPUs at most, but the endpoints' maximum replicas on them "
                f"need {need}: {_listed(shared)}; raise their maximum nodes or lower max_replicas")
    else:
        path, value = join(join(groups_path, indexes[pool[0].name]), "count"), pool[0].count
        text = (f"the {role} groups {names} hold {capacity} GPUs, but the endpoints' replicas on them need "
                f"{need}{_at_most(shared)}: {_listed(shared)}; raise their counts, or lower the endpoints' replicas")
    also = f"the {role} groups {names} are short too: {capacity} GPUs, {need} needed ({_listed(shared)})"
    return _Overflow(path=path, value=value, message=text, also=also, endpoints=_names(shared))


def _merged(overflows: list[_Overflow]) -> Iterator[Issue]:
    """One line per set of endpoints: the first group they overfill, with the others as clauses."""
    by_endpoints: dict[tuple[str, ...], list[_Overflow]] = {}
    for overflow in overflows:
        by_endpoints.setdefault(overflow.endpoints, []).append(overflow)
    for first, *rest in by_endpoints.values():
        yield Issue(first.path, first.value, "; ".join([first.message, *(o.also for o in rest)]))


def _names(demands: Iterable[Demand]) -> tuple[str, ...]:
    return tuple(sorted({d.endpoint for d in demands}))


def _at_most(demands: Iterable[Demand]) -> str:
    """`` at most`` when an autoscaled role counts with its maximum replicas."""
    return " at most" if any(d.max_replicas != d.min_replicas for d in demands) else ""


def ratio_issues(endpoint: EndpointFields, path: str) -> Iterator[Issue]:
    """The first of: fixed replicas, floor (minimum replicas) and ceiling (maximum replicas) whose prefill:decode
    ratio is outside ``ratio`` (or the default, unless the endpoint opts into several decoders). Replicas outside
    their autoscaling range are reported by the endpoint checks alone."""
    bounds = endpoint.ratio or (None if endpoint.decode.allow_multiple_replicas else DEFAULT_RATIO)
    prefill, decode = endpoint.prefill, endpoint.decode
    if bounds is None or any(c.autoscaling and not c.autoscaling.min_replicas <= c.replicas <= c.autoscaling.max_replicas
                             for c in (prefill, decode)):
        return
    named = ("ratio" if endpoint.ratio else
             "the default ratio (DPD guidance: 1:1 balanced, up to 3:1 prefill-heavy; set ratio to change it)")
    side: DpdRole = "prefill" if prefill.autoscaling else "decode"  # the field reported for floor and ceiling
    cases = [("fixed replicas", "prefill.replicas", prefill.replicas, prefill.replicas, decode.replicas)]
    if prefill.autoscaling or decode.autoscaling:
        cases += [
            ("minimum replicas", f"{side}.autoscaling.min_replicas", min_replicas(endpoint.role(side)),
             min_replicas(prefill), min_replicas(decode)),
            ("maximum replicas", f"{side}.autoscaling.max_replicas", max_replicas(endpoint.role(side)),
             max_replicas(prefill), max_replicas(decode)),
        ]
    for what, field_path, shown, p, d in cases:
        if d == 0:
            if p:
                yield Issue(join(path, field_path), shown,
                            f"at the {what}, {p} prefill run with 0 decode replicas: prefillers without a decoder serve "
                            "nothing; keep a decoder, or let prefill scale to 0 too")
                return
            continue
        ratio = p / d
        if not bounds.min <= ratio <= bounds.max:
            yield Issue(join(path, field_path), shown,
                        f"at the {what}, {p} prefill per {d} decode (ratio {ratio:g}) is outside {named}: "
                        f"{bounds.min:g} to {bounds.max:g} prefill per decode")
            return
