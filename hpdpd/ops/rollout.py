"""Blue/green rollouts of an endpoint's IEC generations (``hpdpd rollout status|promote|abort``).

A change to a field the operator treats as immutable renders an IEC with a new name (``<name>-<generation>``,
``docs/endpoints.md``, "Changing immutable fields"). Every generation carries the label ``hyperpod-dpd/endpoint``; the
*serving* generation is the one the stable client Service ``<name>`` (an ``ExternalName`` to the operator's
``<iec>-<namespace>-routing-service``, ``k8s/router.py``) points at; the *desired* one is what the configuration
renders now.

``promote``: when the desired generation is not serving, check that the instance groups have room for it beside the
serving one (free ``nvidia.com/gpu``: nodes' allocatable minus what running pods request), create it, wait until it is
``DeploymentComplete``, run the checks (smoke and verify), switch the client Service to its router, then delete the
older generations. ``--in-place`` accepts downtime instead: no room check, the old generation is deleted first.
``abort``: delete every generation the Service does not point at; the serving one keeps serving.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hyperpod_dpd.catalogue.operator import router_host
from hyperpod_dpd.ops.kube import Kube, KubeError, parse_iec, wait_for_iec
from hyperpod_dpd.ops.workloads import (
    create_iec,
    delete_iec,
    endpoint_iecs,
    get_service,
    nodes,
    point_service,
    requested_gpus,
)

Outcome = Literal["steady", "nothing", "promoted", "aborted", "refused", "failed", "timeout", "pending", "in-progress"]


@dataclass(frozen=True, kw_only=True)
class Generation:
    name: str
    state: str
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class RolloutState:
    endpoint: str
    namespace: str
    desired: str
    generations: tuple[Generation, ...]
    service_target: str | None  # the Service's externalName (None: no client Service)

    @property
    def serving(self) -> str | None:
        """The generation the client Service points at (None when it points at none of them, or is missing)."""
        return next((g.name for g in self.generations
                     if self.service_target == router_host(g.name, self.namespace)), None)

    @property
    def desired_generation(self) -> Generation | None:
        return next((g for g in self.generations if g.name == self.desired), None)

    @property
    def others(self) -> list[str]:
        return [g.name for g in self.generations if g.name != self.serving]

    @property
    def phase(self) -> Outcome:
        if self.serving == self.desired:
            return "steady" if not self.others else "in-progress"
        if self.serving is None:
            return "nothing"
        return "in-progress" if self.desired_generation else "pending"

    def to_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "namespace": self.namespace, "desired": self.desired,
                "serving": self.serving, "service_target": self.service_target, "phase": self.phase,
                "generations": [{"name": g.name, "state": g.state, "message": g.message,
                                 "serving": g.name == self.serving, "desired": g.name == self.desired}
                                for g in self.generations]}


def read_state(kube: Kube, endpoint: Any) -> RolloutState:
    documents = endpoint_iecs(kube, namespace=endpoint.namespace, endpoint=endpoint.name)
    generations = []
    for document in documents:
        status = parse_iec(document)
        generations.append(Generation(name=str(document["metadata"]["name"]), state=status.state,
                                      message=status.message))
    try:
        service = get_service(kube, namespace=endpoint.namespace, name=endpoint.name)
        target = str((service.get("spec") or {}).get("externalName") or "") or None
    except KubeError as exc:
        if not exc.not_found:
            raise
        target = None
    return RolloutState(endpoint=endpoint.name, namespace=endpoint.namespace, desired=endpoint.resource_name,
                        generations=tuple(generations), service_target=target)


@dataclass(frozen=True, kw_only=True)
class Room:
    """Free GPUs on one role's nodes and how many of the new generation's pods fit there."""

    role: str
    nodes: int
    free_gpus: int
    fits: int
    needed: int

    @property
    def enough(self) -> bool:
        return self.fits >= self.needed


def room(kube: Kube, endpoint: Any) -> list[Room]:
    """Per role: pods of ``gpus_per_pod`` GPUs that fit on the role's nodes (a role sharing nodes with the other
    role counts both roles' pods against the same nodes)."""
    cluster, used = nodes(kube), requested_gpus(kube)
    per_pod = endpoint.gpus_per_pod
    selectors = {role: endpoint.node_selector(role) for role in ("prefill", "decode")}
    rooms = []
    for role, selector in selectors.items():
        chosen = [n for n in cluster.values() if n.matches(selector)]
        free = {n.name: max(0, n.allocatable_gpus - used.get(n.name, 0)) for n in chosen}
        needed = sum(endpoint.role(r).replicas for r, s in selectors.items() if s == selector)
        rooms.append(Room(role=role, nodes=len(chosen), free_gpus=sum(free.values()),
                          fits=sum(f // per_pod for f in free.values()) if per_pod else 0, needed=needed))
    return rooms


def room_problem(rooms: Sequence[Room], per_pod: int) -> str | None:
    short = [r for r in rooms if not r.enough]
    if not short:
        return None
    parts = "; ".join(f"{r.role}: {r.free_gpus} free GPU(s) on {r.nodes} node(s), {r.needed} pod(s) of {per_pod} "
                      f"GPU(s) needed" for r in short)
    return (f"no room for a second generation beside the serving one ({parts}): add nodes to the instance groups, "
            "or pass --in-place to replace the serving generation (downtime)")


@dataclass(frozen=True, kw_only=True)
class RolloutResult:
    outcome: Outcome
    message: str
    state: RolloutState
    steps: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    rooms: tuple[Room, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in ("steady", "nothing", "promoted", "aborted")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "outcome": self.outcome, "message": self.message, "steps": list(self.steps),
                "failures": list(self.failures),
                "room": [{"role": r.role, "nodes": r.nodes, "free_gpus": r.free_gpus, "fits": r.fits,
                          "needed": r.needed} for r in self.rooms], **self.state.to_json()}


Checks = Callable[[str], Sequence[str]]  # IEC name -> failure lines (empty: the generation passed)


@dataclass
class Promotion:
    """One promote run; ``manifest`` renders the desired IEC, ``checks`` runs smoke and verify against an IEC."""

    kube: Kube
    endpoint: Any
    manifest: Callable[[], dict[str, Any]]
    checks: Checks
    in_place: bool = False
    timeout_seconds: float = 3600.0
    interval_seconds: float = 15.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    steps: list[str] = field(default_factory=list)

    def run(self) -> RolloutResult:
        e, kube = self.endpoint, self.kube
        state = read_state(kube, e)
        if state.phase == "steady":
            return RolloutResult(outcome="steady", message=f"{state.desired} is serving; nothing to roll out",
                                 state=state)
        if state.serving is None and state.desired_generation is None:
            return RolloutResult(outcome="nothing", state=state,
                                 message="no generation is serving yet: the deploy creates the endpoint")
        rooms: tuple[Room, ...] = ()
        if state.desired_generation is None:
            if self.in_place:
                for name in state.others + ([state.serving] if state.serving else []):
                    delete_iec(kube, namespace=e.namespace, name=name)
                    self.steps.append(f"deleted {name} (in place: downtime until {state.desired} is ready)")
            else:
                rooms = tuple(room(kube, e))
                problem = room_problem(rooms, e.gpus_per_pod)
                if problem:
                    return RolloutResult(outcome="refused", message=problem, state=state, rooms=rooms)
            create_iec(kube, self.manifest())
            self.steps.append(f"created {state.desired}")
        ready = self._wait_ready(state.desired)
        if ready is not None:
            return RolloutResult(outcome=ready[0], message=ready[1], state=read_state(kube, e),
                                 steps=tuple(self.steps), rooms=rooms)
        self.steps.append(f"{state.desired} is DeploymentComplete")
        failures = tuple(self.checks(state.desired))
        if failures:
            kept = f"; {state.serving} keeps serving" if state.serving and not self.in_place else ""
            return RolloutResult(outcome="failed", message=f"{state.desired} failed its checks{kept}",
                                 state=read_state(kube, e), steps=tuple(self.steps), failures=failures, rooms=rooms)
        self.steps.append(f"{state.desired} passed smoke and verify")
        if state.service_target is not None:
            point_service(kube, namespace=e.namespace, name=e.name, external_name=router_host(state.desired,
                                                                                               e.namespace))
            self.steps.append(f"client Service {e.namespace}/{e.name} -> {router_host(state.desired, e.namespace)}")
        for generation in read_state(kube, e).generations:
            if generation.name != state.desired:
                delete_iec(kube, namespace=e.namespace, name=generation.name)
                self.steps.append(f"deleted {generation.name}")
        return RolloutResult(outcome="promoted", message=f"{state.desired} is serving", state=read_state(kube, e),
                             steps=tuple(self.steps), rooms=rooms)

    def _wait_ready(self, name: str) -> tuple[Outcome, str] | None:
        status = wait_for_iec(self.kube, name=name, namespace=self.endpoint.namespace, seconds=self.timeout_seconds,
                              interval=self.interval_seconds, clock=self.clock, sleep=self.sleep)
        if status.ready:
            return None
        if status.failed:
            return "failed", f"{name} {status.state}: {status.message}"
        if not status.known and not status.transient:
            raise KubeError(status.reason, status.cause or "error")
        return "timeout", f"{name} not ready after {self.timeout_seconds:g} s (last state: {status.state})"


def abort(kube: Kube, endpoint: Any) -> RolloutResult:
    state = read_state(kube, endpoint)
    if state.serving is None:
        return RolloutResult(outcome="refused", state=state,
                             message="no generation is serving (the client Service points at none): nothing to fall "
                                     "back to, so nothing is deleted")
    if not state.others:
        return RolloutResult(outcome="steady", state=state, message=f"{state.serving} is serving; nothing to abort")
    steps = []
    for name in state.others:
        delete_iec(kube, namespace=endpoint.namespace, name=name)
        steps.append(f"deleted {name}")
    return RolloutResult(outcome="aborted", message=f"{state.serving} keeps serving", state=read_state(kube, endpoint),
                         steps=tuple(steps))


def render_manifest(env: Any, endpoint: Any) -> dict[str, Any]:
    """The desired IEC exactly as the endpoints chart renders it (cdk8s; validated against the CRD)."""
    import cdk8s

    from hyperpod_dpd.k8s.charts import add_environment_charts

    for chart in add_environment_charts(cdk8s.App(), env):
        for document in chart.to_json():
            meta = document.get("metadata") or {}
            if document.get("kind") == "InferenceEndpointConfig" and meta.get("name") == endpoint.resource_name:
                return dict(document)
    raise KeyError(f"the charts of {env.name} render no IEC {endpoint.resource_name}")
