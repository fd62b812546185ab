"""Blue/green rollouts of an endpoint's IEC generations (``hpdpd rollout status|promote|abort``).

A change to a field the operator treats as immutable renders an IEC with a new name (``<name>-<generation>``,
``docs/endpoints.md``, "Changing immutable fields"); :mod:`hyperpod_dpd.ops.rollout_state` says which generation
serves. ``promote``, under the rollout lease (:mod:`~hyperpod_dpd.ops.rollout_lease`), blue/green:

1. checks the room beside the serving generation (:mod:`~hyperpod_dpd.ops.rollout_room`), creates the configured
   IEC and waits until it is ``DeploymentComplete``, then runs the checks (smoke and verify);
2. widens the router NetworkPolicy to both generations' routers, switches the client Service (in the same write as
   the lease record, which notes when) and the Ingress backend (:mod:`~hyperpod_dpd.ops.rollout_repoint`);
3. drains: the old generation keeps serving what it already has for ``drain`` seconds (the endpoint's longest
   request by default: an ``ExternalName`` re-point moves only new DNS lookups);
4. deletes the older generations, narrows the policy to the new router, and releases the lease.

``--in-place`` accepts downtime instead: no room check, the old generations are deleted first (and gone before the
new one is created: a fixed SageMaker endpoint name can then be reused). Run again after being stopped at any step,
``promote`` resumes from what the cluster and the lease record say: it ends promoted, or (a failed check) with the
old generation serving. ``abort``: every generation the client Service does not point at is deleted (after the rest
of the drain when it served until a switch) and the Ingress and policy are put back on the serving one.

The lease is kept through every step (the waits, the EFA probe and the checks get a ``Keep``), and renewed with a
conditional write right before each step that moves traffic or deletes a generation: a lease another holder took
stops the run right there (outcome ``failed``, the message naming the step), with nothing more changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from hyperpod_dpd.catalogue.operator import router_host
from hyperpod_dpd.ops.kube import NOT_FOUND, READY_STATE, Kube, KubeError, wait_for_iec
from hyperpod_dpd.ops.rollout_lease import (
    Keep,
    Lease,
    LeaseHeld,
    LeaseRecord,
    LeaseUnusable,
    Mode,
    default_holder,
    utc_now,
)
from hyperpod_dpd.ops.rollout_repoint import (
    describe_selector,
    ingress_patch,
    policy_selector,
    read_exposure,
    repoint_ingress,
    selector_patch,
    set_policy_selector,
    unwidenable,
    widened,
)
from hyperpod_dpd.ops.rollout_room import Room, room, room_notes, room_problem
from hyperpod_dpd.ops.rollout_state import Outcome, RolloutResult, RolloutState, read_state
from hyperpod_dpd.ops.workloads import create_iec, delete_iec

# (IEC name, what keeps the lease while it runs: minutes) -> failure lines (empty: passed). Checks: smoke and verify
# of the ready generation. FabricProbe: the EFA probe before a new generation is created: its bandwidth test needs
# EFA devices no pod holds, which the nodes the new generation will take have only then.
Checks = Callable[[str, Keep], Sequence[str]]
FabricProbe = Callable[[str, Keep], Sequence[str]]


class Stopped(Exception):
    """The rollout cannot go on safely from here (what it found changed since it checked); it stops, keeping its
    record for the next run."""


def _nothing(step: str) -> None:
    return None


@dataclass(kw_only=True)
class _Run:
    """What one promote or abort shares: the cluster, the clocks and the steps it reports."""

    kube: Kube
    endpoint: Any
    drain_seconds: float | None = None  # None: the endpoint's (rollout.drain_seconds, or derived)
    holder: str = field(default_factory=default_holder)
    lease_seconds: float = 300.0
    interval_seconds: float = 15.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = utc_now
    on_step: Callable[[str], None] = _nothing  # after each step (the tests stop a run there)
    steps: list[str] = field(default_factory=list)
    resumed: bool = False  # the lease came with the record of a stopped rollout

    def state(self) -> RolloutState:
        return read_state(self.kube, self.endpoint, now=self.now)

    def step(self, text: str) -> None:
        self.steps.append(text)
        self.on_step(text)

    @property
    def drain(self) -> float | None:
        return self.drain_seconds if self.drain_seconds is not None else self.endpoint.drain_seconds

    def result(self, outcome: Outcome, message: str, **extra: Any) -> RolloutResult:
        # A refusal changes nothing: the record a stopped rollout left stays for the run that finishes it.
        extra.setdefault("keep_record", outcome == "refused" and self.resumed)
        return RolloutResult(outcome=outcome, message=message, state=self.state(), steps=tuple(self.steps),
                             drain_seconds=self.drain, **extra)

    def take(self, plan: Callable[[LeaseRecord | None], LeaseRecord]) -> tuple[Lease, LeaseRecord | None]:
        return Lease.take(self.kube, namespace=self.endpoint.namespace, service=self.endpoint.name,
                          holder=self.holder, seconds=self.lease_seconds, now=self.now, plan=plan)

    def held(self, lease: Lease, work: Callable[[Lease], RolloutResult]) -> RolloutResult:
        """``work`` under ``lease``: released after (keeping the record when the rollout is unfinished), and on an
        error or interrupt that stopped it (the record stays: the next run resumes at once). A killed process
        releases nothing: its lease then expires on its own."""
        try:
            result = work(lease)
        except LeaseUnusable:
            raise  # not ours any more: leave it to its holder
        except (Exception, KeyboardInterrupt):
            try:
                lease.release(keep_record=True)
            except (KubeError, LeaseUnusable):
                pass  # the lease expires on its own
            raise
        lease.release(keep_record=result.keep_record)
        return replace(result, state=self.state())  # as the cluster is once the lease is released

    def keep(self, lease: Lease, during: str) -> Keep:
        """What a long step (a wait, the probe, the checks) is given to keep ``lease``; ``during`` names the step."""
        return Keep(lease=lease, during=during, pause=self.sleep)

    def kept(self, lease: Lease, what: str, work: Callable[[Keep], Sequence[str]]) -> tuple[str, ...]:
        """``work`` (``what``: a long step) with a Keep; LeaseLost if the lease was lost meanwhile, however ``work``
        took it."""
        keep = self.keep(lease, f"while {what} ran")
        found = tuple(work(keep))
        keep.raise_if_lost()
        lease.renew_if_due(during=f"after {what}")
        return found

    def wait(self, lease: Lease, seconds: float, during: str) -> None:
        """Sleep ``seconds`` in polls, renewing the lease."""
        keep, deadline = self.keep(lease, during), self.clock() + seconds
        while (left := deadline - self.clock()) > 0:
            keep.sleep(min(left, self.interval_seconds, self.lease_seconds / 3))

    def drain_old(self, lease: Lease, switched_at: datetime | None, old: Sequence[str]) -> None:
        """Keep ``old`` (which served until ``switched_at``) for the rest of the drain."""
        if not old or not self.drain:
            return
        start = switched_at or self.now()
        left = (start + timedelta(seconds=self.drain) - self.now()).total_seconds()
        if left > 0:
            self.step(f"draining {', '.join(old)} for {left:.0f} s (open requests finish on the old router)")
            self.wait(lease, left, f"while draining {', '.join(old)}")

    def delete(self, lease: Lease, names: Sequence[str], why: str = "") -> None:
        for name in names:
            lease.write(step=f"deleting {name}")  # the lease is still ours right before each delete
            try:
                delete_iec(self.kube, namespace=self.endpoint.namespace, name=name)
            except KubeError as exc:
                if not exc.not_found:
                    raise
            self.step(f"deleted {name}{why}")

    def wait_gone(self, lease: Lease, names: Sequence[str], timeout: float) -> str | None:
        """Wait until the deleted IECs are gone (the operator removes their pods and SageMaker endpoints before the
        IEC itself); the name of one that is not, or None."""
        deadline = self.clock() + timeout
        for name in names:
            keep = self.keep(lease, f"while waiting for {name} to be deleted")
            while (status := self.kube.iec_status(name=name, namespace=self.endpoint.namespace)).state != NOT_FOUND:
                if not status.known and not status.transient:
                    raise KubeError(status.reason, status.cause or "error")
                if self.clock() + self.interval_seconds > deadline:
                    return name
                keep.sleep(self.interval_seconds)
        return None

    def policy(self, lease: Lease, iec: str, *, narrow: bool) -> None:
        """The router NetworkPolicy on ``iec``'s router: beside the routers it selects now, or (``narrow``) alone."""
        document = read_exposure(self.kube, self.endpoint).policy
        labels = self.endpoint.router_pod_labels_for(iec)
        wanted = {"matchLabels": labels} if narrow else widened(policy_selector(document), labels)
        if wanted is None:  # checked before anything was created; the policy changed since
            raise Stopped(unwidenable(self.endpoint, policy_selector(document), iec))
        name, selector = self.endpoint.router_policy_name, describe_selector(wanted)
        if document is not None and selector_patch(document, wanted) is not None:
            lease.write(during=f"before the router NetworkPolicy {name} was set to {selector}")  # still ours
            set_policy_selector(self.kube, self.endpoint, document, wanted)
            self.step(f"router NetworkPolicy {name} selects {selector}")

    def ingress(self, lease: Lease, iec: str) -> None:
        document = read_exposure(self.kube, self.endpoint).ingress
        if document is not None and ingress_patch(document, self.endpoint, iec) is not None:
            lease.write(during=f"before the Ingress {self.endpoint.ingress_name} was re-pointed to {iec}")
            repoint_ingress(self.kube, self.endpoint, document, iec)
            self.step(f"Ingress {self.endpoint.ingress_name} -> {iec}")


