"""``hpdpd status``: the HyperPod cluster, its groups and nodes, the add-ons, and each endpoint's state.

Each part is read on its own; a part that cannot be read (access denied, throttled after retries, an API the
endpoint lacks) becomes a warning and the rest is still reported. ``healthy`` is true only when everything was read
and the cluster is InService with full groups, every expected add-on is ACTIVE at or above its minimum, and no
endpoint has failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import ClientSource, describe_client_error, is_access_denied, is_not_found
from hyperpod_dpd.ops.addons import ACTIVE, ADDON_PERMISSIONS, below_minimum, expected_addons, installed_addons
from hyperpod_dpd.ops.checks import attempt
from hyperpod_dpd.ops.clusters import IN_SERVICE, NOT_FOUND, HyperPodState, NodeState, describe_hyperpod, list_nodes
from hyperpod_dpd.ops.endpoints import EndpointLike, configured_endpoints, iec_name
from hyperpod_dpd.ops.kube import FAILED_STATES, Kubectl

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

NODE_HEALTHY = "Running"
SAGEMAKER_FAILED = frozenset({"Failed", "UpdateRollbackFailed"})


@dataclass(frozen=True, kw_only=True)
class AddonStatus:
    name: str
    version: str | None
    status: str
    configured: str | None
    minimum: str | None
    ok: bool
    issues: tuple[str, ...] = ()


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

    @property
    def failed(self) -> bool:
        return self.sagemaker_status in SAGEMAKER_FAILED or self.iec_state in FAILED_STATES


@dataclass(frozen=True, kw_only=True)
class StatusReport:
    environment: str
    region: str
    cluster_name: str
    cluster: HyperPodState | None
    nodes: tuple[NodeState, ...]
    addons: tuple[AddonStatus, ...]
    endpoints: tuple[EndpointStatus, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def healthy(self) -> bool:
        cluster_ok = self.cluster is not None and self.cluster.status == IN_SERVICE and self.cluster.complete
        return (cluster_ok and not self.warnings and all(a.ok for a in self.addons)
                and not any(e.failed for e in self.endpoints))

    def to_json(self) -> dict[str, Any]:
        cluster = self.cluster
        return {
            "healthy": self.healthy,
            "environment": self.environment,
            "region": self.region,
            "cluster": {
                "name": self.cluster_name,
                "status": cluster.status if cluster else NOT_FOUND,
                "failure_message": (cluster.failure_message or None) if cluster else None,
                "instance_groups": [{"name": g.name, "instance_type": g.instance_type, "current": g.current,
                                     "target": g.target} for g in (cluster.groups if cluster else ())],
                "nodes": [asdict(n) for n in self.nodes],
            },
            "addons": [{**asdict(a), "issues": list(a.issues)} for a in self.addons],
            "endpoints": [asdict(e) for e in self.endpoints],
            "warnings": list(self.warnings),
        }


def _unreadable(what: str, exc: BaseException, permission: str) -> str:
    need = f"; needs {permission}" if is_access_denied(exc) else ""
    text = describe_client_error(exc) if hasattr(exc, "response") else " ".join(str(exc).split())
    return f"{what}: could not read ({text}{need})"


def _addon_rows(env: EnvironmentConfig, clients: ClientSource, warnings: list[str]) -> tuple[AddonStatus, ...]:
    found = attempt(lambda: installed_addons(clients.client("eks"), env.eks.cluster_name))
    if isinstance(found, BaseException):
        if is_not_found(found):
            warnings.append(f"add-ons: EKS cluster {env.eks.cluster_name} not found")
        else:
            warnings.append(_unreadable("add-ons", found, ADDON_PERMISSIONS))
        return ()
    expected = {a.name: a for a in expected_addons(env)}
    rows = []
    for name in [*expected, *sorted(set(found) - set(expected))]:
        installed, wanted = found.get(name), expected.get(name)
        if installed is None:
            rows.append(AddonStatus(name=name, version=None, status="NOT_INSTALLED", ok=False,
                                    configured=wanted.configured if wanted else None,
                                    minimum=str(wanted.minimum) if wanted and wanted.minimum else None))
            continue
        too_old = bool(wanted and below_minimum(installed, wanted))
        rows.append(AddonStatus(name=name, version=installed.version, status=installed.status,
                                configured=wanted.configured if wanted else None,
                                minimum=str(wanted.minimum) if wanted and wanted.minimum else None,
                                ok=installed.status == ACTIVE and not too_old, issues=installed.issues))
    return tuple(rows)


def sagemaker_endpoint_status(sagemaker: Any, name: str) -> tuple[str, str | None]:
    """(``EndpointStatus``, ``FailureReason``) of a SageMaker endpoint; ``NotFound`` when it does not exist."""
    try:
        data = sagemaker.describe_endpoint(EndpointName=name)
    except Exception as exc:
        if is_not_found(exc):
            return NOT_FOUND, None
        raise
    reason = " ".join(str(data.get("FailureReason") or "").split()) or None
    return str(data.get("EndpointStatus", "")), reason


def endpoint_rows(clients: ClientSource, endpoints: tuple[EndpointLike, ...], kubectl: Kubectl,
                  warnings: list[str]) -> tuple[EndpointStatus, ...]:
    rows = []
    for endpoint in endpoints:
        sm_status = sm_failure = None
        if endpoint.sagemaker_endpoint_name:
            result = attempt(lambda e=endpoint: sagemaker_endpoint_status(clients.client("sagemaker"),
                                                                          e.sagemaker_endpoint_name))
            if isinstance(result, BaseException):
                warnings.append(_unreadable(f"endpoint {endpoint.name}", result, "sagemaker:DescribeEndpoint"))
                sm_status = "unknown"
            else:
                sm_status, sm_failure = result
        iec = kubectl.iec_status(name=iec_name(endpoint), namespace=endpoint.namespace)
        rows.append(EndpointStatus(name=endpoint.name, namespace=endpoint.namespace, resource_name=iec_name(endpoint),
                                   sagemaker_endpoint=endpoint.sagemaker_endpoint_name, sagemaker_status=sm_status,
                                   sagemaker_failure=sm_failure, iec_state=iec.state, iec_message=iec.message))
    return tuple(rows)


def collect_status(env: EnvironmentConfig, clients: ClientSource, *, kubectl: Kubectl,
                   endpoints: tuple[EndpointLike, ...] | None = None) -> StatusReport:
    warnings: list[str] = []
    sagemaker = clients.client("sagemaker")
    name = env.hyperpod.cluster_name
    cluster = attempt(lambda: describe_hyperpod(sagemaker, name))
    nodes: tuple[NodeState, ...] = ()
    if isinstance(cluster, BaseException):
        warnings.append(_unreadable(f"HyperPod cluster {name}", cluster, "sagemaker:DescribeCluster"))
        cluster = None
    elif cluster is not None:
        listed = attempt(lambda: list_nodes(sagemaker, name))
        if isinstance(listed, BaseException):
            warnings.append(_unreadable("nodes", listed, "sagemaker:ListClusterNodes"))
        else:
            nodes = listed
    addons = _addon_rows(env, clients, warnings)
    chosen = configured_endpoints(env) if endpoints is None else endpoints
    rows = endpoint_rows(clients, chosen, kubectl, warnings)
    return StatusReport(environment=env.name, region=env.region, cluster_name=name, cluster=cluster, nodes=nodes,
                        addons=addons, endpoints=rows, warnings=tuple(warnings))
