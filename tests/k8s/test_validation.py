"""Manifest validation: CRD schema and strict walk for the IEC, kubernetes-validate for core kinds, during synthesis."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import cdk8s
import pytest
from cdk8s_plus_35 import k8s as kube

from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import ValidatedChart
from hyperpod_dpd.k8s.endpoint import DisaggregatedEndpoint
from hyperpod_dpd.k8s.imports.com.amazon.aws.sagemaker import inference as iec
from hyperpod_dpd.k8s.validation import crd_schemas, describe, manifest_issues, validate_manifest

Manifest = dict[str, Any]
VERSION = "1.35"


@pytest.fixture(scope="module")
def iec_manifest(synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> Manifest:
    [manifest] = synth(lambda chart: DisaggregatedEndpoint(chart, "Endpoint", endpoint=make_endpoint()))
    return manifest


def _broken(manifest: Manifest, change: Callable[[Manifest], None]) -> Manifest:
    copied = copy.deepcopy(manifest)
    change(copied)
    return copied


def _error(manifest: Manifest) -> str:
    with pytest.raises(ConfigError) as raised:
        validate_manifest(manifest, kubernetes_version=VERSION)
    return str(raised.value)


def test_the_vendored_crd_provides_both_served_versions() -> None:
    assert set(crd_schemas()) == {("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig"),
                                  ("inference.sagemaker.aws.amazon.com/v1alpha1", "InferenceEndpointConfig"),
                                  # derived from AWS's CRD reference (k8s/crds/SOURCES.md; tests/k8s/test_gateway.py)
                                  ("inference.sagemaker.aws.amazon.com/v1alpha1", "InferenceGatewayConfig")}


def test_a_rendered_endpoint_is_valid(iec_manifest: Manifest) -> None:
    assert manifest_issues(iec_manifest, kubernetes_version=VERSION) == []


@pytest.mark.parametrize(("change", "expected"), [
    (lambda m: m["spec"]["pdSpec"].__setitem__("routingThreshold", -1),
     "spec.pdSpec.routingThreshold: -1: -1 is less than the minimum of 0"),
    (lambda m: m["spec"].pop("modelName"),
     "spec.modelName: missing: is required by the CRD schema"),
    (lambda m: m["spec"]["intelligentRoutingSpec"].__setitem__("routingStrategy", "leastload"),
     "spec.intelligentRoutingSpec.routingStrategy: 'leastload': 'leastload' is not one of"),
    (lambda m: m["spec"]["pdSpec"]["prefillSpec"].__setitem__("replicas", "two"),
     "spec.pdSpec.prefillSpec.replicas: 'two': 'two' is not of type 'integer'"),
    (lambda m: m["spec"]["worker"].__setitem__("imagePullPolicy", "Always"),
     "spec.worker.imagePullPolicy: 'imagePullPolicy': is not a field of the CRD schema; allowed here: args, command"),
    (lambda m: m["spec"]["pdSpec"]["decodingSpec"]["resources"]["requests"].__setitem__("nvidia.com/gpu", "eight"),
     "spec.pdSpec.decodingSpec.resources.requests['nvidia.com/gpu']: 'eight': 'eight' does not match"),
])
def test_crd_errors_name_the_object_and_the_json_path(iec_manifest: Manifest, change: Callable[[Manifest], None],
                                                      expected: str) -> None:
    message = _error(_broken(iec_manifest, change))
    assert message.startswith(f"{describe(iec_manifest)}: {expected}"), message


def test_the_strict_walk_finds_fields_newer_than_the_vendored_crd(iec_manifest: Manifest) -> None:
    # GIVEN a field of operator 3.4 (sidecar resource overrides) that the vendored 3.3 CRD does not declare
    manifest = _broken(iec_manifest, lambda m: m["spec"].__setitem__("metricsSidecarResources",
                                                                       {"limits": {"cpu": "1"}}))
    # THEN it is refused (the API server would prune it without a word)
    assert "spec.metricsSidecarResources: 'metricsSidecarResources': is not a field of the CRD schema" in _error(manifest)


def test_fields_of_the_vendored_3_3_crd_are_checked_by_its_schema(iec_manifest: Manifest) -> None:
    # GIVEN operator 3.3's modelCacheConfig, declared by the vendored CRD (k8s/crds/SOURCES.md)
    cached = _broken(iec_manifest, lambda m: m["spec"].__setitem__("modelCacheConfig", {
        "weightsCache": {"enabled": True, "hostPath": "/opt/dlami/nvme"}, "imageCache": {"enabled": True}}))
    # THEN the schema accepts it as written, and its shapes hold: imageCache needs enabled, hostPath is not empty
    assert manifest_issues(cached, kubernetes_version=VERSION) == []
    no_flag = _broken(cached, lambda m: m["spec"]["modelCacheConfig"].__setitem__("imageCache", {}))
    assert "spec.modelCacheConfig.imageCache.enabled: missing: is required by the CRD schema" in _error(no_flag)
    empty = _broken(cached, lambda m: m["spec"]["modelCacheConfig"]["weightsCache"].__setitem__("hostPath", ""))
    assert "spec.modelCacheConfig.weightsCache.hostPath: '': '' should be non-empty" in _error(empty)


def test_deploy_time_tokens_are_not_judged_by_patterns(iec_manifest: Manifest) -> None:
    manifest = _broken(iec_manifest, lambda m: m["spec"].__setitem__("endpointName", "${Token[TOKEN.42]}"))
    assert manifest_issues(manifest, kubernetes_version=VERSION) == []


def test_core_kinds_are_validated_strictly_for_the_cluster_version() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llama", "namespace": "default"},
               "spec": {"type": "ExternalName", "externalName": "a.b.svc.cluster.local", "clusterIp": "None"}}
    message = _error(service)
    assert message.startswith("Service default/llama: spec: ")
    assert "Additional properties are not allowed ('clusterIp' was unexpected)" in message


def test_core_type_errors_name_the_path() -> None:
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "x"},
              "spec": {"maxUnavailable": [1]}}
    assert _error(budget).startswith("PodDisruptionBudget x/b: spec.maxUnavailable: [1]: ")


def test_a_kind_without_any_schema_is_an_error() -> None:
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r"}}
    assert _error(route) == ("HTTPRoute r: kind: 'HTTPRoute': gateway.networking.k8s.io/v1 has no schema in Kubernetes "
                             "1.35 and no CRD in crds/; vendor its CRD to validate it")


def test_an_unsupported_kubernetes_version_is_reported() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}}
    with pytest.raises(ConfigError, match="<kubernetes version>: '1.99': is not supported"):
        validate_manifest(namespace, kubernetes_version="1.99")


def _bad_iec(chart: cdk8s.Chart) -> None:
    iec.InferenceEndpointConfig(
        chart, "Bad", metadata=cdk8s.ApiObjectMetadata(name="bad", namespace="default"),
        spec=iec.InferenceEndpointConfigSpec(
            model_name="m",
            model_source_config=iec.InferenceEndpointConfigSpecModelSourceConfig(
                model_source_type=iec.InferenceEndpointConfigSpecModelSourceConfigModelSourceType.S3),
            worker=iec.InferenceEndpointConfigSpecWorker(
                image="i", model_invocation_port=iec.InferenceEndpointConfigSpecWorkerModelInvocationPort(container_port=8000),
                model_volume_mount=iec.InferenceEndpointConfigSpecWorkerModelVolumeMount(name="w"),
                resources=iec.InferenceEndpointConfigSpecWorkerResources()),
            pd_spec=iec.InferenceEndpointConfigSpecPdSpec(
                prefill_spec=iec.InferenceEndpointConfigSpecPdSpecPrefillSpec(),
                decoding_spec=iec.InferenceEndpointConfigSpecPdSpecDecodingSpec(),
                routing_threshold=-5)))


def test_synthesis_of_a_validated_chart_fails_on_a_schema_error() -> None:
    # GIVEN a validated chart holding an IEC the generated L1 accepts but the CRD schema does not
    chart = ValidatedChart(cdk8s.App(), "Bad", kubernetes_version=VERSION)
    _bad_iec(chart)
    expected = "InferenceEndpointConfig default/bad: spec.pdSpec.routingThreshold: -5: -5 is less than the minimum of 0"
    # WHEN it is rendered from Python THEN a ConfigError names the object and the path
    with pytest.raises(ConfigError) as raised:
        chart.to_json()
    assert str(raised.value) == expected
    # AND a synthesis driven by cdk8s fails with the same text
    with pytest.raises(RuntimeError, match="spec.pdSpec.routingThreshold: -5"):
        cdk8s.Testing.synth(chart)


def test_synthesis_of_a_validated_chart_checks_core_kinds_too() -> None:
    chart = ValidatedChart(cdk8s.App(), "Core", kubernetes_version=VERSION)
    kube.KubePodDisruptionBudget(chart, "Budget", metadata=kube.ObjectMeta(name="b", namespace="x"),
                                 spec=kube.PodDisruptionBudgetSpec(max_unavailable=kube.IntOrString.from_number(1)))
    assert [m["kind"] for m in chart.to_json()] == ["PodDisruptionBudget"]
