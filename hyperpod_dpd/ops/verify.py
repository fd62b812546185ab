"""``hpdpd verify``: the KV-fabric gate of one endpoint, from the live cluster, its logs and its metrics.

Checks (stable names): ``iec``, ``pods:prefill``, ``pods:decode``, ``autoscaling:prefill`` and ``autoscaling:decode``
(a role with a Prometheus trigger), ``metrics-scope`` (with ``--prometheus``: the endpoint's series come from one
cluster, :mod:`hyperpod_dpd.ops.verify_scope`), ``same-az``, ``separate-nodes``, ``efa:prefill``, ``efa:decode``,
``transfer-backend``, ``kv-throughput``, ``kv-retrieve``; with the probe also ``probe:provider:prefill``,
``probe:provider:decode``, ``probe:bandwidth`` (hyperpod_dpd.ops.probe). The rows are built by
:mod:`hyperpod_dpd.ops.verify_checks` and :mod:`hyperpod_dpd.ops.verify_autoscaling`.

Where the numbers come from (docs/cli.md, "hpdpd verify"): the KV transfer is measured on the prefill side, where
LMCache's PD backend writes the KV into the decoder's buffer with a NIXL WRITE inside its store (prefill logs'
``Stored ... put_time``, else Prometheus' ``lmcache:time_to_store``); vLLM's NIXL histograms only for an endpoint
whose workers really use vLLM's ``NixlConnector``. The decoder's ``Retrieved ... cost`` (a local copy from its PD
buffer) is reported as the decoder KV load time, never as fabric throughput; its hits and misses (``Retrieved 0 out of
N``) make the ``kv-retrieve`` row: KV that crossed the fabric but was recomputed on the decoder is no working path.

A worker whose log cannot be read (gone since it was listed: 404; a container not started: 400) gives its rows a WARN
naming the API server's answer; a denied or timed-out read stops the command (exit 2), as every other read does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.ops.checks import Check
from hyperpod_dpd.ops.efa_devices import DraInventory, claimed_efa, dra_inventory, uses_claims
from hyperpod_dpd.ops.fabric import (
    NIXL_CONNECTOR,
    command_line,
    kv_bytes_per_token_per_rank,
    kv_connector,
    per_rank_line_rate_gbps,
    worker_container,
    worker_efa,
    worker_env,
)
from hyperpod_dpd.ops.kube import Kube, KubeError, get_iec, parse_iec
from hyperpod_dpd.ops.kv_logs import (
    DecoderLoad,
    backends,
    decoder_load,
    lmcache_configs,
    missing_plugins,
    nixl_provider,
    no_gpu_direct,
    retrieve_counts,
    store_totals,
)
from hyperpod_dpd.ops.metrics import Prometheus, Throughput, nixl_connector_throughput, prefill_store_throughput
from hyperpod_dpd.ops.pod_api import HEAD_LOG_BYTES, read_log, worker_documents
from hyperpod_dpd.ops.probe import ProbeOptions, run_probe
from hyperpod_dpd.ops.probe_report import ProbeReport
from hyperpod_dpd.ops.verify_autoscaling import expected_pods, trigger_checks
from hyperpod_dpd.ops.verify_checks import (
    PD_ROLES,
    BackendEvidence,
    backend_check,
    efa_check,
    iec_check,
    iec_missing_check,
    node_check,
    pods_check,
    retrieve_check,
    throughput_check,
    zone_check,
)
from hyperpod_dpd.ops.verify_scope import scope_check
from hyperpod_dpd.ops.workloads import Node, Pod, nodes, parse_pod, warning_events

WINDOW_TAIL_LINES = 20000  # the newest lines of each pod's window (a prefiller logs one store line per rank and request)


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    endpoint: str
    namespace: str
    iec: str
    window_seconds: int
    checks: tuple[Check, ...]
    throughput: Throughput | None = None
    rank_line_rate_gbps: float | None = None
    connector: str | None = None
    decoder_kv_load: DecoderLoad | None = None
    probe: ProbeReport | None = None

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        measured = None
        if self.throughput is not None:
            t = self.throughput
            measured = {"gbps": round(t.gbps, 3), "bytes": t.bytes, "seconds": round(t.seconds, 6), "per": "rank",
                        "source": t.source, "lower_bound": t.lower_bound, "estimate": t.estimate,
                        "line_rate_fraction": round(t.gbps / self.rank_line_rate_gbps, 4)
                        if self.rank_line_rate_gbps else None}
        return {"endpoint": self.endpoint, "namespace": self.namespace, "iec": self.iec, "ok": self.ok,
                "window_seconds": self.window_seconds, "connector": self.connector,
                "rank_line_rate_gbps": self.rank_line_rate_gbps, "throughput": measured,
                "decoder_kv_load": self.decoder_kv_load.to_json() if self.decoder_kv_load else None,
                "probe": self.probe.to_json() if self.probe else None,
                "checks": [c.to_json() for c in self.checks]}


@dataclass(frozen=True, kw_only=True)
class Target:
    """What verify needs of an endpoint (an ``EndpointConfig``), which IEC generation to look at, and how."""

    endpoint: Any
    iec: str
    window_seconds: int = 300
    prometheus: Prometheus | None = None
    probe: ProbeOptions | None = None  # None: no probe (no exec, no probe pods)
    sleep: Callable[[float], None] = time.sleep  # the probe's polls (rollout promote's keeps its lease)


def verify_endpoint(kube: Kube, target: Target) -> VerifyReport:
    """Read the cluster (and metrics) and evaluate every check; KubeError / MetricsError propagate."""
    e, iec = target.endpoint, target.iec
    try:
        state = parse_iec(get_iec(kube, name=iec, namespace=e.namespace))
    except KubeError as exc:
        if not exc.not_found:
            raise
        # the API server's own NotFound, of the IEC or of its CRD: nothing to verify, and that is a failure
        return VerifyReport(endpoint=e.name, namespace=e.namespace, iec=iec, window_seconds=target.window_seconds,
                            checks=(iec_missing_check(iec, e.namespace, exc.reason),))
    rows: list[Check] = [iec_check(iec, state)]
    documents = worker_documents(kube, namespace=e.namespace, iec=iec)
    pods = [parse_pod(d) for d in documents]
    cluster = nodes(kube)
    events = warning_events(kube, namespace=e.namespace, names={p.name for p in pods}) if pods else []
    for role in DPD_ROLES:  # an autoscaled role is held to its min_replicas: KEDA may have scaled it down to that
        rows.append(pods_check(role, [p for p in pods if p.role == role], expected_pods(e, role), events))
    rows += trigger_checks(e, target.prometheus)  # autoscaling:<role>: does the trigger query find a series
    if target.prometheus is not None:  # metrics-scope: do the endpoint's series come from this cluster alone
        rows.append(scope_check(e, target.prometheus))
    running_docs = [d for d, p in zip(documents, pods, strict=True) if p.running]
    running = [parse_pod(d) for d in running_docs]
    rows += [zone_check(running, cluster), node_check(running)]
    rows += _efa_rows(kube, e, running_docs, running, cluster)
    probe = run_probe(kube, e, iec=iec, options=target.probe, sleep=target.sleep) if target.probe is not None else None
    evidence = [_evidence(kube, d, p, probe) for d, p in zip(running_docs, running, strict=True)]
    rows.append(backend_check(evidence))
    connector = kv_connector(running_docs) if running_docs else None
    rate = per_rank_line_rate_gbps(e.instance)
    prefill = _window_logs(kube, target, running, "prefill")
    measured, sources = _transfer(target, running_docs, prefill, connector, rate)
    floor = getattr(e, "kv_transfer", None)
    floor_gbps = float(getattr(floor, "min_gbps", 1.0))
    from_log = measured is not None and sources == "prefill log"
    rows.append(throughput_check(measured, floor_gbps=floor_gbps,
                                 warn_fraction=getattr(floor, "warn_line_rate_fraction", 0.1), rank_line_rate=rate,
                                 window_seconds=target.window_seconds, sources=sources,
                                 unproven=_unproven([v for v in evidence if v.role == "prefill"]) if from_log
                                 else None))
    decode = _window_logs(kube, target, running, "decode")
    readable = [text for text, _ in decode if text is not None]
    stored = store_totals(text for text, _ in prefill if text is not None)
    rows.append(retrieve_check(retrieve_counts("\n".join(readable)) if readable else None,
                               stored_lines=stored.lines if stored else 0, window_seconds=target.window_seconds))
    if probe is not None:
        rows += probe.checks(floor_gbps=floor_gbps)
    load = decoder_load("\n".join(readable)) if readable else None
    return VerifyReport(endpoint=e.name, namespace=e.namespace, iec=iec, window_seconds=target.window_seconds,
                        checks=tuple(rows), throughput=measured, rank_line_rate_gbps=rate, connector=connector,
                        decoder_kv_load=load, probe=probe)


def _unproven(prefill: Sequence[BackendEvidence]) -> str | None:
    """Why the prefill pods' store lines cannot be taken for KV writes to the decoder, or None: each prefill pod's
    LMCache configuration must name its PD backend as the sender (else a store is LMCache's local offload)."""
    for pod in prefill:
        if not any(c.enable_pd and c.pd_role == PD_ROLES["prefill"] for c in pod.lmcache):
            return (f"{pod.pod}: no LMCache configuration line with enable_pd True and pd_role sender in its log "
                    "(its start-up lines may be gone from a long-running pod), so its store lines may be local "
                    "offloads rather than writes to the decoder")
    return None


def _efa_rows(kube: Kube, endpoint: Any, documents: Sequence[Mapping[str, Any]], running: Sequence[Pod],
              cluster: Mapping[str, Node]) -> list[Check]:
    """The efa rows; the EFA DRA driver's ResourceSlices and claims are read only where the extended resource is 0.

    Devices count only where the vLLM container holds them: the device plugin and DRA give a device to the container
    that requests (or claims) it, not to the pod (a sidecar's EFA request mounts nothing into the server)."""
    dra: DraInventory = DraInventory()
    held: dict[str, int] = {}
    problem = ""
    plugin_less = any(getattr(cluster.get(p.node or ""), "allocatable_efa", 0) <= 0 for p in running)
    if plugin_less or any(uses_claims(d) for d in documents):
        try:
            dra = dra_inventory(kube)
            held = claimed_efa(kube, namespace=endpoint.namespace, pods=documents, inventory=dra)
        except KubeError as exc:
            if not exc.not_found and exc.cause != "access_denied":
                raise
            # 404: the API server serves no resource.k8s.io/v1 (before Kubernetes 1.34), so there is no DRA driver;
            # 403: the DRA objects may not be read, so devices they would hold are unknown (the row says so)
            problem = "" if exc.not_found else exc.reason
    claims = frozenset(str((d.get("metadata") or {}).get("name", "")) for d in documents if uses_claims(d))
    servers = [replace(p, efa=worker_efa(d)) for d, p in zip(documents, running, strict=True)]
    return [efa_check(role, [p for p in servers if p.role == role], cluster, endpoint.instance.efa_interfaces,
                      dra=dra, dra_held=held, claims=claims, dra_error=problem) for role in DPD_ROLES]


def _head(kube: Kube, document: Mapping[str, Any], pod: Pod) -> tuple[str, str]:
    """The start of the worker's log (its start-up lines), or why it could not be read."""
    try:
        return read_log(kube, namespace=pod.namespace, name=pod.name, container=worker_container(document).get("name"),
                        limit_bytes=HEAD_LOG_BYTES), ""
    except KubeError as exc:
        if _unreadable(exc):
            return "", exc.reason
        raise


def _unreadable(exc: KubeError) -> bool:
    """One pod's log the API server will not give (the pod gone since it was listed, a container not started: 400);
    denied, timed-out and malformed answers stop the command instead."""
    return exc.not_found or exc.cause == "error"


def _evidence(kube: Kube, document: Mapping[str, Any], pod: Pod, probe: ProbeReport | None) -> BackendEvidence:
    """Start-up lines of the worker's log (its head: they are long gone from its tail) and what the probe read."""
    head, problem = _head(kube, document, pod)
    inside = probe.worker(pod.name) if probe else None
    return BackendEvidence(pod=pod.name, role=pod.role, declared_env=dict(worker_env(document)),
                           log_backends=frozenset(backends(head)), log_provider=nixl_provider(head),
                           effective_env=inside.effective_env if inside else None,
                           fi_info=inside.fi_info if inside else None, lmcache=tuple(lmcache_configs(head)),
                           missing_plugins=frozenset(missing_plugins(head)), no_gpu_direct=no_gpu_direct(head),
                           log_error=problem)


def _window_logs(kube: Kube, target: Target, pods: Sequence[Pod], role: str) -> list[tuple[str | None, str]]:
    """(text, "") of each ``role`` pod's window, or (None, why) for a log that could not be read."""
    found: list[tuple[str | None, str]] = []
    for p in pods:
        if p.role != role:
            continue
        try:
            found.append((read_log(kube, namespace=p.namespace, name=p.name, container=_vllm_container(p),
                                   since_seconds=target.window_seconds, tail_lines=WINDOW_TAIL_LINES), ""))
        except KubeError as exc:
            if not _unreadable(exc):
                raise
            found.append((None, f"{p.name}: {exc.reason}"))
    return found


def _vllm_container(pod: Pod) -> str | None:
    return next((c for c in pod.containers if c.startswith(("prefill-", "decode-"))),
                pod.containers[0] if pod.containers else None)


def _transfer(target: Target, documents: Sequence[Mapping[str, Any]], prefill: Sequence[tuple[str | None, str]],
              connector: str | None, rate: float | None) -> tuple[Throughput | None, str]:
    """The prefill side's KV write per rank: the NIXL connector's histograms for vLLM's NixlConnector; for LMCache
    (or an unknown connector) the prefill pods' store lines, else their LMCache store series."""
    e, window, prometheus = target.endpoint, target.window_seconds, target.prometheus
    tried = [f"connector {connector or 'unknown (no --kv-transfer-config in the workers)'}"]
    if connector == NIXL_CONNECTOR:
        if prometheus is not None:
            found = nixl_connector_throughput(prometheus, namespace=e.namespace, iec=target.iec, seconds=window)
            if found is not None:
                return found, "prometheus"
            tried.append("no vLLM NixlConnector transfer series in Prometheus")
        else:
            tried.append("vLLM's NixlConnector is measured from Prometheus only: pass --prometheus")
        return None, "; ".join(tried)
    if connector is None:
        tried.append("vLLM NixlConnector series not read (the connector is not known)")
    tried += [f"log not read: {why}" for text, why in prefill if text is None]
    # a rank cannot write faster than its GPU's share of the instance's EFA: a line above it counts unsent chunks
    totals = store_totals((text for text, _ in prefill if text is not None), ceiling_gbps=rate)
    if totals is not None:
        source = ("prefill log: LMCache store " + ("put_time (the NIXL write and the remote allocation)"
                                                   if not totals.lower_bound else "cost (some lines lack put_time: "
                                                   "it includes the GPU-side copy)"))
        return Throughput(bytes=totals.bytes, seconds=totals.seconds, source=source, transfers=totals.lines,
                          lower_bound=totals.lower_bound, overstated_lines=totals.overstated_lines), "prefill log"
    tried.append("no LMCache 'Stored N out of total M tokens' line in the prefill logs")
    if prometheus is not None:
        prefill_doc = next((d for d in documents if parse_pod(d).role == "prefill"), None)
        per_token = kv_bytes_per_token_per_rank(e, command_line(prefill_doc) if prefill_doc else [])
        if per_token is None:
            tried.append("LMCache's store series carry no bytes, and the model or KV dtype is not in the catalogue")
        else:
            found = prefill_store_throughput(prometheus, namespace=e.namespace, iec=target.iec, seconds=window,
                                             bytes_per_token_per_rank=per_token)
            if found is not None:
                return found, "prometheus"
            tried.append("no LMCache store series of the prefill pods in Prometheus")
    return None, "; ".join(tried)
