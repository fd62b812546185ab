"""``hpdpd rebalance``: the plan of moving nodes between an environment's prefill and decode instance groups.

:func:`plan_rebalance` turns the typed environment and the live cluster (:mod:`hyperpod_dpd.ops.rebalance_live`)
into a :class:`RebalancePlan`: the groups, the nodes to move and why those, the counts before and after, the config
change to commit, and every reason the move is refused. Nothing here calls AWS or prints.

Refused (each reason is one line of :attr:`RebalancePlan.refusals`):

* what ``MoveClusterNodes`` requires (SageMaker API reference, ``MoveClusterNodes``): the cluster ``InService``, EKS
  orchestration and ``Continuous`` provisioning; Running nodes (``InvalidNodeStatus``: "the node is not
  ``Running``"); the target group supporting the node's instance type (``NodeInstanceTypeMismatch``) and its subnet
  (``InvalidNodeStatus``: "is not in a subnet of the target instance group"); the source kept at its minimum
  instance count ("The request fails if moving the eligible nodes would reduce the source instance group below its
  minimum instance count"). "The source and target instance groups must also use compatible configurations" is not
  spelled out [?], so groups that differ in training plan or threads per core are refused too (fail safe);
* what the toolkit requires: no autoscaled group (Karpenter owns their size), no scaling or move under way, the
  configuration's ``count`` equal to the live target count (else the config change to commit would be wrong), the
  source group's remaining nodes holding the maximum replicas of every endpoint on it
  (:func:`hyperpod_dpd.config.capacity.nodes_needed`), one node per role at least, and the prefill:decode node ratio
  within the ratio bounds of the endpoints that span both groups (``endpoints[].ratio``, default 1 to 4 unless the
  endpoint allows several decoders: :func:`hyperpod_dpd.config.capacity.ratio_issues`) unless it moves closer to them;
  finally the configuration with the new counts must pass every check synthesis runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hyperpod_dpd.config.capacity import DEFAULT_RATIO, Demand, gpus_per_node, nodes_needed, placements
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.clusters import IN_SERVICE
from hyperpod_dpd.ops.rebalance_live import CONTINUOUS, MOVING, RUNNING, LiveCluster, LiveNode, client_token

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig
    from hyperpod_dpd.config.endpoints import DpdRole
    from hyperpod_dpd.config.hyperpod import InstanceGroup

ROLES: tuple[DpdRole, ...] = ("prefill", "decode")
INSERVICE_GROUP = "InService"  # InstanceGroupStatus


@dataclass(frozen=True, kw_only=True)
class ChosenNode:
    instance_id: str
    gpus_in_use: int | None  # GPUs unfinished pods request on it; None: not known (no cluster access, or unmatched)

    @property
    def why(self) -> str:
        if self.gpus_in_use is None:
            return "pods not known"
        return "runs no GPU pod" if self.gpus_in_use == 0 else f"runs pods of {self.gpus_in_use} GPU(s): they restart"


@dataclass(frozen=True, kw_only=True)
class CountChange:
    """One group's ``count`` in the configuration file, before and after the move."""

    path: str  # hyperpod.instance_groups[<i>].count
    group: str
    before: int
    after: int

    def line(self) -> str:
        return f"{self.path}: {self.before} -> {self.after}   # instance group '{self.group}'"


