"""What the GitOps tree holds for one environment: every file as data, ordering annotations included (no I/O here).

Layout of ``<out>/<env>/`` with ``delivery.endpoints: gitops`` (docs/gitops.md):

* ``kustomization.yaml``: the whole environment (``cluster`` and ``endpoints``), what one Argo CD Application syncs;
* ``cluster/``: the endpoint namespaces, the operations RBAC and the Karpenter node classes and pools, with its own
  ``kustomization.yaml`` (a Flux ``Kustomization`` the endpoints' one ``dependsOn``);
* ``endpoints/``: one ``<endpoint>.k8s.yaml`` per endpoint (IEC, client Service, policies, disruption budgets);
* ``prometheus/``: the DPD alert rules as a ``PrometheusRule``, for a team that runs the Prometheus Operator; not in
  the environment's ``kustomization.yaml`` (its CRD is not part of a HyperPod cluster): point an Application or a
  Flux ``Kustomization`` at it.

An environment with ``delivery.endpoints: cdk`` has no ``<out>/<env>/``: nothing a controller could pick up (an Argo
CD directory generator, a Flux path) exists for it, so CDK stays the only owner of its objects, and switching an
environment back from gitops to cdk removes its directory, which with ``preserveResourcesOnDeletion`` removes its
Application and leaves the objects for CDK to adopt. Its endpoints' manifests, as CDK applies them, go to
``<out>/_cdk/<env>/`` for review and scanners (``make checkov``): no environment name holds ``_``, and that directory
has no ``kustomization.yaml``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import cdk8s

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.k8s.charts import add_environment_charts, add_namespace_charts
from hyperpod_dpd.k8s.defaults import MANAGED_BY, MANAGED_BY_LABEL
from hyperpod_dpd.k8s.karpenter import karpenter_manifests
from hyperpod_dpd.k8s.operations_rbac import cluster_manifests, namespace_binding
from hyperpod_dpd.k8s.validation import validate_manifests
from hyperpod_dpd.monitoring.alerts import rule_groups
from hyperpod_dpd.monitoring.validation import check_rule_file

SUFFIX = ".k8s.yaml"
KUSTOMIZATION = "kustomization.yaml"
CDK_REVIEW_DIR = "_cdk"  # environment names start with a letter and hold letters, digits, '-' (config/loader.py)
CLUSTER_DIR, ENDPOINTS_DIR, PROMETHEUS_DIR = "cluster", "endpoints", "prometheus"
# kustomize's Kustomization type (kubernetes-sigs/kustomize api/types/kustomization.go: KustomizationVersion
# "kustomize.config.k8s.io/v1beta1", KustomizationKind "Kustomization").
KUSTOMIZE_API_VERSION = "kustomize.config.k8s.io/v1beta1"

# Argo CD applies lower waves first and waits for each wave to be healthy ("Sync Phases and Waves", argo-cd docs
# user-guide/sync-waves.md: annotation argocd.argoproj.io/sync-wave, a quoted integer, default "0"). The namespaces
# come first, then the RBAC and node classes, then the node pools, Services, policies and budgets, then the IEC, whose
# router the Ingress names last.
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
WAVES: Mapping[str, int] = {
    "Namespace": -3,
    "ClusterRole": -2, "ClusterRoleBinding": -2, "Role": -2, "RoleBinding": -2, "HyperpodNodeClass": -2,
    "NodePool": -1, "Service": -1, "NetworkPolicy": -1, "PodDisruptionBudget": -1,
    "InferenceEndpointConfig": 0,
    "Ingress": 1,
    "PrometheusRule": 2,
}
DEFAULT_WAVE = -1  # any other kind the charts add: with the Services, before the IEC
# A namespace is never pruned by a controller, as CDK retains it (k8s/charts.py, NamespaceChart): it may hold what
# the toolkit did not put there. Argo CD: "argocd.argoproj.io/sync-options: Prune=false" ("Sync Options", No Prune
# Resources). Flux: "kustomize.toolkit.fluxcd.io/prune: disabled" (fluxcd.io, Kustomization API, "Prune").
ARGO_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
# HyperPod installs the Karpenter CRDs only once AutoScaling is InService (AWS, "Create a NodeClass"), so Argo CD's dry
# run would fail before: "SkipDryRunOnMissingResource=true" ("Sync Options", Skip Dry Run for new custom resources
# types); the sync retries until the CRDs exist.
KARPENTER_KINDS = frozenset({"HyperpodNodeClass", "NodePool"})
# prometheus-operator's PrometheusRule (monitoring.coreos.com/v1, spec.groups[] of name and rules: prometheus-operator
# Documentation/api-reference/api.md, PrometheusRuleSpec / RuleGroup).
PROMETHEUS_RULE_API_VERSION = "monitoring.coreos.com/v1"


@dataclass(frozen=True, kw_only=True)
class EnvironmentTree:
    """One environment's files: path relative to :attr:`directory` -> the YAML documents of that file."""

    name: str
    gitops: bool
    files: Mapping[str, tuple[dict[str, Any], ...]]

    @property
    def directory(self) -> str:
        """``<env>`` for a gitops environment, ``_cdk/<env>`` for the review copy of a cdk one."""
        return self.name if self.gitops else f"{CDK_REVIEW_DIR}/{self.name}"


