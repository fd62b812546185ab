"""Charts: one validated cdk8s chart per DPD endpoint, and the function that adds an environment's charts to an app."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from hyperpod_dpd.catalogue.operator import DEFAULT_OPERATOR
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s import defaults
from hyperpod_dpd.k8s.endpoint import DisaggregatedEndpoint
from hyperpod_dpd.k8s.router import EndpointRouter, load_balancer_cidrs
from hyperpod_dpd.k8s.validation import validate_manifests

DEFAULT_NAMESPACE = "default"


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


class EndpointChart(ValidatedChart):
    """Everything one DPD endpoint needs on the cluster: its namespace (unless ``default``), the IEC (``Endpoint``)
    and the router resources (``Router``).

    Deploy it after the inference operator add-on: the IEC needs the CRD, and the router objects in
    ``hyperpod-inference-system`` need that namespace.
    """

    def __init__(self, scope: Construct, id: str, *, endpoint: EndpointConfig, kubernetes_version: str,
                 operator_version: str = DEFAULT_OPERATOR, load_balancer_cidrs: Sequence[str] = ()) -> None:
        super().__init__(scope, id, kubernetes_version=kubernetes_version, namespace=endpoint.namespace,
                         labels={defaults.MANAGED_BY_LABEL: defaults.MANAGED_BY,
                                 defaults.ENDPOINT_LABEL: endpoint.name})
        self.namespace_object: k8s.KubeNamespace | None = None
        if endpoint.namespace != DEFAULT_NAMESPACE:
            # One DPD endpoint per namespace (see EndpointConfig), so the chart owns its namespace.
            self.namespace_object = k8s.KubeNamespace(self, "Namespace", metadata=k8s.ObjectMeta(name=endpoint.namespace))
            self.namespace_object.add_json_patch(cdk8s.JsonPatch.remove("/metadata/namespace"))  # cluster-scoped
        self.endpoint = DisaggregatedEndpoint(self, "Endpoint", endpoint=endpoint, operator_version=operator_version)
        self.router = EndpointRouter(self, "Router", endpoint=endpoint, load_balancer_cidrs=load_balancer_cidrs)


def add_environment_charts(app: cdk8s.App, config: EnvironmentConfig, *,
                           extra_endpoints: Sequence[EndpointConfig] = ()) -> list[EndpointChart]:
    """Add one :class:`EndpointChart` per endpoint of ``config`` (plus ``extra_endpoints`` declared in Python).

    Endpoints are pinned to the environment's GPU AZ, tolerate the taints of their instance groups (unless they list
    tolerations), render for the environment's operator release and are validated against the Kubernetes version of
    its EKS cluster. Python-declared endpoints get the same cross-checks as the config file's (instance groups, AZ,
    names, operator release).
    """
    endpoints = (*config.endpoints, *extra_endpoints)
    if extra_endpoints:
        merged = config.model_copy(update={"endpoints": endpoints})
        problems = [p for i, e in enumerate(endpoints) for p in e.issues(merged, f"endpoints[{i}]")]
        if problems:
            raise ConfigError(f"environment {config.name}", problems)
    balancers = load_balancer_cidrs(config.network)  # the operator's load balancer sends from the VPC's addresses
    return [EndpointChart(app, e.name, endpoint=e.for_environment(config), kubernetes_version=config.eks.version,
                          operator_version=config.operator.version, load_balancer_cidrs=balancers)
            for e in endpoints]
