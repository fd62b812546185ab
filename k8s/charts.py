"""Charts: one validated cdk8s chart per DPD endpoint, and the function that adds an environment's charts to an app."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from hyperpod_dpd.catalogue.namespaces import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE  # re-exported: defined here before
from hyperpod_dpd.catalogue.namespaces import reserved_namespace
from hyperpod_dpd.catalogue.operator import DEFAULT_OPERATOR
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.capacity import shared_capacity_issues
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.errors import ConfigError, Issue
from hyperpod_dpd.k8s import defaults
from hyperpod_dpd.k8s.endpoint import DisaggregatedEndpoint
from hyperpod_dpd.k8s.router import EndpointRouter, load_balancer_cidrs
from hyperpod_dpd.k8s.validation import validate_manifests


class ValidatedChart(cdk8s.Chart):
    """A chart whose manifests are schema-validated every time they are rendered.

    ``to_json`` runs on ``app.synth()``, ``Testing.synth(chart)`` and direct calls (e.g. to feed a CDK
    ``KubernetesManifest``), so no path emits an unvalidated manifest. Called from Python, a problem raises
    :class:`ConfigError`; inside a synthesis driven by cdk8s it surfaces as ``RuntimeError`` with the same text.
    """

    def __init__(self, scope: Construct, id: str, *, kubernetes_version: str, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.kubernetes_version = kubernetes_version

    def to_json(self) -> list[Any]:
        manifests = list(super().to_json())
        validate_manifests(manifests, kubernetes_version=self.kubernetes_version)
        return manifests


def _namespace(chart: cdk8s.Chart, name: str) -> k8s.KubeNamespace:
    namespace = k8s.KubeNamespace(chart, "Namespace", metadata=k8s.ObjectMeta(name=name))
    namespace.add_json_patch(cdk8s.JsonPatch.remove("/metadata/namespace"))  # cluster-scoped
    return namespace


class EndpointChart(ValidatedChart):
    """Everything one DPD endpoint needs on the cluster: the IEC (``Endpoint``), the router resources (``Router``)
    and, with ``declare_namespace`` (the default), its namespace.

    Deploy it after the inference operator add-on: the IEC needs the CRD, and the router objects in
    ``hyperpod-inference-system`` need that namespace.

    A namespace declared here is deleted with the chart's objects: the CDK's kubectl handler runs ``kubectl delete
    -f`` on every object of a removed ``KubernetesManifest`` and prunes every labelled object an update drops
    (aws-cdk-lib 2.275.0, custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py; kubectl's
    default prune list includes Namespace, kubernetes/kubernetes @ 17de4149, staging/src/k8s.io/kubectl/pkg/util/prune/
    prune.go).
    So the chart never declares a reserved namespace (``default``, ``kube-*``, the add-ons': hyperpod_dpd.catalogue.
    namespaces), whatever the endpoint says; and ``declare_namespace=False`` leaves the namespace to a
    :class:`NamespaceChart` applied on its own, which the deployment can retain.
    """

    def __init__(self, scope: Construct, id: str, *, endpoint: EndpointConfig, kubernetes_version: str,
                 operator_version: str = DEFAULT_OPERATOR, load_balancer_cidrs: Sequence[str] = (),
                 declare_namespace: bool = True) -> None:
        super().__init__(scope, id, kubernetes_version=kubernetes_version, namespace=endpoint.namespace,
                         labels={defaults.MANAGED_BY_LABEL: defaults.MANAGED_BY,
                                 defaults.ENDPOINT_LABEL: endpoint.name})
        self.namespace_object: k8s.KubeNamespace | None = None
        if declare_namespace and reserved_namespace(endpoint.namespace) is None:
            # One DPD endpoint per namespace (see EndpointConfig), so the chart owns its namespace.
            self.namespace_object = _namespace(self, endpoint.namespace)
        self.endpoint = DisaggregatedEndpoint(self, "Endpoint", endpoint=endpoint, operator_version=operator_version)
        self.router = EndpointRouter(self, "Router", endpoint=endpoint, load_balancer_cidrs=load_balancer_cidrs)


class NamespaceChart(ValidatedChart):
    """One endpoint namespace on its own, for a deployment that keeps namespaces apart from the endpoints' objects.

    Applied as a ``KubernetesManifest`` with ``removal_policy=RETAIN`` and ``prune=False`` (and ``overwrite=True``),
    the namespace is created once and never deleted by CloudFormation: aws_eks_v2.KubernetesManifest passes
    ``removalPolicy`` to its custom resource (aws-cdk-lib 2.275.0, aws-eks-v2/lib/k8s-manifest.js), a resource with
    DeletionPolicy Retain is kept when it leaves the template (aws_cdk.RemovalPolicy), so the kubectl handler never
    runs its ``kubectl delete``; and without a prune label (``injectPruneLabel`` runs only with ``prune``) no
    manifest's ``kubectl apply --prune -l aws.cdk.eks/prune-<addr>`` selects it. The first apply of this chart also
    drops the prune label an earlier endpoint chart gave the namespace ("Clear fields removed from the configuration
    file in the live configuration": kubernetes.io, "Declarative Management of Kubernetes Objects Using Configuration
    Files"; the label is in the last applied configuration the endpoint chart's apply recorded), so moving an
    existing namespace here is safe when the endpoint manifests depend on this one [? not yet tried on a cluster].
    Removing an endpoint then deletes its objects but not its namespace, which may hold what the toolkit did not put
    there.
    """

    def __init__(self, scope: Construct, id: str, *, namespace: str, kubernetes_version: str) -> None:
        why = reserved_namespace(namespace)
        if why:
            raise ConfigError.single(f"namespace chart {id}", "namespace", namespace, f"is reserved ({why})")
        super().__init__(scope, id, kubernetes_version=kubernetes_version,
                         labels={defaults.MANAGED_BY_LABEL: defaults.MANAGED_BY})
        self.namespace_name = namespace
        self.namespace_object = _namespace(self, namespace)


def add_environment_charts(app: cdk8s.App, config: EnvironmentConfig, *,
                           extra_endpoints: Sequence[EndpointConfig] = (),
                           declare_namespaces: bool = True) -> list[EndpointChart]:
    """Add one :class:`EndpointChart` per endpoint of ``config`` (plus ``extra_endpoints`` declared in Python).

    Endpoints are pinned to the environment's GPU AZ, tolerate the taints of their instance groups (unless they list
    tolerations), render for the environment's operator release and are validated against the Kubernetes version of
    its EKS cluster. Python-declared endpoints get the same cross-checks as the config file's (instance groups, AZ,
    names, operator release). ``declare_namespaces=False``: the charts leave their namespaces to
    :func:`add_namespace_charts`. A problem of a file's endpoint that only its chart finds (an override of a field the
    chart renders) names the file and ``endpoints[<i>]``.
    """
    endpoints = (*config.endpoints, *extra_endpoints)
    if extra_endpoints:
        merged = config.model_copy(update={"endpoints": endpoints})
        problems = [p for i, e in enumerate(endpoints) for p in e.issues(merged, f"endpoints[{i}]")]
        # the GPUs of every group against all endpoints together, Python-declared ones included
        problems += list(shared_capacity_issues(merged, "hyperpod.instance_groups"))
        if problems:
            raise ConfigError(f"environment {config.name}", problems)
    balancers = load_balancer_cidrs(config.network)  # the operator's load balancer sends from the VPC's addresses
    charts = []
    for index, e in enumerate(endpoints):
        try:
            charts.append(EndpointChart(app, e.name, endpoint=e.for_environment(config),
                                        kubernetes_version=config.eks.version, operator_version=config.operator.version,
                                        load_balancer_cidrs=balancers, declare_namespace=declare_namespaces))
        except ConfigError as error:
            if index >= len(config.endpoints) or error.source != f"endpoint {e.name}":
                raise
            # what only the rendering can tell (an override of a field the chart renders): the file's endpoint
            raise ConfigError(config.source, [Issue(join(f"endpoints[{index}]", i.path), i.value, i.message)
                                              for i in error.issues]) from None
    return charts


def add_namespace_charts(app: cdk8s.App, config: EnvironmentConfig, *,
                         extra_endpoints: Sequence[EndpointConfig] = ()) -> list[NamespaceChart]:
    """One :class:`NamespaceChart` (id ``Namespace-<namespace>``) per namespace the endpoints of ``config`` (and
    ``extra_endpoints``) use, reserved ones left out: the companion of ``add_environment_charts(...,
    declare_namespaces=False)``."""
    names = dict.fromkeys(e.namespace for e in (*config.endpoints, *extra_endpoints))
    return [NamespaceChart(app, f"Namespace-{name}", namespace=name, kubernetes_version=config.eks.version)
            for name in names if reserved_namespace(name) is None]
