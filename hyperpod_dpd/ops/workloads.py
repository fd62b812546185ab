"""What the operator runs for an endpoint, read from the Kubernetes API: pods, nodes, logs, Services and IECs, and
the writes of ``hpdpd rollout`` (IECs, the client Service, the endpoint's Ingress and router NetworkPolicy; a write
that carries ``metadata.resourceVersion`` raises :class:`Conflict` when the object changed since it was read).

Names and labels (SageMaker HyperPod DPD documentation; ``docs/endpoints.md``): prefill and decode pods are
``prefill-<iec>-…`` / ``decode-<iec>-…`` with the label ``inference.sagemaker.aws.amazon.com/dpd-role`` and the vLLM
container ``prefill-<iec>`` / ``decode-<iec>``; the router pods are ``<iec>-<namespace>-router-…`` in
``hyperpod-inference-system`` with the container ``router-container``. Nodes carry ``topology.kubernetes.io/zone``
(well-known label) and advertise EFA devices as the extended resource ``vpc.amazonaws.com/efa`` (EFA device plugin)
and GPUs as ``nvidia.com/gpu``. Every call raises :class:`~hyperpod_dpd.ops.kube.KubeError` when it fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.catalogue.operator import (
    DPD_ROLE_LABEL,
    EFA_RESOURCE,
    ENDPOINT_LABEL,
    GENERATION_LABEL,  # noqa: F401 - one set of names with the charts (tests/hyperpod_dpd/ops/test_kube.py)
    GPU_RESOURCE,
    INFERENCE_NAMESPACE,
)
from hyperpod_dpd.catalogue.operator_api import IEC_GROUP, IEC_PLURAL, IEC_VERSION
from hyperpod_dpd.ops.kube import Kube, KubeError, iec_path
from hyperpod_dpd.ops.kube_answers import api_status

ZONE_LABEL = "topology.kubernetes.io/zone"
ROUTER_CONTAINER = "router-container"
DONE_PHASES = frozenset({"Succeeded", "Failed"})


def _quantity(value: Any) -> int:
    """A whole-number extended resource quantity (``"8"``); 0 when absent or not a plain count."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True, kw_only=True)
class Pod:
    name: str
    namespace: str
    role: str | None
    phase: str
    ready: bool
    node: str | None
    efa: int  # vpc.amazonaws.com/efa requested (or limited) by the pod's containers
    gpus: int
    env: Mapping[str, str] = field(default_factory=dict)  # literal env values of every container
    containers: tuple[str, ...] = ()
    waiting: str = ""  # the first container's waiting reason (ImagePullBackOff, ...)
    node_selector: Mapping[str, str] = field(default_factory=dict)  # spec.nodeSelector

    @property
    def running(self) -> bool:
        return self.phase == "Running"


@dataclass(frozen=True, kw_only=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable_gpus: int
    allocatable_efa: int

    @property
    def zone(self) -> str | None:
        return self.labels.get(ZONE_LABEL)

    def matches(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())


def parse_pod(item: Mapping[str, Any]) -> Pod:
    meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    containers = spec.get("containers") or []
    efa = gpus = 0
    env: dict[str, str] = {}
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        efa += max(_quantity(requests.get(EFA_RESOURCE)), _quantity(limits.get(EFA_RESOURCE)))
        gpus += max(_quantity(requests.get(GPU_RESOURCE)), _quantity(limits.get(GPU_RESOURCE)))
        for variable in container.get("env") or []:
            if isinstance(variable, dict) and "value" in variable:
                env.setdefault(str(variable.get("name")), str(variable.get("value")))
    statuses = status.get("containerStatuses") or []
    waiting = next((str((s.get("state") or {}).get("waiting", {}).get("reason", "")) for s in statuses
                    if (s.get("state") or {}).get("waiting")), "")
    return Pod(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
               role=(meta.get("labels") or {}).get(DPD_ROLE_LABEL), phase=str(status.get("phase") or "Unknown"),
               ready=bool(statuses) and all(bool(s.get("ready")) for s in statuses), node=spec.get("nodeName"),
               efa=efa, gpus=gpus, env=env, containers=tuple(str(c.get("name", "")) for c in containers),
               waiting=waiting, node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()})


def parse_node(item: Mapping[str, Any]) -> Node:
    meta, status = item.get("metadata") or {}, item.get("status") or {}
    allocatable = status.get("allocatable") or {}
    return Node(name=str(meta.get("name", "")), labels=dict(meta.get("labels") or {}),
                allocatable_gpus=_quantity(allocatable.get(GPU_RESOURCE)),
                allocatable_efa=_quantity(allocatable.get(EFA_RESOURCE)))


