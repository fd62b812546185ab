"""Which namespaces the charts declare (and so which the CDK would delete with them): never a reserved one, and, for
a deployment that keeps namespaces apart, none at all, with a :class:`NamespaceChart` per endpoint namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE, MANAGED_BY, MANAGED_BY_LABEL
from hyperpod_dpd.config import EnvironmentConfig, load_environment
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import EndpointChart, NamespaceChart, add_environment_charts, add_namespace_charts

Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def dev_config() -> EnvironmentConfig:
    return load_environment("dev")


def _kinds(manifests: list[Manifest]) -> list[str]:
    return [m["kind"] for m in manifests]


def test_by_default_an_endpoint_chart_declares_its_own_namespace(dev_config: EnvironmentConfig) -> None:
    # GIVEN dev's endpoint in its own namespace
    [chart] = add_environment_charts(cdk8s.App(), dev_config)
    # THEN its chart renders that (cluster-scoped) Namespace first, as before
    first = chart.to_json()[0]
    assert (first["kind"], first["metadata"]["name"], "namespace" in first["metadata"]) == (
        "Namespace", "llm-serving", False)


def test_charts_can_leave_namespaces_to_namespace_charts(dev_config: EnvironmentConfig) -> None:
    # GIVEN the endpoint charts without namespaces, and the namespace charts of the same environment
    app = cdk8s.App()
    [endpoint_chart] = add_environment_charts(app, dev_config, declare_namespaces=False)
    [namespace_chart] = add_namespace_charts(app, dev_config)
    # THEN the endpoint chart holds no Namespace, and the namespace chart holds exactly that one, labelled as the
    # toolkit's, cluster-scoped
    assert "Namespace" not in _kinds(endpoint_chart.to_json())
    [namespace] = namespace_chart.to_json()
    assert namespace_chart.node.id == "Namespace-llm-serving"
    assert namespace == {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "llm-serving", "labels": {MANAGED_BY_LABEL: MANAGED_BY}}}
    # AND every other object of the endpoint is still in the endpoint chart, in its namespace
    assert {m["metadata"].get("namespace") for m in endpoint_chart.to_json()} <= {"llm-serving", INFERENCE_NAMESPACE}


def test_one_namespace_chart_per_namespace_python_endpoints_included(
        dev_config: EnvironmentConfig, make_endpoint: Callable[..., EndpointConfig]) -> None:
    extra = [make_endpoint(name="second", namespace="team-b"), make_endpoint(name="third")]  # third: "default"
    charts = add_namespace_charts(cdk8s.App(), dev_config, extra_endpoints=extra)
    assert [c.namespace_name for c in charts] == ["llm-serving", "team-b"]


@pytest.mark.parametrize("namespace", ["default", "kube-system", INFERENCE_NAMESPACE])
def test_a_chart_never_declares_a_reserved_namespace(make_endpoint: Callable[..., EndpointConfig],
                                                     namespace: str) -> None:
    # GIVEN an endpoint that reached the chart in a reserved namespace (copied past validation, or "default")
    endpoint = make_endpoint().model_copy(update={"namespace": namespace})
    # WHEN its chart renders, declaring its namespace as by default
    chart = EndpointChart(cdk8s.App(), "llama", endpoint=endpoint, kubernetes_version="1.35")
    # THEN it declares no Namespace: deleting the chart must not delete what the toolkit does not own
    assert chart.namespace_object is None and "Namespace" not in _kinds(chart.to_json())


def test_a_namespace_chart_refuses_a_reserved_namespace() -> None:
    with pytest.raises(ConfigError) as raised:
        NamespaceChart(cdk8s.App(), "Namespace-kube-system", namespace="kube-system", kubernetes_version="1.35")
    assert str(raised.value).startswith("namespace chart Namespace-kube-system: namespace: 'kube-system': is reserved")
