"""The rollout lease: one ``hpdpd rollout promote`` or ``abort`` at a time per endpoint, and the record of what it did.

The annotation ``hyperpod-dpd/rollout-lease`` on the endpoint's client Service holds JSON: the holder and when its
lease expires, and the rollout's record: from which generation to which, blue/green or in place, the last step done
and when the client Service was switched (where the drain starts). Every write of it carries the Service's
``metadata.resourceVersion``, so of two promotes that read the same version only one write lands; the other gets 409
Conflict (:class:`~hyperpod_dpd.ops.workloads.Conflict`), reads again and finds the lease taken.

A promote that is killed leaves its lease: it is refused to others until it expires, then the next promote takes it
over and resumes from the record (an in-place promote killed after its delete still knows that it must create the
configured generation). A promote stopped by an error it could report releases the lease and keeps the record, so a
second run resumes at once. What this cannot do (fail safe, and documented in docs/cli.md): expiry is judged by the
clock of the process that wants the lease (keep the machines' clocks in sync), and a lease is not a write fence for
the objects it changes: a promote renews its lease (a conditional write) right before each step that moves traffic
or deletes, and stops when that write finds the lease taken (:class:`LeaseLost`, naming the step). A long step (the
EFA probe, smoke, verify) keeps the lease with a :class:`Keep`: its polls renew it, and so does each call that may
block, unless the lease lasts that long already.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.workloads import Conflict, get_service, patch_service

LEASE_ANNOTATION = "hyperpod-dpd/rollout-lease"
Mode = Literal["blue-green", "in-place"]
MODES: tuple[Mode, ...] = ("blue-green", "in-place")
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def default_holder() -> str:
    """Who holds a lease: user, host and process (a second process on the same host is another holder)."""
    return f"{os.environ.get('USER') or 'unknown'}@{socket.gethostname()} pid {os.getpid()}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(value: Any, key: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"'{key}' is not a timestamp")
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"'{key}' has no time zone")
    return moment


@dataclass(frozen=True, kw_only=True)
class LeaseRecord:
    """The annotation's content. ``holder`` is empty once released (the record stays while a rollout is unfinished:
    ``hpdpd rollout status`` then says so, and the next promote resumes it)."""

    holder: str
    expires: datetime
    source: str | None  # the generation that served when the rollout started (None: none did)
    target: str  # the generation it promotes
    mode: Mode
    step: str  # the last step done
    switched_at: datetime | None = None  # when the client Service moved to ``target``: the drain starts there

    def live(self, now: datetime) -> bool:
        return bool(self.holder) and now < self.expires

    def describe(self) -> str:
        return (f"{self.mode} promote from {self.source or 'no serving generation'} to {self.target}, last step: "
                f"{self.step}")

    def to_text(self) -> str:
        return json.dumps({"holder": self.holder, "expires": _iso(self.expires), "from": self.source,
                           "to": self.target, "mode": self.mode, "step": self.step,
                           "switched_at": _iso(self.switched_at) if self.switched_at else None})

    def to_json(self) -> dict[str, Any]:
        return dict(json.loads(self.to_text()))

    @classmethod
    def from_text(cls, text: str) -> LeaseRecord:
        """Parse the annotation; ``ValueError`` names what is wrong."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        for key in ("holder", "to", "step"):
            if not isinstance(data.get(key), str):
                raise ValueError(f"'{key}' is not a string")
        if data.get("mode") not in MODES:
            raise ValueError(f"'mode' is not one of {', '.join(MODES)}")
        source = data.get("from")
        if source is not None and not isinstance(source, str):
            raise ValueError("'from' is not a string")
        switched = data.get("switched_at")
        return cls(holder=data["holder"], expires=_parse_time(data.get("expires"), "expires"), source=source,
                   target=data["to"], mode=data["mode"], step=data["step"],
                   switched_at=_parse_time(switched, "switched_at") if switched is not None else None)