@dataclass(kw_only=True)
class Promotion(_Run):
    """One promote run; ``manifest`` renders the desired IEC, ``checks`` runs smoke and verify against an IEC,
    ``fabric`` (optional) probes the EFA path of the free nodes before a blue/green generation is created on them,
    ``groups`` are the environment's instance groups (their autoscaling counts in the room check)."""

    manifest: Callable[[], dict[str, Any]]
    checks: Checks
    fabric: FabricProbe | None = None
    groups: Sequence[Any] = ()
    in_place: bool = False
    timeout_seconds: float = 3600.0

    def run(self) -> RolloutResult:
        e, state = self.endpoint, self.state()
        if not state.service_exists:
            if not state.generations:
                return self.result("nothing", "no generation is serving yet: the deploy creates the endpoint")
            return self.result("refused", f"the client Service {e.namespace}/{e.name} does not exist, so no rollout "
                                          "lease can be held: deploy the endpoints chart first")
        if state.phase == "steady" and self._exposed_on(state.desired):
            return self.result("steady", f"{state.desired} is serving; nothing to roll out{state.name_drift()}")
        if state.lease_problem:
            return self.result("refused", state.lease_problem)

        def plan(previous: LeaseRecord | None) -> LeaseRecord:
            resumed = previous is not None and previous.mode == "in-place" and previous.target == state.desired
            mode: Mode = "in-place" if self.in_place or resumed else "blue-green"
            same = previous is not None and previous.target == state.desired
            return LeaseRecord(holder="", expires=self.now(), mode=mode, target=state.desired,
                               source=previous.source if previous else state.serving,
                               step=previous.step if same and previous else "started",
                               switched_at=previous.switched_at if same and previous else None)

        try:
            lease, previous = self.take(plan)
        except (LeaseHeld, LeaseUnusable) as exc:
            return self.result("refused", str(exc))
        if previous is not None:
            self.resumed = True
            self.step(f"took over the rollout record of {previous.holder or 'a stopped promote'} "
                      f"({previous.describe()})")
        try:
            return self.held(lease, self._promote)
        except (LeaseUnusable, Stopped) as exc:
            return self.result("failed", str(exc), keep_record=True)

    def _exposed_on(self, iec: str) -> bool:
        """The Ingress and the router policy name ``iec`` alone (or do not exist)."""
        exposure = read_exposure(self.kube, self.endpoint)
        wanted = {"matchLabels": self.endpoint.router_pod_labels_for(iec)}
        return not ((exposure.ingress is not None and ingress_patch(exposure.ingress, self.endpoint, iec))
                    or (exposure.policy is not None and selector_patch(exposure.policy, wanted)))

    def _promote(self, lease: Lease) -> RolloutResult:
        e, state = self.endpoint, self.state()
        desired, in_place = state.desired, lease.record.mode == "in-place"
        rooms: tuple[Room, ...] = ()
        name = e.rendered_sagemaker_endpoint_name
        if not in_place and e.rollout.fixed_sagemaker_endpoint_name and name and state.serving != desired and \
                any(g.name != desired for g in state.generations):
            others = ", ".join(g.name for g in state.generations if g.name != desired)
            return self.result("refused", f"{desired} and {others} would both hold the SageMaker endpoint name "
                                          f"'{name}' (rollout.fixed_sagemaker_endpoint_name), and SageMaker endpoint "
                                          "names are unique per account and Region: pass --in-place (downtime), or "
                                          "drop the fixed name so that each generation gets its own")
        if not in_place:
            policy = read_exposure(self.kube, e).policy  # before anything is created: can it take both routers?
            if policy is not None and widened(policy_selector(policy), e.router_pod_labels_for(desired)) is None:
                return self.result("refused", unwidenable(e, policy_selector(policy), desired))
            if state.serving not in (None, desired) and self.drain is None:
                return self.result("refused", f"cannot tell how long the open requests of {state.serving} may take "
                                              "(no max_model_len, and the model is not in the catalogue): set "
                                              "rollout.drain_seconds or max_model_len, or pass --drain SECONDS")
        if in_place:
            old = [g.name for g in state.generations if g.name != desired]
            self.delete(lease, old, " (in place: downtime until the new generation is ready)")
            stuck = self.wait_gone(lease, old, self.timeout_seconds)
            if stuck:
                return self.result("timeout", f"{stuck} is still being deleted after {self.timeout_seconds:g} s",
                                   keep_record=True)
        elif state.desired_generation is None:
            rooms = tuple(room(self.kube, e, self.groups))
            problem = room_problem(rooms, e.gpus_per_pod)
            if problem:
                return self.result("refused", problem, rooms=rooms)
            for note in room_notes(rooms):
                self.step(note)
            refused = self._probe_fabric(lease, desired, state.serving, rooms)
            if refused is not None:
                return refused
        created = self.state().desired_generation is None
        if created:
            lease.write(step=f"creating {desired}")
            create_iec(self.kube, self.manifest())
            self.step(f"created {desired}")
        return self._take_traffic(lease, rooms, created=created)

    def _probe_fabric(self, lease: Lease, desired: str, serving: str | None,
                      rooms: tuple[Room, ...]) -> RolloutResult | None:
        """The EFA probe on the nodes the new generation will take, before it takes them; a failure ends the promote
        with nothing created (the serving generation keeps serving)."""
        if self.fabric is None:
            return None
        fabric = self.fabric
        failures = self.kept(lease, f"the EFA probe for {desired}", lambda keep: fabric(desired, keep))
        if failures:
            kept = f"; {serving} keeps serving" if serving else ""
            return self.result("failed", f"the EFA path {desired} would use failed its probe, so it was not "
                                         f"created{kept}", failures=failures, rooms=rooms)
        self.step(f"probed the EFA path of the nodes {desired} will use")
        return None

    def _take_traffic(self, lease: Lease, rooms: tuple[Room, ...], *, created: bool) -> RolloutResult:
        e, state = self.endpoint, self.state()
        desired, in_place = state.desired, lease.record.mode == "in-place"
        ready = state.desired_generation is not None and state.desired_generation.state == READY_STATE
        # Switched already: by this rollout (its record says when), or it served ready before this run began.
        if lease.record.switched_at is None and not (state.serving == desired and ready and not created):
            unfinished = in_place or state.serving is None  # nothing else serves: the record stays for the next run
            waited = self._wait_ready(lease, desired)
            if waited is not None:
                return self.result(waited[0], waited[1], rooms=rooms, keep_record=unfinished)
            self.step(f"{desired} is DeploymentComplete")
            # hook: smoke, verify (and its probe) before it takes traffic; minutes, keeping the lease
            failures = self.kept(lease, f"the checks of {desired} (smoke, verify)",
                                 lambda keep: self.checks(desired, keep))
            if failures:
                if state.serving not in (None, desired):  # a run before this one may have widened the policy
                    self.policy(lease, state.serving, narrow=True)
                kept = f"; {state.serving} keeps serving" if state.serving else "; no generation serves"
                return self.result("failed", f"{desired} failed its checks{kept}", failures=failures, rooms=rooms,
                                   keep_record=unfinished)
            self.step(f"{desired} passed smoke and verify")
            self.policy(lease, desired, narrow=in_place)  # both routers admitted before any traffic moves
            lease.write(step=f"switched to {desired}", switched_at=self.now(),
                        spec={"externalName": router_host(desired, e.namespace)},
                        during=f"before switching the client Service to {desired}")
            self.step(f"client Service {e.namespace}/{e.name} -> {router_host(desired, e.namespace)}")
        else:  # it passed its checks in an earlier run (or served already): the older ones go only while it is ready
            now = self.state().desired_generation
            if now is None or now.state != READY_STATE:
                seen = f"{now.state}: {now.message}" if now else "NotFound"
                return self.result("failed", f"{desired} serves but is {seen}; the older generations are kept: fix "
                                             f"{desired} and promote again, or re-point the client Service",
                                   rooms=rooms, keep_record=True)
        self.ingress(lease, desired)
        old = [g.name for g in self.state().generations if g.name != desired]
        self.drain_old(lease, lease.record.switched_at, old)
        self.delete(lease, old)
        self.policy(lease, desired, narrow=True)
        return self.result("promoted", f"{desired} is serving", rooms=rooms)

    def _wait_ready(self, lease: Lease, name: str) -> tuple[Outcome, str] | None:
        status = wait_for_iec(self.kube, name=name, namespace=self.endpoint.namespace, seconds=self.timeout_seconds,
                              interval=self.interval_seconds, clock=self.clock,
                              sleep=self.keep(lease, f"while waiting for {name} to be ready").sleep)
        if status.ready:
            return None
        if status.failed:
            return "failed", f"{name} {status.state}: {status.message}"
        if not status.known and not status.transient:
            raise KubeError(status.reason, status.cause or "error")
        return "timeout", f"{name} not ready after {self.timeout_seconds:g} s (last state: {status.state})"


