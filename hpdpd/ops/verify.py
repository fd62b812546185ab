"""``hpdpd verify``: the KV-fabric gate of one endpoint, from the live cluster and its metrics.

Checks (stable names): ``iec``, ``pods:prefill``, ``pods:decode``, ``same-az``, ``separate-nodes``, ``efa:prefill``,
``efa:decode``, ``transfer-backend``, ``kv-throughput``. Each is PASS, WARN or FAIL with a one-line detail, and a row
that is not PASS names its most likely cause (platform docs section 19, "Troubleshooting: symptom -> cause").

The transfer backend: LMCache's PD transfer goes through NIXL (DPD documentation: "wiring prefill and decode pods
together via LMCache and NIXL"; transport stack LMCache -> NIXL -> libfabric -> EFA). NIXL logs ``Backend <NAME> was
instantiated`` (``LIBFABRIC`` over EFA, ``UCX`` otherwise); LMCache reads its backends from ``LMCACHE_NIXL_BACKENDS``
(LMCache configuration reference, default ``["UCX"]``); libfabric picks its provider from ``FI_PROVIDER`` and UCX
its transports from ``UCX_TLS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.ops.checks import Check, Status
from hyperpod_dpd.ops.kube import Kube, get_iec, parse_iec
from hyperpod_dpd.ops.metrics import Prometheus, Throughput, log_throughput, prometheus_throughput
from hyperpod_dpd.ops.workloads import Node, Pod, dpd_pods, nodes, pod_log, warning_events

BACKEND_LINE = re.compile(r"Backend (\w+) was instantiated")
EFA_CAUSE = ("EFA is not in use (platform docs section 19, 'KV throughput < 1 GB/s'): nodes not EFA-capable, not in "
             "the same AZ, no EFA resources ('kubectl describe node <node> | grep efa'), or the image lacks "
             "libfabric's EFA provider")
TCP_CAUSE = ("the KV cache moves over TCP, not EFA: pin NIXL to libfabric (LMCACHE_NIXL_BACKENDS=[\"LIBFABRIC\"]) "
             "with FI_PROVIDER=efa, and use an image that ships libfabric's EFA provider")


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    endpoint: str
    namespace: str
    iec: str
    window_seconds: int
    checks: tuple[Check, ...]
    throughput: Throughput | None = None
    line_rate_gbps: float | None = None

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        measured = None
        if self.throughput is not None:
            measured = {"gbps": round(self.throughput.gbps, 3), "bytes": self.throughput.bytes,
                        "seconds": round(self.throughput.seconds, 6), "source": self.throughput.source,
                        "line_rate_fraction": round(self.throughput.gbps / self.line_rate_gbps, 4)
                        if self.line_rate_gbps else None}
        return {"endpoint": self.endpoint, "namespace": self.namespace, "iec": self.iec, "ok": self.ok,
                "window_seconds": self.window_seconds, "line_rate_gbps": self.line_rate_gbps,
                "throughput": measured, "checks": [c.to_json() for c in self.checks]}


def line_rate_gbps(endpoint: Any) -> float | None:
    """The EFA line rate one pod of the endpoint can use, in GB/s: the instance's EFA bandwidth (catalogue, Gbit/s)
    in bytes, times the pod's share of the instance's GPUs."""
    spec = endpoint.instance
    if not spec.efa_bandwidth_gbps or not spec.gpu_count:
        return None
    return spec.efa_bandwidth_gbps / 8 * min(1.0, endpoint.gpus_per_pod / spec.gpu_count)


# ---- the checks (pure: facts in, rows out) ---------------------------------------------------------------------------


def pods_check(role: str, pods: Sequence[Pod], replicas: int, events: Sequence[str]) -> Check:
    running = [p for p in pods if p.running]
    detail = f"{len(running)}/{replicas} {role} pod(s) Running" + (
        f" ({', '.join(p.name for p in running)})" if running else "")
    if len(running) >= replicas:
        return Check(name=f"pods:{role}", status="pass", detail=detail)
    stuck = [p for p in pods if not p.running]
    why = "; ".join(f"{p.name} {p.phase}" + (f" ({p.waiting})" if p.waiting else "") for p in stuck) or "no pod"
    cause = _pod_cause(stuck, events)
    status: Status = "fail" if not running else "warn"
    return Check(name=f"pods:{role}", status=status, detail=f"{detail}; {why}", cause=cause)


def _pod_cause(stuck: Sequence[Pod], events: Sequence[str]) -> str:
    waiting = " ".join(p.waiting for p in stuck)
    last = f" (event: {events[-1]})" if events else ""
    if not stuck:
        return "the operator created no pod for this role: check the IEC's status conditions" + last
    if "ImagePull" in waiting or "ErrImage" in waiting or "ContainerCreating" in waiting:
        return "image pull or volume mount failure: check the image and the model's S3 access" + last
    if any(p.phase == "Pending" and not p.node for p in stuck):
        return ("no node of the role's instance group has the free GPUs/EFA the pod requests (Pending): scale the "
                "group or free the nodes") + last
    if "CrashLoopBackOff" in waiting:
        return "the server keeps crashing: an operator older than v3.2 (EngineDeadError), or OOM" + last
    return "pods still starting: a cold load of a 70B model from S3 takes 5-10 minutes" + last


def zone_check(pods: Sequence[Pod], cluster: dict[str, Node]) -> Check:
    zones: dict[str, list[str]] = {}
    for pod in pods:
        node = cluster.get(pod.node or "")
        zones.setdefault((node.zone if node else None) or "?", []).append(pod.name)
    if "?" in zones:
        return Check(name="same-az", status="warn", detail=f"no zone label on the node of {', '.join(zones['?'])}",
                     cause="nodes without topology.kubernetes.io/zone: the AZ cannot be checked")
    listing = "; ".join(f"{z}: {', '.join(names)}" for z, names in sorted(zones.items()))
    if len(zones) > 1:
        return Check(name="same-az", status="fail", detail=f"pods in {len(zones)} AZs ({listing})",
                     cause="EFA does not cross Availability Zones, so the KV transfer cannot use it: keep both "
                           "instance groups in the GPU AZ (topology.availability_zone, sameAZ)")
    return Check(name="same-az", status="pass", detail=f"all pods in {next(iter(zones), '?')}")


def node_check(pods: Sequence[Pod]) -> Check:
    by_role = {role: {p.node for p in pods if p.role == role and p.node} for role in DPD_ROLES}
    shared = sorted(by_role["prefill"] & by_role["decode"])
    if shared:
        return Check(name="separate-nodes", status="fail", detail=f"prefill and decode share node {', '.join(shared)}",
                     cause="both roles landed on one node: the KV cache never crosses the fabric and the roles "
                           "compete for the node's GPUs; give each role its own instance group "
                           "(prefill.instance_group, decode.instance_group)")
    return Check(name="separate-nodes", status="pass",
                 detail=f"prefill on {', '.join(sorted(by_role['prefill'])) or '-'}; decode on "
                        f"{', '.join(sorted(by_role['decode'])) or '-'}")


def efa_check(role: str, pods: Sequence[Pod], cluster: dict[str, Node], expected: int) -> Check:
    if not pods:
        return Check(name=f"efa:{role}", status="fail", detail=f"no {role} pod to inspect",
                     cause="the role has no pod (see its pods row)")
    parts, missing = [], []
    for pod in pods:
        node = cluster.get(pod.node or "")
        allocatable = node.allocatable_efa if node else 0
        parts.append(f"{pod.name}: {pod.efa} EFA device(s) (node {pod.node or '-'} allocatable {allocatable})")
        if pod.efa <= 0 or allocatable <= 0:
            missing.append((pod, node, allocatable))
    detail = "; ".join(parts) + (f"; the instance type has {expected}" if expected else "")
    if not missing:
        return Check(name=f"efa:{role}", status="pass", detail=detail)
    pod, node, allocatable = missing[0]
    if allocatable <= 0:
        cause = (f"node {pod.node or '-'} advertises no vpc.amazonaws.com/efa: the EFA device plugin is not running "
                 "there or the instance type is not EFA-capable ('kubectl describe node <node> | grep efa')")
    else:
        cause = ("the pod requests no vpc.amazonaws.com/efa devices, so none are mounted into it: the operator did "
                 "not inject them (platform docs section 20, item 3); the KV transfer cannot use EFA")
    return Check(name=f"efa:{role}", status="fail", detail=detail, cause=cause)


def backend_check(pods: Sequence[Pod], logs: dict[str, str]) -> Check:
    """From the pods' environment and their logs: libfabric over EFA passes, UCX or a TCP provider fails."""
    seen: list[str] = []
    tcp: list[str] = []
    efa: list[str] = []
    for pod in pods:
        env = pod.env
        backends = env.get("LMCACHE_NIXL_BACKENDS", "").upper()
        provider = env.get("FI_PROVIDER", "").lower()
        if backends:
            seen.append(f"{pod.name}: LMCACHE_NIXL_BACKENDS={env['LMCACHE_NIXL_BACKENDS']}")
            (efa if "LIBFABRIC" in backends else tcp).append(pod.name)
        if provider:
            seen.append(f"{pod.name}: FI_PROVIDER={provider}")
            (efa if provider == "efa" else tcp).append(pod.name)
        if env.get("UCX_TLS", "").lower().startswith("tcp"):
            seen.append(f"{pod.name}: UCX_TLS={env['UCX_TLS']}")
            tcp.append(pod.name)
        for name in set(BACKEND_LINE.findall(logs.get(pod.name, ""))):
            seen.append(f"{pod.name}: log 'Backend {name} was instantiated'")
            (efa if name.upper() == "LIBFABRIC" else tcp).append(pod.name)
    if tcp:
        return Check(name="transfer-backend", status="fail", detail="; ".join(seen), cause=TCP_CAUSE)
    if {p.name for p in pods} <= set(efa) and pods:
        return Check(name="transfer-backend", status="pass", detail="libfabric over EFA: " + "; ".join(seen))
    return Check(name="transfer-backend", status="warn",
                 detail="; ".join(seen) or "no backend variable and no 'Backend ... was instantiated' line",
                 cause="the backend could not be established for every pod (the startup line may have rotated out "
                       "of the log); the throughput row is the evidence")


