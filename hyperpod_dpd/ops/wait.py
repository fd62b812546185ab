"""``hpdpd wait``: poll until the cluster, the add-ons or the endpoints are ready, have failed, or time ran out.

Polls back off exponentially (5 s, 10 s, 20 s, ... capped at 60 s by default, never past the deadline). Every read
is three-way (:mod:`hyperpod_dpd.ops.lookup`): a resource the service says does not exist is "not created yet" and
the wait goes on. A read that fails for a reason that may pass (throttling or a 5xx that outlasts botocore's own
retries, a connection error, a timeout) is observed as ``Unknown (<reason>)``, never as not found, and is asked
again at the next poll; at the deadline the wait times out with that state. A permission denial, or any other error
that waiting cannot fix, ends the wait at once with one line (:class:`~hyperpod_dpd.errors.HpdpdError`).
A terminal failure carries the message AWS gives (``FailureMessage``, ``FailureReason``, add-on health issues,
the IEC's condition message).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hyperpod_dpd.aws import ClientSource, call_errors, stops_command
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.addons import ACTIVE, ADDON_PERMISSIONS, FAILED_STATUSES, expected_addons, installed_addons
from hyperpod_dpd.ops.clusters import FAILED, HYPERPOD_TERMINAL, IN_SERVICE, read_hyperpod
from hyperpod_dpd.ops.deadline import OutOfTime
from hyperpod_dpd.ops.endpoints import SAGEMAKER_IN_SERVICE, EndpointLike, iec_name, read_sagemaker_endpoint
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.lookup import NOT_FOUND, TRANSIENT_CAUSES, UNKNOWN, Lookup, aws_cause, aws_reason, look_up

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

TARGETS = ("cluster", "addons", "endpoint")
Outcome = Literal["ready", "failed", "timeout"]


@dataclass(frozen=True, kw_only=True)
class Observation:
    """What one poll saw: a short state for the progress line, and whether it is final."""

    state: str
    ready: bool = False
    failed: bool = False
    message: str = ""


Probe = Callable[[], Observation]


@dataclass(frozen=True, kw_only=True)
class Backoff:
    initial_seconds: float = 5.0
    factor: float = 2.0
    max_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.initial_seconds <= 0 or self.factor < 1 or self.max_seconds < self.initial_seconds:
            raise ValueError("back-off needs initial > 0, factor >= 1 and max >= initial")

    def delay(self, poll: int) -> float:
        """Seconds to sleep after poll number ``poll`` (0-based)."""
        return min(self.max_seconds, self.initial_seconds * self.factor ** poll)


@dataclass(frozen=True, kw_only=True)
class WaitResult:
    target: str
    outcome: Outcome
    state: str
    message: str
    elapsed_seconds: float
    polls: int

    @property
    def ok(self) -> bool:
        return self.outcome == "ready"

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "target": self.target, "outcome": self.outcome, "state": self.state,
                "message": self.message or None, "elapsed_seconds": round(self.elapsed_seconds, 1), "polls": self.polls}


ProgressCallback = Callable[[Observation, float, float | None], None]


class Unobservable(HpdpdError):
    """A read that waiting cannot fix (access denied, rejected credentials, an API the endpoint lacks)."""


def unknown_state(reason: str) -> str:
    return f"{UNKNOWN} ({reason})"


def settle(lookup: Lookup[Any], what: str) -> Lookup[Any]:
    """``lookup`` unless it is unknown for a reason waiting cannot fix: then the wait ends with one line."""
    if lookup.unknown and not lookup.transient:
        raise Unobservable(f"cannot wait for {what}: {lookup.reason} (waiting cannot fix this)")
    return lookup


def _observe(probe: Probe) -> tuple[Observation, bool]:
    """One poll, and whether the command's deadline ended it. An AWS error that escapes the probe is classified like
    any read: transient ones are observed as unknown and polled again, the rest end the wait."""
    try:
        return probe(), False
    except OutOfTime as exc:  # the deadline passed inside the poll: the wait's own timeout, with what stopped it
        return Observation(state=unknown_state(str(exc)), message=str(exc)), True
    except call_errors() as exc:
        if stops_command(exc) or aws_cause(exc) not in TRANSIENT_CAUSES:
            raise
        return Observation(state=unknown_state(aws_reason(exc)), message=aws_reason(exc)), False


def wait_for(probe: Probe, *, target: str, timeout_seconds: float, backoff: Backoff = Backoff(),
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
             on_poll: ProgressCallback | None = None) -> WaitResult:
    """Poll ``probe`` until it reports ready or failed, or ``timeout_seconds`` have passed."""
    start, polls = clock(), 0
    last: Observation | None = None
    while True:
        seen, out_of_time = _observe(probe)
        if out_of_time and last is not None:
            seen = last  # the deadline cut the last poll short: what was last seen is the state to report
        last = seen
        polls += 1
        elapsed = clock() - start
        remaining = 0.0 if out_of_time else timeout_seconds - elapsed
        final = seen.ready or seen.failed or remaining <= 0
        delay = None if final else min(backoff.delay(polls - 1), remaining)
        if on_poll:
            on_poll(seen, elapsed, delay)
        if seen.ready:
            return WaitResult(target=target, outcome="ready", state=seen.state, message=seen.message,
                              elapsed_seconds=elapsed, polls=polls)
        if seen.failed:
            return WaitResult(target=target, outcome="failed", state=seen.state, message=seen.message,
                              elapsed_seconds=elapsed, polls=polls)
        if delay is None:
            return WaitResult(target=target, outcome="timeout", state=seen.state,
                              message=f"not ready after {timeout_seconds:g} s (last state: {seen.state})",
                              elapsed_seconds=elapsed, polls=polls)
        sleep(delay)


# ---- probes ------------------------------------------------------------------------------------------------------


def cluster_probe(sagemaker: Any, name: str) -> Probe:
    """Ready: InService with every group at its target count. Failed/Deleting: terminal, with ``FailureMessage``."""

    def probe() -> Observation:
        read = settle(read_hyperpod(sagemaker, name), f"HyperPod cluster {name}")
        if read.unknown:
            return Observation(state=unknown_state(read.reason), message=read.reason)
        if read.absent:
            return Observation(state=f"{NOT_FOUND} (not created yet)")
        cluster = read.get()
        counts = ", ".join(f"{g.name} {g.current}/{g.target}" for g in cluster.groups)
        state = f"{cluster.status} ({counts})" if counts else cluster.status
        if cluster.status in HYPERPOD_TERMINAL:
            message = cluster.failure_message or ("the cluster is being deleted" if cluster.status != FAILED
                                                  else "no failure message")
            return Observation(state=state, failed=True, message=message)
        return Observation(state=state, ready=cluster.status == IN_SERVICE and cluster.complete)

    return probe


def addons_probe(eks: Any, env: EnvironmentConfig) -> Probe:
    """Ready: every add-on the environment needs is ACTIVE. ``*_FAILED``: terminal, with the health issues."""
    wanted = [a.name for a in expected_addons(env)]
    cluster = env.eks.cluster_name

    def probe() -> Observation:
        read = settle(look_up(lambda: installed_addons(eks, cluster), permission=ADDON_PERMISSIONS),
                      f"the add-ons of EKS cluster {cluster}")
        if read.unknown:
            return Observation(state=unknown_state(read.reason), message=read.reason)
        if read.absent:
            return Observation(state=f"EKS cluster {cluster} not found")
        found = read.get()
        broken = [found[n] for n in wanted if n in found and found[n].status in FAILED_STATUSES]
        if broken:
            message = "; ".join(f"{a.name} {a.status}: {', '.join(a.issues) or 'no health issues reported'}"
                                for a in broken)
            return Observation(state=", ".join(f"{a.name} {a.status}" for a in broken), failed=True, message=message)
        pending = [f"{n} {found[n].status if n in found else 'missing'}" for n in wanted
                   if n not in found or found[n].status != ACTIVE]
        if not pending:
            return Observation(state=f"all {len(wanted)} add-ons ACTIVE", ready=True)
        return Observation(state=f"{len(wanted) - len(pending)}/{len(wanted)} ACTIVE; waiting for " + ", ".join(pending))

    return probe


def _endpoint_observation(endpoint: EndpointLike, sagemaker: Any, kubectl: Kube) -> Observation:
    parts, ready, failed, messages = [], True, False, []
    if kubectl.unavailable() is None:
        iec = kubectl.iec_status(name=iec_name(endpoint), namespace=endpoint.namespace)
        if not iec.known and not iec.transient:
            raise Unobservable(f"cannot wait for endpoint {endpoint.name}: InferenceEndpointConfig "
                               f"{iec_name(endpoint)}: {iec.reason} (waiting cannot fix this)")
        parts.append(f"IEC {iec.state if iec.known else unknown_state(iec.reason)}")
        ready = ready and iec.ready
        if iec.failed:
            failed = True
            messages.append(f"IEC {iec_name(endpoint)}: {iec.state}: {iec.message or 'no condition message'}")
    if endpoint.rendered_sagemaker_endpoint_name:
        name = endpoint.rendered_sagemaker_endpoint_name  # the configured generation's own SageMaker endpoint
        read = settle(read_sagemaker_endpoint(sagemaker, name), f"SageMaker endpoint {name}")
        status = read.value.status if read.value else (NOT_FOUND if read.absent else unknown_state(read.reason))
        parts.append(f"SageMaker {status}")
        ready = ready and status == SAGEMAKER_IN_SERVICE
        if read.value and read.value.failed:
            failed = True
            messages.append(f"SageMaker endpoint {name}: {status}: {read.value.failure_reason or 'no reason given'}")
    return Observation(state=f"{endpoint.name}: " + ", ".join(parts), ready=ready, failed=failed,
                       message="; ".join(messages))


def endpoint_probe(sagemaker: Any, endpoints: tuple[EndpointLike, ...], kubectl: Kube) -> Probe:
    """Ready: every endpoint's IEC is DeploymentComplete and its SageMaker endpoint (if named) is InService."""
    if not endpoints:
        raise HpdpdError("the environment declares no endpoints to wait for")
    blind = [e.name for e in endpoints if not e.sagemaker_endpoint_name and kubectl.unavailable()]
    if blind:
        raise HpdpdError(f"cannot observe endpoint(s) {', '.join(blind)}: no SageMaker endpoint name and "
                         f"{kubectl.unavailable()}; pass --kubeconfig (kubectl must be on PATH)")

    def probe() -> Observation:
        seen = [_endpoint_observation(e, sagemaker, kubectl) for e in endpoints]
        return Observation(state="; ".join(o.state for o in seen), ready=all(o.ready for o in seen),
                           failed=any(o.failed for o in seen), message="; ".join(o.message for o in seen if o.message))

    return probe


def probe_for(target: str, env: EnvironmentConfig, clients: ClientSource, *, endpoints: tuple[EndpointLike, ...],
              kubectl: Kube) -> Probe:
    if target == "cluster":
        return cluster_probe(clients.client("sagemaker"), env.hyperpod.cluster_name)
    if target == "addons":
        return addons_probe(clients.client("eks"), env)
    if target == "endpoint":
        return endpoint_probe(clients.client("sagemaker"), endpoints, kubectl)
    raise HpdpdError(f"unknown wait target {target!r}; choose one of {', '.join(TARGETS)}")