def _items(document: Any) -> list[dict[str, Any]]:
    return [i for i in (document.get("items") or []) if isinstance(i, dict)] if isinstance(document, dict) else []


def _core(api: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api)


def _custom(api: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api)


def dpd_pods(kube: Kube, *, namespace: str, iec: str) -> list[Pod]:
    """The prefill and decode pods of one IEC (several generations may share the namespace and the role label)."""
    selector = f"{DPD_ROLE_LABEL} in (prefill,decode)"
    document = kube.call(f"list pods in namespace {namespace}", lambda api: _core(api).list_namespaced_pod(
        namespace, label_selector=selector, _preload_content=False, _request_timeout=kube.timeout),
        permission=f"list on pods in namespace {namespace}", expect="list")
    pods = [parse_pod(item) for item in _items(document)]
    return [p for p in pods if p.name.startswith((f"prefill-{iec}-", f"decode-{iec}-"))]


def router_pods(kube: Kube, *, namespace: str, iec: str) -> list[Pod]:
    """The router pods of an IEC (``<iec>-<namespace>-router-…`` in the operator's namespace)."""
    document = kube.call(f"list pods in namespace {INFERENCE_NAMESPACE}", lambda api: _core(api).list_namespaced_pod(
        INFERENCE_NAMESPACE, _preload_content=False, _request_timeout=kube.timeout),
        permission=f"list on pods in namespace {INFERENCE_NAMESPACE}", expect="list")
    prefix = f"{iec}-{namespace}-router"
    return [p for p in (parse_pod(i) for i in _items(document)) if p.name.startswith(prefix)]


def nodes(kube: Kube) -> dict[str, Node]:
    document = kube.call("list nodes", lambda api: _core(api).list_node(
        _preload_content=False, _request_timeout=kube.timeout), permission="list on nodes (cluster scope)",
        expect="list")
    return {n.name: n for n in (parse_node(i) for i in _items(document))}


@dataclass(frozen=True, kw_only=True)
class GpuRequests:
    """``nvidia.com/gpu`` that unfinished pods (all namespaces) request: per node for scheduled pods, and the
    ``(nodeSelector, gpus)`` of pods not scheduled yet (they take capacity Karpenter is still to add)."""

    by_node: Mapping[str, int]
    unscheduled: tuple[tuple[Mapping[str, str], int], ...] = ()


def gpu_requests(kube: Kube) -> GpuRequests:
    document = kube.call("list pods in all namespaces", lambda api: _core(api).list_pod_for_all_namespaces(
        _preload_content=False, _request_timeout=kube.timeout), permission="list on pods (all namespaces)",
        expect="list")
    used: dict[str, int] = {}
    waiting: list[tuple[Mapping[str, str], int]] = []
    for pod in (parse_pod(i) for i in _items(document)):
        if pod.phase in DONE_PHASES or not pod.gpus:
            continue
        if pod.node:
            used[pod.node] = used.get(pod.node, 0) + pod.gpus
        else:
            waiting.append((pod.node_selector, pod.gpus))
    return GpuRequests(by_node=used, unscheduled=tuple(waiting))


def pod_log(kube: Kube, pod: Pod, *, container: str | None = None, since_seconds: int | None = None,
            tail_lines: int | None = 5000) -> str:
    """The recent log of a pod's container (the role's vLLM container by default)."""
    chosen = container or next((c for c in pod.containers if c.startswith(("prefill-", "decode-"))),
                               pod.containers[0] if pod.containers else None)
    options: dict[str, Any] = {"_preload_content": False, "_request_timeout": kube.timeout}
    if chosen:
        options["container"] = chosen
    if since_seconds:
        options["since_seconds"] = max(1, int(since_seconds))
    if tail_lines:
        options["tail_lines"] = tail_lines
    text = kube.call(f"read the log of pod {pod.namespace}/{pod.name}", lambda api: _core(api)
                     .read_namespaced_pod_log(pod.name, pod.namespace, **options),
                     permission=f"get on pods/log in namespace {pod.namespace}", expect="text")
    return text if isinstance(text, str) else ""