def throughput_check(measured: Throughput | None, *, floor_gbps: float, warn_fraction: float,
                     line_rate: float | None, window_seconds: int, sources: str) -> Check:
    if measured is None:
        return Check(name="kv-throughput", status="warn",
                     detail=f"no KV transfer measured in the last {window_seconds} s ({sources})",
                     cause="no long prompt crossed the threshold in the window: send one (hpdpd smoke) and verify "
                           "again, or widen --window")
    fraction = measured.gbps / line_rate if line_rate else None
    share = f" ({fraction:.1%} of the {line_rate:.0f} GB/s EFA line rate)" if fraction is not None else ""
    detail = (f"{measured.gbps:.2f} GB/s{share}: {measured.bytes / 1e9:.2f} GB in {measured.seconds:.3f} s of "
              f"transfer over {window_seconds} s, from the {measured.source}")
    if measured.gbps < floor_gbps:
        return Check(name="kv-throughput", status="fail", detail=f"{detail}; floor {floor_gbps:g} GB/s",
                     cause=EFA_CAUSE)
    if fraction is not None and fraction < warn_fraction:
        return Check(name="kv-throughput", status="warn", detail=f"{detail}; under {warn_fraction:.0%} of line rate",
                     cause="the fabric is slow rather than absent: fewer EFA devices than the instance has, a "
                           "placement group missing, or transfers too small to fill the links")
    return Check(name="kv-throughput", status="pass", detail=detail)


