"""The operations commands' Kubernetes RBAC as plain manifests: :data:`PERMISSIONS`, the single list of what
``hpdpd status``, ``verify``, ``smoke`` and ``rollout`` call through the Kubernetes API, and the ClusterRoles and
bindings that grant exactly it.

Plain data, so that both who apply them can build them: the platform stack (``hyperpod_dpd.infra.operations_access``,
which adds the EKS access entries and applies these as a ``KubernetesManifest``) and the GitOps tree
(``hyperpod_dpd.k8s.gitops_render``). The roles, their scopes and why each entry exists are described in
``hyperpod_dpd.infra.operations_access`` and docs/cli.md, "Cluster access of the operations commands".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE
from hyperpod_dpd.catalogue.operator_api import IEC_GROUP, IEC_PLURAL
from hyperpod_dpd.k8s.defaults import MANAGED_BY, MANAGED_BY_LABEL

OPERATIONS_GROUP = "hyperpod-dpd-operations"
RBAC_API = "rbac.authorization.k8s.io/v1"
Scope = Literal["cluster", "endpoint", "router"]
ROLE_NAMES: dict[Scope, str] = {
    "cluster": "hyperpod-dpd-operations-cluster",
    "endpoint": "hyperpod-dpd-operations-endpoint",
    "router": "hyperpod-dpd-operations-router",
}
ENDPOINT_BINDING = "hyperpod-dpd-operations"  # the RoleBinding's name in each endpoint namespace


@dataclass(frozen=True)
class Permission:
    """One RBAC rule: ``verbs`` on ``resource`` of API group ``group`` ("" is core) in ``scope``, and who needs it."""

    scope: Scope
    group: str
    resource: str
    verbs: tuple[str, ...]
    needed_by: str

    def rule(self) -> dict[str, Any]:
        return {"apiGroups": [self.group], "resources": [self.resource], "verbs": list(self.verbs)}


NETWORKING = "networking.k8s.io"  # NetworkPolicy and Ingress (networking.k8s.io/v1)
RESOURCE_API = "resource.k8s.io"  # ResourceSlice: the EFA DRA driver's devices (EKS user guide, "Manage EFA devices")

PERMISSIONS: tuple[Permission, ...] = (
    Permission("cluster", "", "nodes", ("list",),
               "verify (same-az and efa rows: zone labels, allocatable EFA); rollout promote (room: allocatable GPUs)"),
    Permission("cluster", "", "pods", ("list",),
               "rollout promote (room: the GPUs that pods of every namespace request on each node)"),
    Permission("cluster", IEC_GROUP, IEC_PLURAL, ("list",),
               "rollout (list: the generations of an endpoint, also before its namespace exists)"),
    Permission("cluster", RESOURCE_API, "resourceslices", ("list",),
               "verify (efa rows: EFA devices the EFA DRA driver publishes as ResourceSlices, where the extended "
               "resource is 0)"),
    Permission("endpoint", "", "pods", ("list", "get", "create", "delete"),
               "status, verify, smoke canary (list: the IEC's prefill and decode pods); verify --probe (create, get, "
               "delete: its short-lived probe pods)"),
    Permission("endpoint", "", "pods/log", ("get",),
               "verify (transfer backend, KV throughput from the worker logs; the probe pods' output); smoke canary "
               "(decoder log)"),
    # WebSocket exec (the kubernetes client's stream) is authorized as `get` before Kubernetes 1.35 and as `create`
    # from 1.35 (feature gate AuthorizePodWebsocketUpgradeCreatePermission, beta and on by default: kubernetes/
    # kubernetes PR #134577), so both, for every supported EKS version; nothing else may exec.
    Permission("endpoint", "", "pods/exec", ("get", "create"),
               "verify --probe (libfabric's provider list inside the running workers, fi_info -p efa)"),
    Permission("endpoint", RESOURCE_API, "resourceclaims", ("list",),
               "verify (efa rows: the EFA devices each worker holds through its DRA resource claims)"),
    Permission("endpoint", "", "events", ("list",), "verify (Warning events of pods that are not running)"),
    Permission("endpoint", "", "services", ("get", "patch"),
               "rollout status, promote, abort (get: which generation the client Service points at); rollout promote "
               "(patch: point it at the new generation, and its lease annotation)"),
    # No get/patch here: rollout re-points the router policy only (in the operator's namespace); the worker policies
    # select by role, so both generations already (hyperpod_dpd/ops/workloads.py).
    Permission("endpoint", NETWORKING, "networkpolicies", ("list",),
               "status (the endpoint's policies against its live pods)"),
    Permission("endpoint", IEC_GROUP, IEC_PLURAL, ("get", "create", "delete"),
               "status, verify and rollout promote (get: the IEC's state, --wait-ready); rollout promote (create: the "
               "new generation; delete: the old ones); rollout abort (delete)"),
    Permission("router", "", "pods", ("list",), "status (the router pods against their policy); smoke canary (the "
                                                "IEC's router pods)"),
    Permission("router", "", "pods/log", ("get",), "smoke canary (the router's decision lines)"),
    Permission("router", "", "services/proxy", ("create",),
               "smoke --service-proxy and rollout promote (the router's Service through the API server's service "
               "proxy: it has only an in-cluster name)"),
    Permission("router", NETWORKING, "networkpolicies", ("list", "get", "patch"),
               "status (list: the router policy against the router pods); rollout promote (get, patch: admit both "
               "generations' routers, then the new one)"),
    Permission("router", NETWORKING, "ingresses", ("get", "patch"),
               "rollout promote (get, patch: point the endpoint's Ingress at the new generation's routing Service)"),
)


def rules(scope: Scope) -> list[dict[str, Any]]:
    return [p.rule() for p in PERMISSIONS if p.scope == scope]


def _metadata(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _subjects() -> list[dict[str, Any]]:
    return [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": OPERATIONS_GROUP}]


def _role_ref(scope: Scope) -> dict[str, Any]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE_NAMES[scope]}


def cluster_manifests() -> list[dict[str, Any]]:
    """The three ClusterRoles, the cluster-scope ClusterRoleBinding and the router RoleBinding in the operator's
    namespace (the endpoint namespaces' RoleBindings are :func:`namespace_binding`)."""
    roles = [{"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _metadata(name), "rules": rules(scope)}
             for scope, name in ROLE_NAMES.items()]
    return [
        *roles,
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": _metadata(ROLE_NAMES["cluster"]),
         "roleRef": _role_ref("cluster"), "subjects": _subjects()},
        {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": _metadata(ROLE_NAMES["router"], INFERENCE_NAMESPACE),
         "roleRef": _role_ref("router"), "subjects": _subjects()},
    ]


def namespace_binding(namespace: str) -> dict[str, Any]:
    """The RoleBinding that grants the endpoint rules in one endpoint's namespace, and nowhere else."""
    return {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": _metadata(ENDPOINT_BINDING, namespace),
            "roleRef": _role_ref("endpoint"), "subjects": _subjects()}
