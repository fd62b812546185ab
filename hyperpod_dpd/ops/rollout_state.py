"""Where an endpoint's rollout stands, read from the cluster: its IEC generations, the generation the client Service
points at, and the rollout lease on that Service (:mod:`hyperpod_dpd.ops.rollout_lease`); and what a rollout
command ends with (:class:`RolloutResult`).

Every generation carries the label ``hyperpod-dpd/endpoint``; the *serving* generation is the one the stable client
Service ``<name>`` (an ``ExternalName`` to the operator's ``<iec>-<namespace>-routing-service``, ``k8s/router.py``)
points at; the *desired* one is what the configuration renders now. Phases (``hpdpd rollout status``):

* ``steady``: the desired generation serves alone and no rollout record is left;
* ``nothing``: no generation, no client Service, no record: the endpoint is not deployed yet;
* ``pending``: another generation serves and the desired one is not created;
* ``in-progress``: a promote holds the lease, or two generations run;
* ``interrupted``: a promote stopped before it finished (its record is left) while a generation still serves:
  ``hpdpd rollout promote`` finishes it;
* ``down``: the client Service or a generation exists, but the Service points at no generation of the endpoint:
  nothing serves (an ``--in-place`` promote between its delete and the new generation, killed or still running, or
  a Service re-pointed by hand). ``hpdpd rollout promote`` creates and switches to the configured generation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from hyperpod_dpd.catalogue.operator import router_host
from hyperpod_dpd.ops.kube import Kube, KubeError, parse_iec
from hyperpod_dpd.ops.rollout_lease import LeaseRecord, read_lease, utc_now
from hyperpod_dpd.ops.rollout_room import Room
from hyperpod_dpd.ops.workloads import endpoint_iecs, get_service

Phase = Literal["steady", "nothing", "pending", "in-progress", "interrupted", "down"]


@dataclass(frozen=True, kw_only=True)
class Generation:
    name: str
    state: str
    message: str = ""
    sagemaker_endpoint_name: str | None = None  # the IEC's spec.endpointName, as the cluster holds it


@dataclass(frozen=True, kw_only=True)
class RolloutState:
    endpoint: str
    namespace: str
    desired: str
    generations: tuple[Generation, ...]
    service_exists: bool
    service_target: str | None  # the Service's externalName (None: no client Service)
    lease: LeaseRecord | None = None
    lease_live: bool = False
    lease_problem: str | None = None  # the annotation exists but is not a lease
    rendered_sagemaker_endpoint_name: str | None = None  # what the configuration renders for the desired generation

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
    def phase(self) -> Phase:
        if self.lease_problem:
            return "interrupted"
        if self.serving is None and (self.generations or self.service_exists):
            return "down"  # whatever a lease says: nothing serves, and that is what an operator must hear first
        if self.lease_live:
            return "in-progress"
        if self.lease is not None:
            return "interrupted"
        if self.serving is None:
            return "nothing"
        if self.serving == self.desired:
            return "steady" if not self.others else "in-progress"
        return "in-progress" if self.desired_generation else "pending"

    @property
    def message(self) -> str:
        """What ``hpdpd rollout status`` says about the phase, with the way on."""
        lease, phase = self.lease, self.phase
        if self.lease_problem:
            return self.lease_problem
        if phase == "in-progress" and lease is not None:
            return (f"a promote is running: {lease.holder} holds the rollout lease until {_when(lease.expires)} "
                    f"({lease.describe()})")
        if phase == "interrupted" and lease is not None:
            return (f"a {lease.describe()}, stopped before it finished ({self.serving} serves): run 'hpdpd rollout "
                    "promote' to finish it")
        if phase == "down":
            names = ", ".join(g.name for g in self.generations) or "none exists"
            why = ""
            if lease is not None:
                why = (f"; a {lease.describe()} is running ({lease.holder} holds the lease until "
                       f"{_when(lease.expires)})" if self.lease_live else f"; a {lease.describe()} stopped there")
            return (f"DOWN: no generation serves: the client Service points at {self.service_target or 'nothing'}, "
                    f"which is none of the endpoint's generations ({names}){why}: run 'hpdpd rollout promote' to "
                    f"create and switch to {self.desired}")
        return {"steady": f"{self.desired} is serving{self.name_drift()}",
                "nothing": "no generation is serving yet: the deploy creates the endpoint",
                "pending": f"{self.serving} is serving; {self.desired} (configured) is not created yet: run "
                           "'hpdpd rollout promote'",
                "in-progress": f"{self.serving} is serving beside {', '.join(self.others)}: promote or abort",
                }[phase]

    def name_drift(self) -> str:
        """The serving IEC holds another SageMaker endpoint name than the configuration renders for it (a toolkit
        upgrade to per-generation names, or a changed fixed name): the next deploy patches ``spec.endpointName`` in
        place, which the operator's documentation does not say it supports."""
        live = next((g.sagemaker_endpoint_name for g in self.generations if g.name == self.desired), None)
        rendered = self.rendered_sagemaker_endpoint_name
        if live == rendered or not (live or rendered):
            return ""
        return (f"; it holds the SageMaker endpoint {live or 'none'} but the configuration renders "
                f"{rendered or 'none'}: the next deploy changes spec.endpointName in place, which the operator may "
                "not support (rollout.fixed_sagemaker_endpoint_name: true keeps a fixed name)")

    def to_json(self) -> dict[str, Any]:
        serving = next((g for g in self.generations if g.name == self.serving), None)
        return {"endpoint": self.endpoint, "namespace": self.namespace, "desired": self.desired,
                "serving": self.serving, "service_target": self.service_target, "phase": self.phase,
                "serving_sagemaker_endpoint_name": serving.sagemaker_endpoint_name if serving else None,
                "lease": self.lease.to_json() if self.lease else None, "lease_live": self.lease_live,
                "generations": [{"name": g.name, "state": g.state, "message": g.message,
                                 "sagemaker_endpoint_name": g.sagemaker_endpoint_name,
                                 "serving": g.name == self.serving, "desired": g.name == self.desired}
                                for g in self.generations]}


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def read_state(kube: Kube, endpoint: Any, *, now: Callable[[], datetime] = utc_now) -> RolloutState:
    documents = endpoint_iecs(kube, namespace=endpoint.namespace, endpoint=endpoint.name)
    generations = []
    for document in documents:
        status = parse_iec(document)
        name = (document.get("spec") or {}).get("endpointName") or None
        generations.append(Generation(name=str(document["metadata"]["name"]), state=status.state,
                                      message=status.message, sagemaker_endpoint_name=name))
    try:
        service: dict[str, Any] | None = get_service(kube, namespace=endpoint.namespace, name=endpoint.name)
    except KubeError as exc:
        if not exc.not_found:
            raise
        service = None
    lease, problem = read_lease(service) if service is not None else (None, None)
    target = str(((service or {}).get("spec") or {}).get("externalName") or "") or None
    return RolloutState(endpoint=endpoint.name, namespace=endpoint.namespace, desired=endpoint.resource_name,
                        generations=tuple(generations), service_exists=service is not None, service_target=target,
                        lease=lease, lease_live=bool(lease and lease.live(now())), lease_problem=problem,
                        rendered_sagemaker_endpoint_name=endpoint.rendered_sagemaker_endpoint_name)


Outcome = Literal[Phase, "promoted", "aborted", "refused", "failed", "timeout"]


@dataclass(frozen=True, kw_only=True)
class RolloutResult:
    outcome: Outcome
    message: str
    state: RolloutState
    steps: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    rooms: tuple[Room, ...] = ()
    drain_seconds: float | None = None
    keep_record: bool = False  # the rollout is unfinished: the lease record stays for the next run

    @property
    def ok(self) -> bool:
        return self.outcome in ("steady", "nothing", "promoted", "aborted")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "outcome": self.outcome, "message": self.message, "steps": list(self.steps),
                "failures": list(self.failures), "room": [r.to_json() for r in self.rooms],
                "drain_seconds": self.drain_seconds, **self.state.to_json()}