# ---- collection ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Target:
    """What verify needs of an endpoint (an ``EndpointConfig``), and which IEC generation to look at."""

    endpoint: Any
    iec: str
    window_seconds: int = 300
    prometheus: Prometheus | None = None
    extra_logs: dict[str, str] = field(default_factory=dict)


def verify_endpoint(kube: Kube, target: Target) -> VerifyReport:
    """Read the cluster (and metrics) and evaluate every check; KubeError / MetricsError propagate."""
    e, iec = target.endpoint, target.iec
    state = parse_iec(get_iec(kube, name=iec, namespace=e.namespace))
    rows: list[Check] = [_iec_check(iec, state)]
    pods = dpd_pods(kube, namespace=e.namespace, iec=iec)
    cluster = nodes(kube)
    events = warning_events(kube, namespace=e.namespace, names={p.name for p in pods}) if pods else []
    by_role = {role: [p for p in pods if p.role == role] for role in DPD_ROLES}
    for role in DPD_ROLES:
        rows.append(pods_check(role, by_role[role], e.role(role).replicas, events))
    running = [p for p in pods if p.running]
    rows += [zone_check(running, cluster), node_check(running)]
    rows += [efa_check(role, [p for p in running if p.role == role], cluster, e.instance.efa_interfaces)
             for role in DPD_ROLES]
    logs = {p.name: pod_log(kube, p, tail_lines=2000) for p in _first_per_role(running)}
    rows.append(backend_check(_first_per_role(running), logs))
    measured, sources = _throughput(kube, target, running)
    rate = line_rate_gbps(e)
    floor = getattr(e, "kv_transfer", None)
    rows.append(throughput_check(measured, floor_gbps=getattr(floor, "min_gbps", 1.0),
                                 warn_fraction=getattr(floor, "warn_line_rate_fraction", 0.1), line_rate=rate,
                                 window_seconds=target.window_seconds, sources=sources))
    return VerifyReport(endpoint=e.name, namespace=e.namespace, iec=iec, window_seconds=target.window_seconds,
                        checks=tuple(rows), throughput=measured, line_rate_gbps=rate)


