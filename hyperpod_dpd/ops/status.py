"""``hpdpd status``: the HyperPod and EKS clusters, groups and nodes, the add-ons, and each endpoint's state.

Each part is read on its own, and each read has three answers (:mod:`hyperpod_dpd.ops.lookup`): found with its state,
``NotFound`` only when the service says the resource does not exist, and ``Unknown`` with the reason when it could not
be read (access denied, throttled after retries, unreachable, timed out, an API the endpoint lacks). An unknown part
is also a warning, and the rest is still reported. ``healthy`` is true only when everything was read, the HyperPod
cluster is InService with full groups, the EKS cluster is ACTIVE, every expected add-on is ACTIVE at or above its
minimum, and every endpoint is ready (its IEC ``DeploymentComplete``, its SageMaker endpoint ``InService``; none failed
or missing: its IEC, the IEC's CRD or its SageMaker endpoint ``NotFound``).
Rejected credentials (AWS's or the API server's 401), an answer that is not the service's and the command's deadline
end the command with one line instead (exit 2): after them no part can be read. With a kubeconfig, each endpoint's
NetworkPolicies are checked against its live router and worker pods
(:func:`hyperpod_dpd.ops.netpol.endpoint_policy_warnings`): a pod a policy does not select, or a container port it
does not admit, is a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import ClientSource
from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.addons import ACTIVE, ADDON_PERMISSIONS, below_minimum, expected_addons, installed_addons
from hyperpod_dpd.ops.clusters import (
    EKS_ACTIVE,
    IN_SERVICE,
    EksState,
    HyperPodState,
    NodeState,
    read_eks,
    read_hyperpod,
    read_nodes,
)
from hyperpod_dpd.ops.endpoints import (
    SAGEMAKER_FAILED,
    SAGEMAKER_IN_SERVICE,
    EndpointLike,
    configured_endpoints,
    iec_name,
    read_sagemaker_endpoint,
)
from hyperpod_dpd.ops.kube import FAILED_STATES, FATAL_CAUSES, READY_STATE, IecStatus, Kube, KubeError
from hyperpod_dpd.ops.lookup import NOT_FOUND, UNKNOWN, Lookup, look_up, not_found, unknown
from hyperpod_dpd.ops.netpol import endpoint_policy_warnings

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

NODE_HEALTHY = "Running"
NOT_INSTALLED = "NOT_INSTALLED"


@dataclass(frozen=True, kw_only=True)
class AddonStatus:
    name: str
    version: str | None
    status: str
    configured: str | None
    minimum: str | None
    ok: bool
    issues: tuple[str, ...] = ()
    reason: str | None = None  # why the status is Unknown


@dataclass(frozen=True, kw_only=True)
class EndpointStatus:
    name: str
    namespace: str
    resource_name: str
    sagemaker_endpoint: str | None
    sagemaker_status: str | None
    sagemaker_failure: str | None
    iec_state: str
    iec_message: str
    sagemaker_reason: str | None = None  # why sagemaker_status is Unknown
    iec_reason: str | None = None  # why iec_state is Unknown

    @property
    def failed(self) -> bool:
        return self.sagemaker_status in SAGEMAKER_FAILED or self.iec_state in FAILED_STATES

    @property
    def missing(self) -> bool:
        """A declared endpoint whose IEC (or its CRD) or SageMaker endpoint the service says does not exist."""
        return NOT_FOUND in (self.iec_state, self.sagemaker_status)

    @property
    def ready(self) -> bool:
        """The IEC is ``DeploymentComplete`` and the SageMaker endpoint (when named) ``InService``; a part that was
        not read is ``Unknown``, which is a warning (unhealthy) when the read was attempted."""
        return (self.iec_state in (READY_STATE, UNKNOWN)
                and self.sagemaker_status in (None, SAGEMAKER_IN_SERVICE, UNKNOWN))


def _status(lookup: Lookup[Any], status: str) -> str:
    """The status column of a read: the resource's own status when found, else ``NotFound`` or ``Unknown``."""
    return status if lookup.found else (NOT_FOUND if lookup.absent else UNKNOWN)


def _reason(lookup: Lookup[Any]) -> str | None:
    return lookup.reason if lookup.unknown else None