def read_lease(service: Mapping[str, Any]) -> tuple[LeaseRecord | None, str | None]:
    """The record on a client Service document, and why it cannot be read (both None: no record)."""
    meta = service.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(LEASE_ANNOTATION)
    if text is None:
        return None, None
    try:
        return LeaseRecord.from_text(str(text)), None
    except ValueError as exc:
        where = f"service {meta.get('namespace', '?')}/{meta.get('name', '?')}"
        return None, (f"the annotation {LEASE_ANNOTATION} of {where} is not a rollout lease ({exc}); if no rollout "
                      f"runs, remove it: kubectl annotate service -n {meta.get('namespace', '?')} "
                      f"{meta.get('name', '?')} {LEASE_ANNOTATION}-")


class LeaseHeld(Exception):
    """Another holder's lease is live."""

    def __init__(self, record: LeaseRecord) -> None:
        super().__init__(f"a rollout of this endpoint is running: {record.holder} holds its lease until "
                         f"{_iso(record.expires)} ({record.describe()}); try again after that")
        self.record = record


class LeaseUnusable(Exception):
    """The lease cannot be taken or kept: unreadable, lost to another holder, or the Service kept changing."""


class LeaseLost(LeaseUnusable):
    """Another holder took the lease (or removed it) while this one was ``during`` a step: the run stops there."""

    def __init__(self, message: str, during: str) -> None:
        super().__init__(message)
        self.during = during


def _version(document: Mapping[str, Any]) -> str:
    version = str((document.get("metadata") or {}).get("resourceVersion") or "")
    if not version:  # every object the API server returns has one; without it no write could be conditional
        raise LeaseUnusable("the client Service has no metadata.resourceVersion, so the rollout lease cannot be "
                            "taken safely")
    return version