def warning_events(kube: Kube, *, namespace: str, names: set[str]) -> list[str]:
    """``Warning`` events of the given objects, newest last, as ``<object>: <reason>: <message>``."""
    document = kube.call(f"list events in namespace {namespace}", lambda api: _core(api).list_namespaced_event(
        namespace, field_selector="type=Warning", _preload_content=False, _request_timeout=kube.timeout),
        permission=f"list on events in namespace {namespace}", expect="list")
    out = []
    for event in _items(document):
        involved = (event.get("involvedObject") or {}).get("name", "")
        if involved in names:
            out.append(f"{involved}: {event.get('reason', '')}: {' '.join(str(event.get('message', '')).split())}")
    return out


# ---- the IECs of an endpoint and its client Service (rollout) ---------------------------------------------------------


def endpoint_iecs(kube: Kube, *, namespace: str, endpoint: str) -> list[dict[str, Any]]:
    """Every IEC generation of an endpoint (label ``hyperpod-dpd/endpoint``) in ``namespace``, oldest first.

    Listed across namespaces (a cluster-scoped read, granted by the operations ClusterRole): before an endpoint's
    first deploy its namespace, and so the RoleBinding there, do not exist yet, and the answer must be "no generation"
    rather than "forbidden".
    """
    document = kube.call(f"list {IEC_PLURAL}.{IEC_GROUP}", lambda api: _custom(api).list_cluster_custom_object(
        IEC_GROUP, IEC_VERSION, IEC_PLURAL, label_selector=f"{ENDPOINT_LABEL}={endpoint}",
        _preload_content=False, _request_timeout=kube.timeout),
        permission=f"list on {IEC_PLURAL}.{IEC_GROUP} (all namespaces)", expect="list")
    items = [i for i in _items(document) if (i.get("metadata") or {}).get("namespace", namespace) == namespace]
    return sorted(items, key=lambda i: str((i.get("metadata") or {}).get("creationTimestamp", "")))


def create_iec(kube: Kube, manifest: Mapping[str, Any]) -> None:
    meta = manifest.get("metadata") or {}
    namespace = str(meta.get("namespace", "default"))
    kube.call(f"create {iec_path(namespace, str(meta.get('name', '')))}", lambda api: _custom(api)
              .create_namespaced_custom_object(IEC_GROUP, IEC_VERSION, namespace, IEC_PLURAL, dict(manifest),
                                               _preload_content=False, _request_timeout=kube.timeout),
              permission=f"create on {IEC_PLURAL}.{IEC_GROUP} in namespace {namespace}")


def delete_iec(kube: Kube, *, namespace: str, name: str) -> None:
    kube.call(f"DELETE {iec_path(namespace, name)}", lambda api: _custom(api).delete_namespaced_custom_object(
        IEC_GROUP, IEC_VERSION, namespace, IEC_PLURAL, name, _preload_content=False, _request_timeout=kube.timeout),
        permission=f"delete on {IEC_PLURAL}.{IEC_GROUP} in namespace {namespace}")


def get_service(kube: Kube, *, namespace: str, name: str) -> dict[str, Any]:
    document = kube.call(f"GET service {namespace}/{name}", lambda api: _core(api).read_namespaced_service(
        name, namespace, _preload_content=False, _request_timeout=kube.timeout),
        permission=f"get on services in namespace {namespace}")
    return document if isinstance(document, dict) else {}


class Conflict(KubeError):
    """409 Conflict: the object changed since it was read (its ``resourceVersion`` no longer matches)."""


_CONFLICT = object()