def _iec_check(iec: str, state: Any) -> Check:
    if state.ready:
        return Check(name="iec", status="pass", detail=f"{iec} {state.state}")
    if state.failed:
        return Check(name="iec", status="fail", detail=f"{iec} {state.state}: {state.message}",
                     cause="the operator could not deploy the endpoint: its condition message says why")
    return Check(name="iec", status="warn", detail=f"{iec} {state.state}" + (f": {state.message}" if state.message
                                                                               else ""),
                 cause="still deploying: wait for DeploymentComplete (hpdpd wait --for endpoint)")


def _first_per_role(pods: Iterable[Pod]) -> list[Pod]:
    chosen: dict[str, Pod] = {}
    for pod in pods:
        chosen.setdefault(pod.role or "", pod)
    return [chosen[r] for r in DPD_ROLES if r in chosen]


def _throughput(kube: Kube, target: Target, running: Sequence[Pod]) -> tuple[Throughput | None, str]:
    e, window = target.endpoint, target.window_seconds
    tried = []
    if target.prometheus is not None:
        measured = prometheus_throughput(target.prometheus, namespace=e.namespace, iec=target.iec, seconds=window)
        if measured is not None:
            return measured, "prometheus"
        tried.append("no NIXL transfer series in Prometheus")
    decoders = [p for p in running if p.role == "decode"]
    if decoders:
        text = target.extra_logs.get(decoders[0].name) or pod_log(kube, decoders[0], since_seconds=window)
        measured = log_throughput(text)
        if measured is not None:
            return measured, "decoder log"
        tried.append("no 'Retrieved N out of M required tokens' line in the decoder log")
    return None, "; ".join(tried) or "no decode pod to read"