@dataclass(frozen=True, kw_only=True)
class StatusReport:
    environment: str
    region: str
    cluster_name: str
    hyperpod: Lookup[HyperPodState]
    nodes: Lookup[tuple[NodeState, ...]]
    eks_cluster_name: str
    eks: Lookup[EksState]
    addons: tuple[AddonStatus, ...]
    endpoints: tuple[EndpointStatus, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cluster(self) -> HyperPodState | None:
        """The HyperPod cluster when it was read and exists (None when absent *or* unknown: see ``hyperpod``)."""
        return self.hyperpod.value

    @property
    def cluster_status(self) -> str:
        return _status(self.hyperpod, self.hyperpod.value.status if self.hyperpod.value else "")

    @property
    def eks_status(self) -> str:
        return _status(self.eks, self.eks.value.status if self.eks.value else "")

    @property
    def node_states(self) -> tuple[NodeState, ...]:
        return self.nodes.value or ()

    @property
    def healthy(self) -> bool:
        cluster = self.cluster
        cluster_ok = cluster is not None and cluster.status == IN_SERVICE and cluster.complete
        return (cluster_ok and self.eks_status == EKS_ACTIVE and not self.warnings and all(a.ok for a in self.addons)
                and all(e.ready and not (e.failed or e.missing) for e in self.endpoints))

    def to_json(self) -> dict[str, Any]:
        cluster, eks = self.cluster, self.eks.value
        return {
            "healthy": self.healthy,
            "environment": self.environment,
            "region": self.region,
            "cluster": {
                "name": self.cluster_name,
                "status": self.cluster_status,
                "failure_message": (cluster.failure_message or None) if cluster else None,
                "instance_groups": [{"name": g.name, "instance_type": g.instance_type, "current": g.current,
                                     "target": g.target} for g in (cluster.groups if cluster else ())],
                "nodes": [asdict(n) for n in self.node_states],
                "reason": _reason(self.hyperpod),
                "nodes_reason": _reason(self.nodes),
            },
            "eks_cluster": {"name": self.eks_cluster_name, "status": self.eks_status,
                            "version": eks.version if eks else None, "reason": _reason(self.eks)},
            "addons": [{**asdict(a), "issues": list(a.issues)} for a in self.addons],
            "endpoints": [asdict(e) for e in self.endpoints],
            "warnings": list(self.warnings),
        }


def _unreadable(what: str, lookup: Lookup[Any]) -> str:
    return f"{what}: could not read ({lookup.reason})"


def _addon_rows(env: EnvironmentConfig, clients: ClientSource, eks: Lookup[EksState],
                warnings: list[str]) -> tuple[AddonStatus, ...]:
    """One row per expected add-on (and any other installed one); Unknown rows when the list could not be read."""
    cluster = env.eks.cluster_name
    found: Lookup[dict[str, Any]] = not_found() if eks.absent else look_up(
        lambda: installed_addons(clients.client("eks"), cluster), permission=ADDON_PERMISSIONS)
    expected = {a.name: a for a in expected_addons(env)}
    if found.absent:
        warnings.append(f"add-ons: EKS cluster {cluster} not found")
    elif found.unknown:
        warnings.append(_unreadable("add-ons", found))
    installed = found.value or {}
    rows = []
    for name in [*expected, *sorted(set(installed) - set(expected))]:
        have, wanted = installed.get(name), expected.get(name)
        configured = wanted.configured if wanted else None
        minimum = str(wanted.minimum) if wanted and wanted.minimum else None
        if have is None:
            rows.append(AddonStatus(name=name, version=None, status=UNKNOWN if found.unknown else NOT_INSTALLED,
                                    configured=configured, minimum=minimum, ok=False, reason=_reason(found)))
            continue
        too_old = bool(wanted and below_minimum(have, wanted))
        rows.append(AddonStatus(name=name, version=have.version, status=have.status, configured=configured,
                                minimum=minimum, ok=have.status == ACTIVE and not too_old, issues=have.issues))
    return tuple(rows)


def _endpoint_row(endpoint: EndpointLike, clients: ClientSource, kubectl: Kube,
                  warnings: list[str]) -> EndpointStatus:
    sm_status = sm_failure = sm_reason = None
    sagemaker_name = endpoint.rendered_sagemaker_endpoint_name  # the configured generation's own endpoint
    if sagemaker_name:
        read = read_sagemaker_endpoint(clients.client("sagemaker"), sagemaker_name)
        sm_status = _status(read, read.value.status if read.value else "")
        sm_failure = read.value.failure_reason if read.value else None
        sm_reason = _reason(read)
        if read.unknown:
            warnings.append(_unreadable(f"endpoint {endpoint.name}", read))
    iec: IecStatus = kubectl.iec_status(name=iec_name(endpoint), namespace=endpoint.namespace)
    if not iec.known and iec.cause in FATAL_CAUSES:  # rejected credentials, an answer not the API server's
        raise HpdpdError(f"endpoint {endpoint.name}: cannot read the InferenceEndpointConfig: {iec.reason}")
    if not iec.known and iec.attempted:
        warnings.append(f"endpoint {endpoint.name}: could not read the InferenceEndpointConfig ({iec.reason})")
    elif iec.known:
        warnings.extend(_policy_warnings(endpoint, kubectl))
    return EndpointStatus(name=endpoint.name, namespace=endpoint.namespace, resource_name=iec_name(endpoint),
                          sagemaker_endpoint=sagemaker_name, sagemaker_status=sm_status,
                          sagemaker_failure=sm_failure, sagemaker_reason=sm_reason,
                          iec_state=iec.state if iec.known else UNKNOWN, iec_message=iec.message,
                          iec_reason=None if iec.known else iec.reason)


def _policy_warnings(endpoint: EndpointLike, kubectl: Kube) -> list[str]:
    """The endpoint's NetworkPolicies against its live pods, both read from its namespace and the operator's."""
    router = getattr(endpoint, "router", None)
    if router is None or not router.network_policy:
        return []
    from kubernetes import client

    def lister(what: str, namespace: str) -> Callable[[Any], Any]:
        def request(api: Any) -> Any:
            if what == "pods":
                return client.CoreV1Api(api).list_namespaced_pod(
                    namespace, _preload_content=False, _request_timeout=kubectl.timeout)
            return client.NetworkingV1Api(api).list_namespaced_network_policy(
                namespace, _preload_content=False, _request_timeout=kubectl.timeout)
        return request

    found: dict[str, list[Any]] = {"pods": [], "networkpolicies": []}
    try:
        for namespace in dict.fromkeys((endpoint.namespace, INFERENCE_NAMESPACE)):
            for what in found:
                document = kubectl.call(f"list {what} in namespace {namespace}", lister(what, namespace),
                                        permission=f"list on {what} in namespace {namespace}", expect="list")
                found[what] += document.get("items") or [] if isinstance(document, dict) else []
    except KubeError as exc:
        if exc.fatal:
            raise HpdpdError(f"endpoint {endpoint.name}: cannot check its NetworkPolicies: {exc.reason}") from None
        if exc.not_found:  # a namespace or an API group the server does not have: nothing to check
            return []
        return [f"endpoint {endpoint.name}: could not check its NetworkPolicies ({exc.reason})"]
    return [f"endpoint {endpoint.name}: {w}" for w in endpoint_policy_warnings(
        endpoint=endpoint.name, namespace=endpoint.namespace, iec=iec_name(endpoint), pods=found["pods"],
        policies=found["networkpolicies"])]


def endpoint_rows(clients: ClientSource, endpoints: tuple[EndpointLike, ...], kubectl: Kube,
                  warnings: list[str]) -> tuple[EndpointStatus, ...]:
    return tuple(_endpoint_row(endpoint, clients, kubectl, warnings) for endpoint in endpoints)


def collect_status(env: EnvironmentConfig, clients: ClientSource, *, kubectl: Kube,
                   endpoints: tuple[EndpointLike, ...] | None = None) -> StatusReport:
    warnings: list[str] = []
    sagemaker = clients.client("sagemaker")
    name = env.hyperpod.cluster_name
    hyperpod = read_hyperpod(sagemaker, name)
    nodes: Lookup[tuple[NodeState, ...]] = not_found()
    if hyperpod.unknown and hyperpod.cause:
        warnings.append(_unreadable(f"HyperPod cluster {name}", hyperpod))
        nodes = unknown(hyperpod.reason, hyperpod.cause)  # not listed: the cluster itself could not be read
    elif hyperpod.found:
        nodes = read_nodes(sagemaker, name)
        if nodes.unknown:
            warnings.append(_unreadable("nodes", nodes))
    eks = read_eks(clients.client("eks"), env.eks.cluster_name)
    if eks.unknown:
        warnings.append(_unreadable(f"EKS cluster {env.eks.cluster_name}", eks))
    addons = _addon_rows(env, clients, eks, warnings)
    chosen = configured_endpoints(env) if endpoints is None else endpoints
    rows = endpoint_rows(clients, chosen, kubectl, warnings)
    return StatusReport(environment=env.name, region=env.region, cluster_name=name, hyperpod=hyperpod, nodes=nodes,
                        eks_cluster_name=env.eks.cluster_name, eks=eks, addons=addons, endpoints=rows,
                        warnings=tuple(warnings))