def environment_of(path: str) -> str:
    """The environment a tree path (relative to ``<out>``) belongs to."""
    parts = path.split("/")
    return parts[1] if parts[0] == CDK_REVIEW_DIR and len(parts) > 2 else parts[0]


def annotate(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` with its sync wave, and the no-prune or skip-dry-run options its kind needs."""
    copy = {**obj, "metadata": {**obj.get("metadata", {})}}
    annotations = dict(copy["metadata"].get("annotations", {}))
    kind = str(obj.get("kind"))
    annotations[SYNC_WAVE] = str(WAVES.get(kind, DEFAULT_WAVE))
    if kind == "Namespace":
        annotations[ARGO_SYNC_OPTIONS] = "Prune=false"
        annotations[FLUX_PRUNE] = "disabled"
    elif kind in KARPENTER_KINDS:
        annotations[ARGO_SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"
    copy["metadata"]["annotations"] = annotations
    return copy


def kustomization(resources: Iterable[str]) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE_API_VERSION, "kind": "Kustomization", "resources": sorted(resources)}


def endpoint_manifests(config: EnvironmentConfig, *, declare_namespaces: bool = True) -> dict[str, list[dict]]:
    """``<endpoint name>`` -> the validated manifests of its chart (with its namespace unless ``declare_namespaces``
    is false), in the chart's order."""
    app = cdk8s.App()
    charts = add_environment_charts(app, config, declare_namespaces=declare_namespaces)
    return {chart.node.id: chart.to_json() for chart in charts}


def cluster_objects(config: EnvironmentConfig) -> dict[str, list[dict[str, Any]]]:
    """The ``cluster/`` files: namespaces, operations RBAC (with each endpoint namespace's RoleBinding), Karpenter."""
    app = cdk8s.App()
    files: dict[str, list[dict[str, Any]]] = {}
    namespaces = [obj for chart in add_namespace_charts(app, config) for obj in chart.to_json()]
    if namespaces:
        files["namespaces" + SUFFIX] = namespaces
    if config.operations_roles:
        rbac = cluster_manifests() + [namespace_binding(n) for n in dict.fromkeys(
            e.namespace for e in config.endpoints)]
        validate_manifests(rbac, kubernetes_version=config.eks.version)
        files["operations" + SUFFIX] = rbac
    autoscaling = config.hyperpod.autoscaling
    groups = [g for g in config.hyperpod.instance_groups if g.autoscaled]
    if groups and autoscaling is not None:  # the configuration refuses autoscaled groups without it
        files["karpenter" + SUFFIX] = [obj for g in groups for obj in karpenter_manifests(
            g, consolidate_after_minutes=autoscaling.consolidate_after_minutes)]
    return files


def prometheus_rule(config: EnvironmentConfig) -> dict[str, Any]:
    """The DPD alert rules (hyperpod_dpd.monitoring.alerts.rule_groups, the rules infra/monitoring.py ships to AMP),
    validated as that file is. No namespace: the Prometheus Operator's rule selectors are the team's, so the
    Application's ``destination.namespace`` or the Flux ``targetNamespace`` places it."""
    groups = rule_groups(config)
    check_rule_file(groups)
    return {"apiVersion": PROMETHEUS_RULE_API_VERSION, "kind": "PrometheusRule",
            "metadata": {"name": f"hyperpod-dpd-{config.name}", "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": groups}


def render_tree(config: EnvironmentConfig) -> EnvironmentTree:
    """Every file of ``<out>/<env>/``, validated, before anything is written."""
    if not config.delivery.gitops:
        review = {f"{name}{SUFFIX}": tuple(objs) for name, objs in endpoint_manifests(config).items()}
        return EnvironmentTree(name=config.name, gitops=False, files=review)
    files: dict[str, tuple[dict[str, Any], ...]] = {}
    cluster = cluster_objects(config)
    for name, objs in cluster.items():
        files[f"{CLUSTER_DIR}/{name}"] = tuple(annotate(o) for o in objs)
    files[f"{CLUSTER_DIR}/{KUSTOMIZATION}"] = (kustomization(cluster),)
    endpoints = endpoint_manifests(config, declare_namespaces=False)
    for name, objs in endpoints.items():
        files[f"{ENDPOINTS_DIR}/{name}{SUFFIX}"] = tuple(annotate(o) for o in objs)
    files[f"{ENDPOINTS_DIR}/{KUSTOMIZATION}"] = (kustomization(f"{name}{SUFFIX}" for name in endpoints),)
    files[KUSTOMIZATION] = (kustomization((CLUSTER_DIR, ENDPOINTS_DIR)),)
    if config.endpoints and config.alerts.enabled:  # as infra/monitoring.py build_monitoring
        files[f"{PROMETHEUS_DIR}/prometheus-rule{SUFFIX}"] = (annotate(prometheus_rule(config)),)
        files[f"{PROMETHEUS_DIR}/{KUSTOMIZATION}"] = (kustomization([f"prometheus-rule{SUFFIX}"]),)
    return EnvironmentTree(name=config.name, gitops=True, files=files)
