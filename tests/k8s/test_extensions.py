"""Fields of later operators on the IEC: one table drives their rendering (JSON patches after the typed spec) and
their acceptance by the strict CRD-schema check, which still rejects every other undeclared field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from hyperpod_dpd.catalogue.operator import IEC_EXTENSION_FIELDS, CrdField
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import add_environment_charts
from hyperpod_dpd.k8s.endpoint import DisaggregatedEndpoint
from hyperpod_dpd.k8s.extensions import IEC_V1, apply_extensions, extend_schema, extension_patches
from hyperpod_dpd.k8s.validation import crd_schemas, manifest_issues, validate_manifest

Manifest = dict[str, Any]
VERSION = "1.35"
CRD = Path(__file__).resolve().parents[2] / "k8s" / "crds" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
TAINTS = {"prefill": [{"key": "example.com/pool", "value": "prefill", "effect": "NoSchedule"}],
          "decode": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}
LATER_FIELDS: dict[str, Any] = {
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "lmcache": {"mode": "InProcess"},
    "pod_annotations": {"example.com/team": "llm", "prometheus.io/scrape": "true"},
}


def _at(manifest: Manifest, path: str) -> Any:
    node: Any = manifest
    for part in path.split("."):
        node = node[part]
    return node


def _iec(manifests: list[Manifest]) -> Manifest:
    [iec] = [m for m in manifests if m["kind"] == "InferenceEndpointConfig"]
    return iec


def _render(synth: Callable[..., list[Manifest]], endpoint: EndpointConfig, operator_version: str = "3.7") -> Manifest:
    return _iec(synth(lambda chart: DisaggregatedEndpoint(chart, "Endpoint", endpoint=endpoint,
                                                          operator_version=operator_version)))


@pytest.fixture(scope="module")
def vendored_v1() -> Manifest:
    """The IEC v1 schema exactly as vendored (v3.2), without the extension fields."""
    crd = yaml.load(CRD.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return v1["schema"]["openAPIV3Schema"]


@pytest.fixture(scope="module")
def everything(synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> Manifest:
    """An endpoint that sets every later field, rendered for operator 3.7."""
    return _render(synth, make_endpoint(**LATER_FIELDS))


# --- tainted instance groups, end to end -------------------------------------------------------------------------------

def _tainted_dev(operator: str | None) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        if operator:
            data["operator"]["version"] = operator
        for group in data["hyperpod"]["instance_groups"]:
            group["taints"] = TAINTS.get(group["name"], [])

    return mutate


def test_tainted_gpu_groups_render_matching_tolerations_on_operator_3_7(write_config: Callable[..., Path]) -> None:
    # GIVEN dev whose prefill and decode groups carry taints, on operator 3.7
    env = load_environment("dev", write_config(_tainted_dev("3.7")))
    # WHEN its charts are rendered (and schema-validated on the way)
    [chart] = add_environment_charts(cdk8s.App(), env)
    spec = _iec(chart.to_json())["spec"]
    # THEN the IEC's spec.tolerations, which the operator applies to the pods of both roles, matches both groups'
    # taints, while each role still selects its own group
    assert spec["tolerations"] == [
        {"key": "example.com/pool", "operator": "Equal", "value": "prefill", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["pdSpec"]["prefillSpec"]["nodeSelector"]["hyperpod-dpd/instance-group"] == "prefill"
    assert spec["pdSpec"]["decodingSpec"]["nodeSelector"]["hyperpod-dpd/instance-group"] == "decode"
    # AND no role-level toleration field is invented (the operator has none)
    assert "tolerations" not in spec["pdSpec"]["prefillSpec"] and "tolerations" not in spec["pdSpec"]["decodingSpec"]


def test_the_same_tainted_groups_on_operator_3_4_fail_in_one_line(write_config: Callable[..., Path]) -> None:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(_tainted_dev(None)))  # dev.yaml pins 3.4
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert message.endswith('need operator 3.7 or later (operator.version is "3.4"); set operator.version to "3.7" '
                            "or later, or remove the taints")


def test_untainted_groups_render_no_tolerations(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(_tainted_dev("3.7")))
    untainted = env.model_copy(update={"hyperpod": env.hyperpod.model_copy(update={"instance_groups": tuple(
        g.model_copy(update={"taints": ()}) for g in env.hyperpod.instance_groups)})})
    [chart] = add_environment_charts(cdk8s.App(), untainted)
    assert "tolerations" not in _iec(chart.to_json())["spec"]


# --- the construct gates each field on operator_version ----------------------------------------------------------------

@pytest.mark.parametrize(("operator", "fields", "refused"), [
    ("3.4", {"tolerations": LATER_FIELDS["tolerations"]},
     "endpoint llama: tolerations: [{'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}]: "
     'needs operator 3.7 or later (operator_version is "3.4")'),
    ("3.6", {"lmcache": {"mode": "InProcess"}},
     "endpoint llama: lmcache.mode: 'InProcess': needs operator 3.7 or later (operator_version is \"3.6\")"),
    ("3.5", {"pod_annotations": {"example.com/team": "llm"}},
     "endpoint llama: pod_annotations: {'example.com/team': 'llm'}: needs operator 3.6 or later "
     '(operator_version is "3.5")'),
    ("3.9", {}, "endpoint llama: operator_version: '3.9': must be a known operator release: 3.0"),
])
def test_a_field_is_refused_below_the_operator_that_added_it(synth: Callable[..., list[Manifest]],
                                                             make_endpoint: Callable[..., EndpointConfig],
                                                             operator: str, fields: dict[str, Any], refused: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _render(synth, make_endpoint(**fields), operator)
    assert str(raised.value).startswith(refused) and len(str(raised.value).splitlines()) == 1


def test_pod_annotations_render_from_operator_3_6(synth: Callable[..., list[Manifest]],
                                                  make_endpoint: Callable[..., EndpointConfig]) -> None:
    spec = _render(synth, make_endpoint(pod_annotations={"example.com/team": "llm"}), "3.6")["spec"]
    assert spec["kubernetes"] == {"podTemplateAnnotations": {"example.com/team": "llm"}}
    assert "tolerations" not in spec and "lmcache" not in spec


def test_an_endpoint_without_later_fields_renders_none_of_them(synth: Callable[..., list[Manifest]],
                                                               make_endpoint: Callable[..., EndpointConfig]) -> None:
    spec = _render(synth, make_endpoint(), "3.2")["spec"]
    assert not {"tolerations", "lmcache", "kubernetes"} & set(spec)


# --- the table drives rendering and schema acceptance ------------------------------------------------------------------

def test_every_table_field_renders_at_its_path_and_nothing_else_is_added(everything: Manifest,
                                                                        vendored_v1: Manifest) -> None:
    # GIVEN an endpoint with every later field, rendered
    # THEN each table row's path holds the configured value
    assert _at(everything, "spec.tolerations") == LATER_FIELDS["tolerations"]
    assert _at(everything, "spec.lmcache") == LATER_FIELDS["lmcache"]
    assert _at(everything, "spec.kubernetes.podTemplateAnnotations") == LATER_FIELDS["pod_annotations"]
    # AND the spec fields the vendored CRD does not know are exactly the table's (top-level part)
    unknown = set(everything["spec"]) - set(vendored_v1["properties"]["spec"]["properties"])
    assert unknown == {"tolerations", "lmcache"}
    assert set(everything["spec"]["kubernetes"]) == {"podTemplateAnnotations"}


def test_the_validation_schema_declares_every_table_field_with_its_shape(vendored_v1: Manifest) -> None:
    schema = crd_schemas()[IEC_V1]
    for path, field in IEC_EXTENSION_FIELDS.items():
        *parents, name = path.split(".")
        node, vendored = schema, vendored_v1
        for part in parents:
            node, vendored = node["properties"][part], vendored["properties"][part]
        if field.declared:  # rendered by patch, validated by the vendored CRD's own shape (plus rows below it)
            assert name in vendored["properties"], f"{path} is marked declared; the vendored CRD lacks it"
            continue
        assert node["properties"][name] == field.schema, path
        assert name not in vendored.get("properties", {}), f"{path} is in the vendored CRD; drop its table row"
    # the v1alpha1 schema, which hyperpod-dpd does not render, stays as vendored
    assert "tolerations" not in crd_schemas()[("inference.sagemaker.aws.amazon.com/v1alpha1", "InferenceEndpointConfig")][
        "properties"]["spec"]["properties"]


def test_a_manifest_with_every_table_field_is_valid(everything: Manifest) -> None:
    assert manifest_issues(everything, kubernetes_version=VERSION) == []


def _changed(manifest: Manifest, change: Callable[[Manifest], None]) -> Manifest:
    copied = copy.deepcopy(manifest)
    change(copied)
    return copied


@pytest.mark.parametrize(("change", "expected"), [
    (lambda m: m["spec"].__setitem__("metricsSidecarResources", {"limits": {"cpu": "1"}}),
     "spec.metricsSidecarResources: 'metricsSidecarResources': is not a field of the CRD schema"),
    (lambda m: m["spec"]["kubernetes"].__setitem__("podTemplateLabels", {"team": "llm"}),
     "spec.kubernetes.podTemplateLabels: 'podTemplateLabels': is not a field of the CRD schema"),
    (lambda m: m["spec"]["lmcache"].__setitem__("cacheSize", 4),
     "spec.lmcache.cacheSize: 'cacheSize': is not a field of the CRD schema; allowed here: mode"),
    (lambda m: m["spec"]["tolerations"][0].__setitem__("priority", 1),
     "spec.tolerations[0].priority: 'priority': is not a field of the CRD schema; allowed here: effect, key, operator"),
    (lambda m: m["spec"]["lmcache"].__setitem__("mode", "Both"),
     "spec.lmcache.mode: 'Both': 'Both' is not one of ['InProcess', 'MultiProcess']"),
    (lambda m: m["spec"]["kubernetes"]["podTemplateAnnotations"].__setitem__("example.com/replicas", 2),
     "spec.kubernetes.podTemplateAnnotations['example.com/replicas']: 2: 2 is not of type 'string'"),
])
def test_anything_outside_the_table_or_its_shapes_is_still_rejected(everything: Manifest,
                                                                    change: Callable[[Manifest], None],
                                                                    expected: str) -> None:
    broken = _changed(everything, change)
    with pytest.raises(ConfigError) as raised:
        validate_manifest(broken, kubernetes_version=VERSION)
    assert expected in str(raised.value), str(raised.value)


def test_patches_create_a_missing_parent_once_and_keep_an_existing_one() -> None:
    annotations = {"spec.kubernetes.podTemplateAnnotations": {"example.com/team": "llm"}}
    # GIVEN a spec without a kubernetes block, and one with init containers in it
    bare = apply_extensions({"spec": {"modelName": "m"}}, annotations)
    kept = apply_extensions({"spec": {"kubernetes": {"initContainers": [{"name": "init"}]}}}, annotations)
    # THEN the block is created, or extended without losing what it had
    assert bare["spec"]["kubernetes"] == {"podTemplateAnnotations": {"example.com/team": "llm"}}
    assert kept["spec"]["kubernetes"] == {"initContainers": [{"name": "init"}],
                                          "podTemplateAnnotations": {"example.com/team": "llm"}}
    assert apply_extensions({"spec": {}}, {}) == {"spec": {}}


def test_a_path_outside_the_table_cannot_be_rendered() -> None:
    with pytest.raises(ValueError, match="'spec.modelCacheConfig' is not an IEC extension field; known: "):
        extension_patches({"spec": {}}, {"spec.modelCacheConfig": {}})


def test_extending_refuses_a_field_the_crd_declares_already_or_a_missing_parent() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "kubernetes": {"type": "object", "properties": {}}, "tolerations": {"type": "array"}}}}}
    with pytest.raises(ValueError, match="spec.tolerations: the vendored CRD declares it already"):
        extend_schema(schema)
    orphan = {"spec.nowhere.field": CrdField("spec.nowhere.field", "3.7", "test", {"type": "string"})}
    with pytest.raises(ValueError, match="spec.nowhere.field: the CRD schema has no object at 'nowhere'"):
        extend_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": {}}}}, orphan)
