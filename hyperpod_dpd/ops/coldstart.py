"""Where a cold start spends its time: the phases of each prefill and decode pod of an IEC, read from the Kubernetes
API (the pods' conditions and container statuses, their events, the nodes' ``Ready`` condition).

Phases, in the order a pod goes through them (core/v1 objects; kubelet wordings in
:mod:`hyperpod_dpd.catalogue.caches`):

* ``node ready``: from the pod's creation to the later of its ``PodScheduled`` condition and its node's ``Ready``
  condition (a node that joins after the pod was created, as Karpenter's do, is part of the wait).
* ``image pulled``: the worker container's ``Pulling`` event to its ``Pulled`` event; the duration is the one the
  kubelet writes in the ``Pulled`` message ("in 1m2.5s"), 0 when the image was "already present on machine" (the
  image cache's purpose). Events live an hour by default (``--event-ttl``): older pulls are unknown.
* ``weights loaded``: the init containers, from the first one's start to the ``Initialized`` condition. Which init
  container the operator runs to fetch the model (``prefetchEnabled``, Hugging Face downloads) is not published, so
  every init container counts, and each one's name is shown; a pod without init containers reads its weights in the
  engine phase (S3 and FSx are volumes mounted into the worker).
* ``engine healthy``: the worker container's start to the pod's ``Ready`` condition: vLLM loads the weights into
  the GPUs, captures CUDA graphs and passes its readiness probe.

A phase whose evidence is missing (no event, no condition yet, a condition not ``True``) has no start, end or
duration: it is ``unknown`` with the reason, never an estimate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_dpd.catalogue.caches import (
    ALREADY_PRESENT,
    INITIALIZED_CONDITION,
    NODE_READY_CONDITION,
    PULLED_REASON,
    PULLING_REASON,
    READY_CONDITION,
    SCHEDULED_CONDITION,
)
from hyperpod_dpd.ops.deadline import OutOfTime
from hyperpod_dpd.ops.kube import Kube, KubeError
from hyperpod_dpd.ops.pod_api import worker_documents

PHASES = ("node ready", "image pulled", "weights loaded", "engine healthy")
# Go's time.Duration.String(): "1h2m3.5s", "3m10.96s", "717ms", "1.5µs" (the kubelet truncates to milliseconds).
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|µs|us|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
_PULLED_IN = re.compile(r"Successfully pulled image .* in (\S+?) \(")


@dataclass(frozen=True, kw_only=True)
class Phase:
    name: str
    start: datetime | None = None
    end: datetime | None = None
    seconds: float | None = None
    detail: str = ""

    @property
    def known(self) -> bool:
        return self.seconds is not None

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.name, "start": _stamp(self.start), "end": _stamp(self.end),
                "seconds": None if self.seconds is None else round(self.seconds, 3), "detail": self.detail or None}


@dataclass(frozen=True, kw_only=True)
class PodColdStart:
    pod: str
    role: str
    node: str | None
    phases: tuple[Phase, ...]

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "role": self.role, "node": self.node, "phases": [p.to_json() for p in self.phases]}


@dataclass(frozen=True, kw_only=True)
class ColdStart:
    """The cold-start phases of one IEC's pods, or why they could not be read."""

    iec: str
    namespace: str
    pods: tuple[PodColdStart, ...] = ()
    unknown: str = ""  # why nothing could be read (the API's one-line reason)

    def to_json(self) -> dict[str, Any]:
        return {"iec": self.iec, "namespace": self.namespace, "pods": [p.to_json() for p in self.pods],
                "unknown": self.unknown or None}

    def rows(self) -> list[tuple[str, ...]]:
        return json_rows(self.to_json())