@dataclass(kw_only=True)
class Abort(_Run):
    """Delete every generation the client Service does not point at; the serving one keeps serving."""

    def run(self) -> RolloutResult:
        state = self.state()
        if state.lease_problem:
            return self.result("refused", state.lease_problem)
        if state.lease is not None and state.lease_live and state.lease.holder != self.holder:
            return self.result("refused", str(LeaseHeld(state.lease)))
        if state.serving is None and state.phase == "nothing":
            return self.result("nothing", "no generation exists: nothing to abort")
        if state.serving is None:
            why = (f"a {state.lease.describe()} stopped" if state.lease else
                   "the client Service points at none of the endpoint's generations")
            return self.result("refused", f"no generation is serving ({why}): there is nothing to fall back to, so "
                                          f"nothing is deleted; run 'hpdpd rollout promote' to create {state.desired}")
        if not state.others and state.lease is None:
            return self.result("steady", f"{state.serving} is serving; nothing to abort")
        serving = state.serving

        def plan(previous: LeaseRecord | None) -> LeaseRecord:
            base = previous or LeaseRecord(holder="", expires=self.now(), source=serving, target=serving,
                                           mode="blue-green", step="started")
            return replace(base, step="aborting")

        try:
            lease, previous = self.take(plan)
        except (LeaseHeld, LeaseUnusable) as exc:
            return self.result("refused", str(exc))
        self.resumed = previous is not None
        try:
            return self.held(lease, lambda held: self._abort(held, serving, previous))
        except (LeaseUnusable, Stopped) as exc:
            return self.result("failed", str(exc), keep_record=True)

    def _abort(self, lease: Lease, serving: str, previous: LeaseRecord | None) -> RolloutResult:
        others = [g.name for g in self.state().generations if g.name != serving]
        self.ingress(lease, serving)
        # A generation that served until the switch of an interrupted promote still drains.
        switched = previous.switched_at if previous and previous.target == serving else None
        self.drain_old(lease, switched, [n for n in others if switched and previous and n == previous.source])
        self.delete(lease, others)
        self.policy(lease, serving, narrow=True)
        return self.result("aborted", f"{serving} keeps serving")