@dataclass(frozen=True, kw_only=True)
class RebalancePlan:
    env: str
    source_file: str
    cluster: str
    cluster_arn: str
    source: str
    target: str
    count: int
    nodes: tuple[ChosenNode, ...] = ()
    changes: tuple[CountChange, ...] = ()
    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    client_token: str = ""
    chosen_by: str = ""

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(n.instance_id for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {"environment": self.env, "cluster": self.cluster, "cluster_arn": self.cluster_arn or None,
                "from": self.source, "to": self.target, "count": self.count, "refused": self.refused,
                "refusals": list(self.refusals), "notes": list(self.notes), "chosen_by": self.chosen_by,
                "nodes": [{"instance_id": n.instance_id, "gpus_in_use": n.gpus_in_use, "why": n.why} for n in self.nodes],
                "counts": {c.group: {"before": c.before, "after": c.after} for c in self.changes},
                "config_change": {"file": self.source_file, "lines": [c.line() for c in self.changes]},
                "client_token": self.client_token or None}


def resolve_group(env: EnvironmentConfig, role: DpdRole, explicit: str | None, *, option: str) -> InstanceGroup:
    """The instance group of ``role`` that the move takes from or gives to: ``explicit`` (``--from-group`` /
    ``--to-group``), else the role's only group, else the one group of the role the endpoints name."""
    groups = env.hyperpod.groups(role)
    if explicit is not None:
        chosen = next((g for g in groups if g.name == explicit), None)
        if chosen is None:
            raise HpdpdError(f"{explicit!r} is not a {role} instance group of {env.source}; {role} groups: "
                             f"{', '.join(g.name for g in groups) or 'none'}")
        return chosen
    if len(groups) == 1:
        return groups[0]
    named = {e.role(role).instance_group for e in env.endpoints} - {None}
    if len(named) == 1:
        return next(g for g in groups if g.name in named)
    raise HpdpdError(f"{env.source} has several {role} groups ({', '.join(g.name for g in groups)}) and the endpoints "
                     f"do not name exactly one: pass {option} NAME")


def plan_rebalance(env: EnvironmentConfig, live: LiveCluster, *, source: InstanceGroup, target: InstanceGroup,
                   count: int, gpus_in_use: Mapping[str, int | None] | None = None) -> RebalancePlan:
    """The plan of moving ``count`` nodes from ``source`` to ``target`` (``gpus_in_use``: per instance id, from the
    cluster's pods; None when the command has no cluster access)."""
    refusals = [*_cluster_refusals(live), *_group_refusals(live, source, target)]
    eligible = [n for n in live.nodes_of(source.name) if n.status == RUNNING]
    nodes = _choose(eligible, count, gpus_in_use)
    if len(eligible) < count:
        refusals.append(f"instance group '{source.name}' has {len(eligible)} Running node(s), {count} to move (only "
                        "Running nodes can move: MoveClusterNodes InvalidNodeStatus)")
    after_source, after_target = source.count - count, target.count + count
    refusals += _count_refusals(env, live, source, target, after_source)
    refusals += _capacity_refusals(env, source, after_source)
    refusals += _ratio_refusals(env, source, target, after_source, after_target)
    if not refusals:
        refusals += config_problems(env, {source.name: after_source, target.name: after_target})
    indexes = {g.name: i for i, g in enumerate(env.hyperpod.instance_groups)}
    changes = tuple(CountChange(path=f"hyperpod.instance_groups[{indexes[g.name]}].count", group=g.name, before=g.count,
                                after=after) for g, after in ((source, after_source), (target, after_target)))
    notes = [f"{n.instance_id} runs pods of {n.gpus_in_use} GPU(s): they are evicted and start again on the "
             f"remaining nodes (a cold start)" for n in nodes if n.gpus_in_use]
    notes.append("the move replaces each node's root and secondary EBS volumes (their data is deleted); the instance, "
                 "its IP addresses and its capacity (training plan, reservation) move with it")
    by = ("GPU pods on each node (from the cluster): idle nodes first, then by instance id" if gpus_in_use is not None
          else "instance id: AWS alone does not say which nodes run endpoint pods; pass --kubeconfig to prefer idle ones")
    token = client_token(live.arn, source.name, target.name, [n.instance_id for n in nodes],
                         [n.instance_id for n in (*live.nodes_of(source.name), *live.nodes_of(target.name))])
    return RebalancePlan(env=env.name, source_file=env.source, cluster=live.name, cluster_arn=live.arn,
                         source=source.name, target=target.name, count=count, nodes=nodes, changes=changes,
                         refusals=tuple(dict.fromkeys(refusals)), notes=tuple(notes), client_token=token, chosen_by=by)


def _choose(eligible: Sequence[LiveNode], count: int, gpus: Mapping[str, int | None] | None) -> tuple[ChosenNode, ...]:
    """Nodes known to run no GPU pod first, then nodes whose pods are not known, then the least busy; instance id
    breaks ties, so the same cluster gives the same choice (and the same ClientToken)."""
    def rank(node: LiveNode) -> tuple[int, int, str]:
        used = None if gpus is None else gpus.get(node.instance_id)
        return (0 if used == 0 else 1 if used is None else 2, used or 0, node.instance_id)

    chosen = sorted(eligible, key=rank)[:count]
    return tuple(ChosenNode(instance_id=n.instance_id, gpus_in_use=None if gpus is None else gpus.get(n.instance_id))
                 for n in chosen)


def _cluster_refusals(live: LiveCluster) -> list[str]:
    found = []
    if live.status != IN_SERVICE:
        found.append(f"cluster {live.name} is {live.status or 'of unknown status'}; MoveClusterNodes needs InService")
    if not live.eks:
        found.append(f"cluster {live.name} reports no EKS orchestrator; MoveClusterNodes needs EKS orchestration")
    if live.provisioning_mode != CONTINUOUS:
        found.append(f"cluster {live.name} reports NodeProvisioningMode {live.provisioning_mode or 'none'}; "
                     "MoveClusterNodes needs Continuous")
    return found


def _group_refusals(live: LiveCluster, source: InstanceGroup, target: InstanceGroup) -> list[str]:
    found = []
    for group in (source, target):
        if group.autoscaling is not None:
            found.append(f"instance group '{group.name}' is autoscaled: Karpenter sizes it; move nodes between "
                         "fixed-count groups only")
    if source.instance_type != target.instance_type:
        found.append(f"the groups differ in instance type ({source.instance_type} and {target.instance_type}); "
                     "MoveClusterNodes needs a target group that supports the node's type (NodeInstanceTypeMismatch)")
    if source.training_plan_arn != target.training_plan_arn:
        found.append("the groups differ in training_plan_arn; whether a move between them keeps the plan is not "
                     "documented, so hpdpd refuses it")
    missing = [g.name for g in (source, target) if g.name not in live.groups]
    if missing:
        found.append(f"instance group(s) {', '.join(missing)} not in cluster {live.name}: deploy the platform first")
        return found
    before, after = live.groups[source.name], live.groups[target.name]
    if before.instance_type != after.instance_type:
        found.append(f"in the cluster the groups differ in instance type ({before.instance_type} and "
                     f"{after.instance_type}) (NodeInstanceTypeMismatch)")
    if before.training_plan_arn != after.training_plan_arn:
        found.append("in the cluster the groups differ in TrainingPlanArn; hpdpd refuses a move it cannot confirm "
                     "keeps the plan")
    if before.threads_per_core != after.threads_per_core:
        found.append(f"in the cluster the groups differ in ThreadsPerCore ({before.threads_per_core} and "
                     f"{after.threads_per_core}): not a configuration hpdpd can confirm is compatible")
    if before.subnets != after.subnets:
        found.append("in the cluster the groups use different subnets (OverrideVpcConfig): a node outside the target "
                     "group's subnets cannot move (InvalidNodeStatus)")
    for state in (before, after):
        busy = [name for name, running in state.active_operations.items() if running]
        if state.status and state.status != INSERVICE_GROUP:
            found.append(f"instance group '{state.name}' is {state.status}; wait until it is InService")
        elif state.current != state.target or busy:
            found.append(f"instance group '{state.name}' is scaling ({state.current} of {state.target} nodes"
                         f"{'; ' + ', '.join(busy) if busy else ''}); wait until it settles (hpdpd wait --for cluster)")
    moving = [n.instance_id for n in (*live.nodes_of(source.name), *live.nodes_of(target.name)) if n.status in MOVING]
    if moving:
        found.append(f"a move is under way ({', '.join(moving)}): wait for it, then plan again")
    return found


def _count_refusals(env: EnvironmentConfig, live: LiveCluster, source: InstanceGroup, target: InstanceGroup,
                    after: int) -> list[str]:
    found = []
    for group in (source, target):
        seen = live.groups.get(group.name)
        if seen is not None and seen.target != group.count:
            found.append(f"{env.source} says instance group '{group.name}' has count {group.count}, the cluster has "
                         f"{seen.target}: deploy or commit the live count first (the config change would be wrong)")
    if after < 1:
        found.append(f"instance group '{source.name}' would keep {after} node(s); a rebalance keeps one node per role "
                     "at least (to park a group, set its count to 0 and deploy)")
    live_min = live.groups[source.name].min_count if source.name in live.groups else None
    if live_min is not None and after < live_min:
        found.append(f"instance group '{source.name}' would keep {after} node(s), below its MinCount {live_min} in the "
                     "cluster (MoveClusterNodes refuses it)")
    if source.min_count is not None and after < source.min_count:
        found.append(f"instance group '{source.name}' would keep {after} node(s), below its min_count "
                     f"{source.min_count} in {env.source}: lower min_count first")
    return found


def _capacity_refusals(env: EnvironmentConfig, source: InstanceGroup, after: int) -> list[str]:
    """The endpoints' maximum replicas on ``source`` (and on its role's pool) must fit the nodes it keeps."""
    placed = placements(env.hyperpod, env.endpoints)
    gpn = gpus_per_node(source)
    demands: list[Demand] = placed.by_group.get(source.name, [])
    found = []
    need = nodes_needed(demands, gpn) if gpn else 0
    if need > after:
        listed = ", ".join(d.describe() for d in demands)
        found.append(f"instance group '{source.name}' would keep {after} node(s) ({after * gpn} GPUs), but the "
                     f"endpoints on it need {need} ({listed}, replicas x GPUs per pod): lower their replicas first")
    pooled = placed.by_role.get(source.role, [])
    if pooled:
        pool = [g for g in env.hyperpod.groups(source.role) if not g.parked]
        shared = pooled + [d for g in pool for d in placed.by_group.get(g.name, [])]
        capacity = sum((after if g.name == source.name else g.max_nodes) * gpus_per_node(g) for g in pool)
        wanted = sum(d.max_gpus for d in shared)
        if wanted > capacity:
            found.append(f"the {source.role} groups would hold {capacity} GPUs, the endpoints placed on them by role "
                         f"need {wanted}")
    return found


def _ratio_refusals(env: EnvironmentConfig, source: InstanceGroup, target: InstanceGroup, after_source: int,
                    after_target: int) -> list[str]:
    """Prefill nodes per decode node after the move, within the ratio bounds of the endpoints on both groups."""
    groups = {source.role: source, target.role: target}
    prefill, decode = groups.get("prefill"), groups.get("decode")
    if prefill is None or decode is None:
        return []
    placed = placements(env.hyperpod, env.endpoints)
    on_prefill = {d.endpoint for d in placed.by_group.get(prefill.name, [])}
    on_decode = {d.endpoint for d in placed.by_group.get(decode.name, [])}
    spanning = [e for e in env.endpoints if e.name in on_prefill & on_decode]
    bounds = [b for e in spanning if (b := e.ratio or (None if e.decode.allow_multiple_replicas else DEFAULT_RATIO))]
    if not bounds:
        return []
    low, high = max(b.min for b in bounds), min(b.max for b in bounds)
    nodes = {source.name: after_source, target.name: after_target}
    now = _ratio(prefill.count, decode.count)
    then = _ratio(nodes[prefill.name], nodes[decode.name])
    if low <= then <= high or _distance(then, low, high) < _distance(now, low, high):
        return []
    names = ", ".join(e.name for e in spanning)
    return [f"{nodes[prefill.name]} prefill node(s) per {nodes[decode.name]} decode node(s) (ratio {then:g}) is outside "
            f"the ratio bounds of {names} ({low:g} to {high:g} prefill per decode; endpoints[].ratio): the nodes "
            "beyond it would idle"]


def _ratio(prefill: int, decode: int) -> float:
    return prefill / decode if decode else math.inf


def _distance(value: float, low: float, high: float) -> float:
    return 0.0 if low <= value <= high else min(abs(value - low), abs(value - high))


def config_problems(env: EnvironmentConfig, counts: Mapping[str, int]) -> list[str]:
    """Every check synthesis runs, on the configuration with the groups' ``counts`` (the change the user will commit):
    the first problem, as one line, or nothing."""
    groups = tuple(g.model_copy(update={"count": counts[g.name]}) if g.name in counts else g
                   for g in env.hyperpod.instance_groups)
    changed = env.model_copy(update={"hyperpod": env.hyperpod.model_copy(update={"instance_groups": groups})})
    problems = list(changed.issues())
    return [f"with the new counts {env.source} would not pass synthesis: {problems[0].render()}"] if problems else []


Outcome = Literal["planned", "refused", "moved", "partial", "failed", "timeout"]


@dataclass(frozen=True, kw_only=True)
class RebalanceResult:
    """The plan and, with ``--apply``, what the move did: ``outcome`` is ``planned``, ``refused`` (by hpdpd or the
    service), ``moved``, ``partial`` (some nodes failed), ``failed`` (a node was lost) or ``timeout``; ``counts`` the
    groups' (current, target) counts the cluster reports once the nodes moved."""

    plan: RebalancePlan
    outcome: Outcome
    applied: bool = False  # MoveClusterNodes was called
    accepted: tuple[str, ...] = ()
    failed: tuple[tuple[str, str, str], ...] = ()
    message: str = ""
    elapsed_seconds: float = 0.0
    counts: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in ("planned", "moved")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "applied": self.applied,
                "outcome": self.outcome, "message": self.message or None, **self.plan.to_json(),
                "accepted": list(self.accepted),
                "failed": [{"instance_id": i, "code": c, "message": m} for i, c, m in self.failed],
                "counts_after": {g: {"current": c, "target": t} for g, (c, t) in self.counts.items()},
                "warnings": list(self.warnings), "elapsed_seconds": round(self.elapsed_seconds, 1)}


def count_warnings(plan: RebalancePlan, counts: Mapping[str, tuple[int, int]], moved: int) -> list[str]:
    """What the cluster's counts say after ``moved`` nodes moved: whether a move lowers the source group's target count
    is not documented [?]. A source group still targeting its old count may get a new node from continuous
    provisioning; a target group targeting fewer nodes than it runs may lose one. Either is said, never assumed."""
    found = []
    for change in plan.changes:
        expected = change.before + (moved if change.group == plan.target else -moved)
        current, target = counts.get(change.group, (None, None))
        if target is not None and target != expected:
            found.append(f"instance group '{change.group}' targets {target} node(s) after the move (runs {current}), "
                         f"not {expected}: check it with hpdpd status before the next deploy")
    return found