def json_rows(data: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Table rows of a :meth:`ColdStart.to_json`: role, pod, phase, start, end, duration, detail (``unknown`` where the
    evidence is missing)."""
    return [(str(pod["role"]), str(pod["pod"]), str(phase["phase"]), phase["start"] or "", phase["end"] or "",
             duration_text(phase["seconds"]), phase["detail"] or "")
            for pod in data.get("pods") or [] for phase in pod["phases"]]


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    return f"{seconds:.1f} s" if seconds < 120 else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


# ---- reading the cluster ------------------------------------------------------------------------------------------


def read_cold_start(kube: Kube, *, namespace: str, iec: str) -> ColdStart:
    """The phases of the IEC's prefill and decode pods; a read that fails leaves them unknown with its reason."""
    try:
        pods = worker_documents(kube, namespace=namespace, iec=iec)
        if not pods:
            return ColdStart(iec=iec, namespace=namespace, unknown="no prefill or decode pods yet")
        events = _events(kube, namespace)
        nodes = _nodes(kube)
    except KubeError as exc:
        return ColdStart(iec=iec, namespace=namespace, unknown=exc.reason)
    except OutOfTime as exc:  # the command's deadline ran out before the phases could be read
        return ColdStart(iec=iec, namespace=namespace, unknown=str(exc))
    return ColdStart(iec=iec, namespace=namespace, pods=tuple(pod_phases(p, events, nodes) for p in pods))


def _items(document: Any) -> list[dict[str, Any]]:
    return [i for i in (document.get("items") or []) if isinstance(i, dict)] if isinstance(document, dict) else []


def _events(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    from kubernetes import client

    document = kube.call(f"list events in namespace {namespace}", lambda api: client.CoreV1Api(api)
                         .list_namespaced_event(namespace, _preload_content=False, _request_timeout=kube.timeout),
                         permission=f"list on events in namespace {namespace}", expect="list")
    return _items(document)


def _nodes(kube: Kube) -> dict[str, dict[str, Any]]:
    from kubernetes import client

    document = kube.call("list nodes", lambda api: client.CoreV1Api(api).list_node(
        _preload_content=False, _request_timeout=kube.timeout), permission="list on nodes (cluster scope)",
        expect="list")
    return {str((n.get("metadata") or {}).get("name", "")): n for n in _items(document)}


# ---- deriving the phases ------------------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 ``Time`` or ``MicroTime`` of the API (``2026-01-01T00:00:00Z``, ``...00.123456Z``); None if absent."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _stamp(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration string (``1m2.345s``); None when it is not one."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def _condition(conditions: Iterable[Any], kind: str) -> tuple[datetime | None, str]:
    """The time a condition turned ``True``, or None with why not."""
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == kind:
            if condition.get("status") != "True":
                reason = condition.get("reason") or condition.get("message") or "not yet"
                return None, f"{kind} is {condition.get('status')} ({' '.join(str(reason).split())[:120]})"
            moment = parse_time(condition.get("lastTransitionTime"))
            return moment, "" if moment else f"{kind} has no lastTransitionTime"
    return None, f"no {kind} condition yet"


def _event_time(event: Mapping[str, Any], *, last: bool) -> datetime | None:
    order = ("lastTimestamp", "eventTime", "firstTimestamp") if last else ("firstTimestamp", "eventTime",
                                                                          "lastTimestamp")
    for key in order:
        moment = parse_time(event.get(key))
        if moment:
            return moment
    series = event.get("series") if isinstance(event.get("series"), dict) else {}
    return parse_time((series or {}).get("lastObservedTime"))


def _phase(name: str, start: datetime | None, end: datetime | None, detail: str = "", *,
           seconds: float | None = None, why: str = "") -> Phase:
    if start is None or end is None:
        return Phase(name=name, start=start, end=end, detail=why or detail)
    return Phase(name=name, start=start, end=end, detail=detail,
                 seconds=seconds if seconds is not None else max(0.0, (end - start).total_seconds()))


def _worker(pod: Mapping[str, Any]) -> str | None:
    """The vLLM container (``prefill-<iec>`` / ``decode-<iec>``), else the first container."""
    names = [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    return next((n for n in names if n.startswith(("prefill-", "decode-"))), names[0] if names else None)


def pod_phases(pod: Mapping[str, Any], events: Sequence[Mapping[str, Any]],
               nodes: Mapping[str, Mapping[str, Any]]) -> PodColdStart:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, node_name = str(meta.get("name", "")), spec.get("nodeName")
    conditions = status.get("conditions") or []
    worker = _worker(pod)
    mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name
            and (e.get("involvedObject") or {}).get("kind", "Pod") == "Pod"]
    return PodColdStart(pod=name, role=str((meta.get("labels") or {}).get(
        "inference.sagemaker.aws.amazon.com/dpd-role", name.split("-", 1)[0])), node=node_name, phases=(
        _node_phase(meta, status, conditions, nodes.get(str(node_name)) if node_name else None),
        _image_phase(mine, worker),
        _init_phase(status, conditions),
        _engine_phase(status, conditions, worker)))


def _node_phase(meta: Mapping[str, Any], status: Mapping[str, Any], conditions: Sequence[Any],
                node: Mapping[str, Any] | None) -> Phase:
    created = parse_time(meta.get("creationTimestamp"))
    scheduled, why = _condition(conditions, SCHEDULED_CONDITION)
    if node is None:
        return _phase(PHASES[0], created, None, why=why or "the pod's node is not in the node list")
    node_ready, node_why = _condition((node.get("status") or {}).get("conditions") or [], NODE_READY_CONDITION)
    if scheduled is None or node_ready is None:
        return _phase(PHASES[0], created, None, why=why or f"node {node.get('metadata', {}).get('name')}: {node_why}")
    started = parse_time(status.get("startTime"))  # the kubelet acknowledged the pod: its node was up by then
    if started is not None and node_ready > started:  # the node's Ready changed later (a restart), not its join
        return _phase(PHASES[0], created, scheduled, f"node Ready changed at {_stamp(node_ready)}, after the pod "
                      "started: not part of this wait", why="the pod has no creationTimestamp")
    detail = f"node ready {_stamp(node_ready)}" + (" (after the pod was created)" if created and node_ready > created
                                                   else "")
    return _phase(PHASES[0], created, max(scheduled, node_ready), detail, why="the pod has no creationTimestamp")


def _image_phase(events: Sequence[Mapping[str, Any]], worker: str | None) -> Phase:
    path = f"spec.containers{{{worker}}}"
    own = [e for e in events if (e.get("involvedObject") or {}).get("fieldPath") in (path, None)]
    pulling = [e for e in own if e.get("reason") == PULLING_REASON]
    pulled = [e for e in own if e.get("reason") == PULLED_REASON]
    if not pulled:
        return _phase(PHASES[1], _event_time(pulling[0], last=False) if pulling else None, None,
                      why="no Pulled event of the worker container" + (
                          " yet" if pulling else " (events expire after an hour)"))
    # The cold start's pull is the first Pulled event: a restarted container adds "already present on machine" ones
    # later (and the API lists events by name, not by time).
    done = min(pulled, key=lambda e: _event_time(e, last=False) or datetime.max.replace(tzinfo=UTC))
    end = _event_time(done, last=False)
    message = " ".join(str(done.get("message", "")).split())
    if ALREADY_PRESENT in message:
        return _phase(PHASES[1], end, end, "already present on the node", seconds=0.0)
    found = _PULLED_IN.search(message)
    seconds = go_duration(found.group(1)) if found else None
    start = _event_time(pulling[0], last=False) if pulling else None
    if seconds is not None and end is not None:  # the kubelet's own measure of the pull
        return Phase(name=PHASES[1], start=start or end - timedelta(seconds=seconds), end=end, seconds=seconds,
                     detail="pull time from the Pulled event")
    return _phase(PHASES[1], start, end, why="no Pulling event, and the Pulled event states no duration")


def _init_phase(status: Mapping[str, Any], conditions: Sequence[Any]) -> Phase:
    inits = [s for s in status.get("initContainerStatuses") or [] if isinstance(s, dict)]
    initialized, why = _condition(conditions, INITIALIZED_CONDITION)
    if not inits:
        return Phase(name=PHASES[2], detail="no init containers: the weights load in the engine phase (mounted volume)")
    starts = [parse_time(((s.get("state") or {}).get("terminated") or (s.get("state") or {}).get("running") or {})
                         .get("startedAt")) for s in inits]
    known = [s for s in starts if s is not None]
    names = ", ".join(str(s.get("name", "")) for s in inits)
    return _phase(PHASES[2], min(known) if known else None, initialized, f"init containers: {names}",
                  why=why or f"no init container has started yet ({names})")


def _engine_phase(status: Mapping[str, Any], conditions: Sequence[Any], worker: str | None) -> Phase:
    started = None
    for container in status.get("containerStatuses") or []:
        if isinstance(container, dict) and container.get("name") == worker:
            started = parse_time(((container.get("state") or {}).get("running") or {}).get("startedAt"))
    ready, why = _condition(conditions, READY_CONDITION)
    return _phase(PHASES[3], started, ready, "worker start to Ready",
                  why=why if started else f"the worker container {worker} is not running")
