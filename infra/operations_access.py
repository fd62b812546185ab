"""Least-privilege operations access to the cluster: what ``hpdpd status``, ``hpdpd verify``, ``hpdpd smoke`` (its
canary and its service-proxy transport) and ``hpdpd rollout`` call through the Kubernetes API, and nothing more.

Each operations role (``eks.operations_principals``, and the toolkit's checks role of the pipeline, infra/checks_role.py)
gets an EKS access entry of type ``STANDARD`` in the Kubernetes group :data:`OPERATIONS_GROUP`, with no EKS access
policy: EKS authenticates the role, and Kubernetes RBAC alone authorizes it, through the roles and bindings below
(docs/cli.md, "Cluster access of the operations commands").

* ``hyperpod-dpd-operations-cluster`` (ClusterRole + ClusterRoleBinding): the reads Kubernetes only offers at cluster
  scope.
* ``hyperpod-dpd-operations-endpoint`` (ClusterRole, bound by a RoleBinding in each endpoint's namespace only).
* ``hyperpod-dpd-operations-router`` (ClusterRole, bound by a RoleBinding in ``hyperpod-inference-system`` only): the
  operator runs each IEC's router pods there.

:data:`PERMISSIONS` is the single list: the manifests, the tests and the documentation all follow it. Each entry grants
the calls of hyperpod_dpd/ops/ that name it in their ``permission`` (what a 403 tells the operator is missing);
tests/infra/test_operations_access.py fails when a call names something this list does not grant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE
from hyperpod_dpd.catalogue.operator_api import IEC_GROUP, IEC_PLURAL
from hyperpod_dpd.errors import MISSING, ConfigError
from hyperpod_dpd.infra.eks_cluster import principal_id
from hyperpod_dpd.k8s.defaults import MANAGED_BY, MANAGED_BY_LABEL
from hyperpod_dpd.k8s.validation import validate_manifests

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



class OperationsAccess(Construct):
    """Access entries for ``principals`` and ``roles`` in :data:`OPERATIONS_GROUP` and the cluster part of the RBAC.

    Args:
        cluster: the EKS cluster (created, or imported with a kubectl provider for an adopted one).
        principals: IAM role ARNs (``eks.operations_principals``).
        roles: roles of the same app, by their ARN as the configuration writes it (which names the entry's construct):
            the entry takes the role's ARN attribute, so it is created after the role (the toolkit's checks role).
        kubernetes_version: the cluster's version, to validate the manifests with ``kubernetes-validate``.
        after: what the manifest must wait for: the inference add-on (its CRD and ``hyperpod-inference-system``).
        apply_rbac: apply the RBAC (:func:`cluster_manifests`) as a ``KubernetesManifest``. False with
            ``delivery.endpoints: gitops``: the GitOps tree carries it (hyperpod_dpd.k8s.gitops), and the access
            entries, which are AWS resources a controller cannot create, stay here.

    At least one principal or role. Attributes: ``entries`` (principal ARN -> ``CfnAccessEntry``), ``manifest`` (the
    RBAC ``KubernetesManifest``, None without ``apply_rbac``).
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, principals: Sequence[str] = (),
                 roles: Mapping[str, iam.IRole] | None = None, kubernetes_version: str,
                 after: Sequence[IConstruct] = (), apply_rbac: bool = True) -> None:
        owned = dict(roles or {})
        unique = tuple(p for p in dict.fromkeys(principals) if p not in owned)
        if not unique and not owned:
            raise ConfigError.single(None, "OperationsAccess.principals", MISSING,
                                     "is required: the IAM roles that run verify, smoke and rollout")
        manifests = cluster_manifests()
        validate_manifests(manifests, kubernetes_version=kubernetes_version)  # before anything joins the tree
        super().__init__(scope, id)
        arns: dict[str, str] = {**{p: p for p in unique}, **{p: role.role_arn for p, role in owned.items()}}
        self.entries: dict[str, eks.CfnAccessEntry] = {
            principal: eks.CfnAccessEntry(self, principal_id(principal, "Operations"), cluster_name=cluster.cluster_name,
                                          principal_arn=value, type="STANDARD", kubernetes_groups=[OPERATIONS_GROUP])
            for principal, value in arns.items()}
        self.manifest: eks.KubernetesManifest | None = None
        if apply_rbac:
            self.manifest = eks.KubernetesManifest(self, "Rbac", cluster=cluster, manifest=manifests, overwrite=True,
                                                   prune=True)
            for dependency in after:
                self.manifest.node.add_dependency(dependency)


def bind_namespace(scope: Construct, id: str, *, cluster: eks.ICluster, namespace: str, kubernetes_version: str,
                   after: Sequence[IConstruct] = ()) -> eks.KubernetesManifest:
    """The endpoint rules in ``namespace``: a RoleBinding applied after ``after`` (the endpoint's manifest, which
    creates the namespace)."""
    binding = namespace_binding(namespace)
    validate_manifests([binding], kubernetes_version=kubernetes_version)
    manifest = eks.KubernetesManifest(scope, id, cluster=cluster, manifest=[binding], overwrite=True, prune=True)
    for dependency in after:
        manifest.node.add_dependency(dependency)
    return manifest