@dataclass
class Lease:
    """A lease this process holds on ``namespace/service``; ``version`` is the Service's resourceVersion after the
    last write of it."""

    kube: Kube
    namespace: str
    service: str
    holder: str
    seconds: float
    now: Clock
    record: LeaseRecord
    version: str

    @classmethod
    def take(cls, kube: Kube, *, namespace: str, service: str, holder: str, seconds: float, now: Clock,
             plan: Callable[[LeaseRecord | None], LeaseRecord], attempts: int = 3) -> tuple[Lease, LeaseRecord | None]:
        """Take the lease with the record ``plan(previous)`` (``previous``: the record a stopped rollout left, or
        None). Raises :class:`LeaseHeld` while another holder's lease is live."""
        for _ in range(attempts):
            document = get_service(kube, namespace=namespace, name=service)
            previous, problem = read_lease(document)
            if problem:
                raise LeaseUnusable(problem)
            if previous is not None and previous.live(now()) and previous.holder != holder:
                raise LeaseHeld(previous)
            record = replace(plan(previous), holder=holder, expires=now() + timedelta(seconds=seconds))
            try:
                written = patch_service(kube, namespace=namespace, name=service, body={"metadata": {
                    "resourceVersion": _version(document), "annotations": {LEASE_ANNOTATION: record.to_text()}}})
            except Conflict:
                continue  # another writer came first: read again, and find out whether it took the lease
            return cls(kube=kube, namespace=namespace, service=service, holder=holder, seconds=seconds, now=now,
                       record=record, version=_version(written)), previous
        raise LeaseUnusable(f"the client Service {namespace}/{service} changed at every attempt to take the rollout "
                            "lease; try again")

    def write(self, *, step: str | None = None, switched_at: datetime | None = None,
              spec: Mapping[str, Any] | None = None, during: str | None = None) -> None:
        """Renew the lease (and record ``step``, ``switched_at``), patching ``spec`` of the Service in the same
        conditional write. Raises :class:`LeaseLost` (naming ``during``, by default "before ``step``") when the lease
        is no longer this holder's."""
        during = during or (f"before {step}" if step else f"after {self.record.step}")
        record = replace(self.record, expires=self.now() + timedelta(seconds=self.seconds),
                         step=step or self.record.step, switched_at=switched_at or self.record.switched_at)
        for _ in range(3):
            body: dict[str, Any] = {"metadata": {"resourceVersion": self.version,
                                                 "annotations": {LEASE_ANNOTATION: record.to_text()}}}
            if spec:
                body["spec"] = dict(spec)
            try:
                written = patch_service(self.kube, namespace=self.namespace, name=self.service, body=body)
            except Conflict:
                # Someone else wrote the Service: go on only if the lease is still exactly ours (a deploy that
                # applied the Service, say), with the version it left ("GET the resource again, apply the changes
                # afresh, and try submitting again": api-conventions.md, Concurrency Control and Consistency).
                self.version = self._still_ours(during)
                continue
            self.record, self.version = record, _version(written)
            return
        raise LeaseUnusable(f"the client Service {self.namespace}/{self.service} kept changing under the rollout "
                            "lease; run the command again")

    def left(self) -> float:
        """Seconds until the lease expires, by this process's clock."""
        return (self.record.expires - self.now()).total_seconds()

    def renew_if_due(self, *, during: str, ahead: float = 0.0) -> None:
        """Renew once half the lease has passed, or (``ahead``: a call that may block that long comes next) when it
        lasts less than ``ahead`` seconds more (at most the whole lease). Until then nobody else can have taken it;
        after, the conditional write finds out (:class:`LeaseLost`, naming ``during``)."""
        if self.left() < max(self.seconds / 2, min(ahead, self.seconds)):
            self.write(during=during)

    def release(self, *, keep_record: bool) -> None:
        """Give the lease up: remove the annotation, or keep the record with no holder (an unfinished rollout)."""
        text = replace(self.record, holder="", expires=self.now()).to_text() if keep_record else None
        for _ in range(3):
            try:
                patch_service(self.kube, namespace=self.namespace, name=self.service, body={"metadata": {
                    "resourceVersion": self.version, "annotations": {LEASE_ANNOTATION: text}}})
                return
            except Conflict:
                self.version = self._still_ours("while releasing it")
        raise LeaseUnusable(f"the client Service {self.namespace}/{self.service} kept changing while the rollout "
                            "lease was released; it expires on its own")

    def _still_ours(self, during: str) -> str:
        document = get_service(self.kube, namespace=self.namespace, name=self.service)
        current, problem = read_lease(document)
        if current is None or current.holder != self.holder or current.to_text() != self.record.to_text():
            taken = f" ({current.holder} holds it until {_iso(current.expires)})" if current and current.holder else ""
            why = f" ({problem})" if problem else ""
            raise LeaseLost(f"lost the rollout lease of {self.namespace}/{self.service}{taken}{why} {during}: this "
                            "run stopped there and changes nothing more; 'hpdpd rollout status' says where the "
                            "rollout stands", during)
        return _version(document)


@dataclass(frozen=True)
class Keep:
    """How a long step of a rollout (the EFA probe, smoke, verify) keeps ``lease`` while it runs: ``sleep`` in its
    polls renews the lease after each; ``ahead(seconds)`` before a call that may block up to ``seconds`` renews it
    unless it lasts that long already. Either raises :class:`LeaseLost` naming ``during`` once the lease is
    another's, and remembers it (:meth:`raise_if_lost`), so a step that catches its calls' errors cannot hide it."""

    lease: Lease
    during: str
    pause: Callable[[float], None]
    lost: list[LeaseLost] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.pause(seconds)
        self.ahead()

    def ahead(self, seconds: float = 0.0) -> None:
        if self.lost:
            raise self.lost[0]
        try:
            self.lease.renew_if_due(during=self.during, ahead=seconds)
        except LeaseLost as exc:
            self.lost.append(exc)
            raise

    def raise_if_lost(self) -> None:
        """After the step: stop if the lease was lost during it (whatever the step did with the error)."""
        if self.lost:
            raise self.lost[0]
