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

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from hyperpod_dpd.errors import MISSING, ConfigError
from hyperpod_dpd.infra.eks_cluster import principal_id
from hyperpod_dpd.k8s.operations_rbac import (  # re-exported: the RBAC is this construct's
    ENDPOINT_BINDING as ENDPOINT_BINDING,
)
from hyperpod_dpd.k8s.operations_rbac import OPERATIONS_GROUP as OPERATIONS_GROUP
from hyperpod_dpd.k8s.operations_rbac import PERMISSIONS as PERMISSIONS
from hyperpod_dpd.k8s.operations_rbac import ROLE_NAMES as ROLE_NAMES
from hyperpod_dpd.k8s.operations_rbac import Permission as Permission
from hyperpod_dpd.k8s.operations_rbac import Scope as Scope
from hyperpod_dpd.k8s.operations_rbac import cluster_manifests as cluster_manifests
from hyperpod_dpd.k8s.operations_rbac import namespace_binding as namespace_binding
from hyperpod_dpd.k8s.operations_rbac import rules as rules
from hyperpod_dpd.k8s.validation import validate_manifests


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