def _conditional(request: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``request``, with the API server's 409 answered by a marker instead of an error.

    A write whose body carries ``metadata.resourceVersion`` is applied only to that version: "If the
    resourceVersion field doesn't match what's stored, the operation results in a conflict"
    (kubernetes-sigs/controller-runtime@23001f6 ``pkg/client/patch.go``, ``MergeFromOptions.OptimisticLock``;
    kubernetes/community@d9bfbf2 ``contributors/devel/sig-architecture/api-conventions.md``, "Concurrency Control
    and Consistency": "the update fails with a StatusConflict (HTTP status code 409)").
    """
    from kubernetes.client.exceptions import ApiException

    def call(api: Any) -> Any:
        try:
            return request(api)
        except ApiException as exc:
            if exc.status == 409 and api_status(exc.body) is not None:  # the API server's Conflict, not a proxy's 409
                return _CONFLICT
            raise

    return call


def _written(what: str, result: Any) -> dict[str, Any]:
    if result is _CONFLICT:
        raise Conflict(f"{what}: 409 Conflict: the object changed since it was read", "conflict")
    return result if isinstance(result, dict) else {}


def patch_service(kube: Kube, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Patch the client Service (a dict body: the client sends it as a strategic merge patch, which merges
    ``metadata.annotations`` and replaces ``spec.externalName``); with ``metadata.resourceVersion`` in ``body`` it
    applies only to that version (:class:`Conflict` otherwise). Returns the Service as written."""
    what = f"PATCH service {namespace}/{name}"
    return _written(what, kube.call(what, _conditional(lambda api: _core(api).patch_namespaced_service(
        name, namespace, dict(body), _preload_content=False, _request_timeout=kube.timeout)),
        permission=f"patch on services in namespace {namespace}"))


# ---- the Ingress and the router NetworkPolicy in the operator's namespace (rollout re-points them) -----------------


def _networking(api: Any) -> Any:
    from kubernetes import client

    return client.NetworkingV1Api(api)


def get_ingress(kube: Kube, *, name: str) -> dict[str, Any]:
    document = kube.call(f"GET ingress {INFERENCE_NAMESPACE}/{name}", lambda api: _networking(api)
                         .read_namespaced_ingress(name, INFERENCE_NAMESPACE, _preload_content=False,
                                                  _request_timeout=kube.timeout),
                         permission=f"get on ingresses.networking.k8s.io in namespace {INFERENCE_NAMESPACE}")
    return document if isinstance(document, dict) else {}


def patch_ingress(kube: Kube, *, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Patch the endpoint's Ingress (conditional on ``metadata.resourceVersion`` in ``body``, as above)."""
    what = f"PATCH ingress {INFERENCE_NAMESPACE}/{name}"
    return _written(what, kube.call(what, _conditional(lambda api: _networking(api).patch_namespaced_ingress(
        name, INFERENCE_NAMESPACE, dict(body), _preload_content=False, _request_timeout=kube.timeout)),
        permission=f"patch on ingresses.networking.k8s.io in namespace {INFERENCE_NAMESPACE}"))


def get_network_policy(kube: Kube, *, name: str) -> dict[str, Any]:
    document = kube.call(f"GET networkpolicy {INFERENCE_NAMESPACE}/{name}", lambda api: _networking(api)
                         .read_namespaced_network_policy(name, INFERENCE_NAMESPACE, _preload_content=False,
                                                         _request_timeout=kube.timeout),
                         permission=f"get on networkpolicies.networking.k8s.io in namespace {INFERENCE_NAMESPACE}")
    return document if isinstance(document, dict) else {}


def patch_network_policy(kube: Kube, *, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Patch the router NetworkPolicy (conditional on ``metadata.resourceVersion`` in ``body``, as above)."""
    what = f"PATCH networkpolicy {INFERENCE_NAMESPACE}/{name}"
    return _written(what, kube.call(what, _conditional(lambda api: _networking(api).patch_namespaced_network_policy(
        name, INFERENCE_NAMESPACE, dict(body), _preload_content=False, _request_timeout=kube.timeout)),
        permission=f"patch on networkpolicies.networking.k8s.io in namespace {INFERENCE_NAMESPACE}"))


# ---- an in-cluster Service, reached through the API server (rollout's checks from outside the cluster) ---------------


def service_proxy_sender(kube: Kube, *, service: str, port: int, path: str, scheme: str = "http",
                         timeout_seconds: float = 300.0) -> Callable[[bytes], Iterator[bytes]]:
    """A smoke sender that POSTs to ``service`` in the operator's namespace through the API server's service proxy
    (``/api/v1/namespaces/<ns>/services/<scheme>:<name>:<port>/proxy/<path>``), streaming the reply line by line.

    The router Service of a new IEC generation has only an in-cluster DNS name; the proxy reaches it from wherever
    the Kubernetes API does (a pipeline's CodeBuild, a laptop), with the caller's EKS identity.
    """
    resource = f"/api/v1/namespaces/{INFERENCE_NAMESPACE}/services/{scheme}:{service}:{port}/proxy/{path.lstrip('/')}"

    def send(body: bytes) -> Iterator[bytes]:
        response = kube.call(f"create {resource}", lambda api: api.call_api(
            resource, "POST", header_params={"Content-Type": "application/json", "Accept": "text/event-stream"},
            body=json.loads(body), auth_settings=["BearerToken"], _preload_content=False,
            _return_http_data_only=True, _request_timeout=kube.request_timeout(timeout_seconds)),
            permission=f"create on services/proxy in namespace {INFERENCE_NAMESPACE}", raw=True)
        try:
            yield from response
        finally:
            response.release_conn()

    return send
