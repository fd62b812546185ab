"""The KV cache tiers in the rendered IEC (``kvCacheSpec``), and the typed override path
(``DisaggregatedEndpoint.add_override``, ``overrides:``, ``add_json_patch`` on ``/spec/...``), each manifest checked
against the CRD's openAPIV3Schema and kubernetes-validate (k8s/validation.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.catalogue.kv_tiers import REDIS_ISSUE_URL
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import add_environment_charts
from hyperpod_dpd.k8s.endpoint import DisaggregatedEndpoint
from hyperpod_dpd.k8s.validation import manifest_issues

Manifest = dict[str, Any]
K8S = "1.33"
TIERED = {"l2": {"backend": "tieredstorage"}}


def _iec(manifests: list[Manifest]) -> Manifest:
    (iec,) = [m for m in manifests if m["kind"] == "InferenceEndpointConfig"]
    assert manifest_issues(iec, kubernetes_version=K8S) == []  # the CRD schema, undeclared fields included
    return iec


@pytest.fixture(scope="module")
def tiered(synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> Manifest:
    return _iec(synth(lambda chart: DisaggregatedEndpoint(chart, "E", endpoint=make_endpoint(kv_cache=TIERED))))


def test_a_tiered_storage_l2_renders_enable_l2_and_its_backend(tiered: Manifest) -> None:
    assert tiered["spec"]["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": True,
                                             "l2CacheSpec": {"l2CacheBackend": "tieredstorage"}}


def test_kv_cache_l1_alone_renders_like_l1_cache(synth: Callable[..., list[Manifest]],
                                                 make_endpoint: Callable[..., EndpointConfig]) -> None:
    iec = _iec(synth(lambda chart: DisaggregatedEndpoint(chart, "E", endpoint=make_endpoint(kv_cache={"l1": False}))))
    assert iec["spec"]["kvCacheSpec"] == {"enableL1Cache": False}


def test_redis_is_refused_before_the_endpoint_joins_the_tree(make_endpoint: Callable[..., EndpointConfig]) -> None:
    chart = cdk8s.Testing.chart()
    endpoint = make_endpoint(kv_cache={"l2": {"backend": "redis", "url": "redis://cache:6379"}})
    with pytest.raises(ConfigError) as raised:
        DisaggregatedEndpoint(chart, "E", endpoint=endpoint, operator_version="3.2")
    assert len(str(raised.value).splitlines()) == 1
    assert str(raised.value).startswith("endpoint llama: kv_cache.l2.backend: 'redis': is ignored by operator 3.2")
    assert REDIS_ISSUE_URL in str(raised.value)
    assert chart.node.try_find_child("E") is None


def test_the_issue_case_a_json_patch_on_spec_renders_instead_of_crashing(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> None:
    # GIVEN the escape hatch of the issue: a JSON patch on the IEC's spec
    def build(chart: cdk8s.Chart) -> None:
        endpoint = DisaggregatedEndpoint(chart, "E", endpoint=make_endpoint())
        endpoint.resource.add_json_patch(cdk8s.JsonPatch.add("/spec/kvCacheSpec/enableL2Cache", True))
    # WHEN it synthesizes THEN the patch lands in the rendered spec (no TypeError), and the manifest validates
    assert _iec(synth(build))["spec"]["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": True}


def test_add_override_sets_enable_l2_and_creates_missing_parents(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> None:
    def build(chart: cdk8s.Chart) -> None:
        endpoint = DisaggregatedEndpoint(chart, "E", endpoint=make_endpoint())
        endpoint.add_override("/spec/kvCacheSpec/enableL2Cache", True)
        endpoint.add_override("/spec/kvCacheSpec/l2CacheSpec/l2CacheBackend", "tieredstorage")
        endpoint.add_override("/spec/loadBalancer/idleTimeoutSeconds", 120)
    spec = _iec(synth(build))["spec"]
    assert spec["kvCacheSpec"] == {"enableL1Cache": True, "enableL2Cache": True,
                                   "l2CacheSpec": {"l2CacheBackend": "tieredstorage"}}
    assert spec["loadBalancer"] == {"healthCheckPath": "/health", "idleTimeoutSeconds": 120}


def test_overrides_of_the_configuration_are_applied(synth: Callable[..., list[Manifest]],
                                                    make_endpoint: Callable[..., EndpointConfig]) -> None:
    endpoint = make_endpoint(overrides={"/spec/kvCacheSpec/enableL2Cache": True})
    iec = _iec(synth(lambda chart: DisaggregatedEndpoint(chart, "E", endpoint=endpoint)))
    assert iec["spec"]["kvCacheSpec"]["enableL2Cache"] is True


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("/spec/kvCacheSpec/enableL3Cache", True,
     "endpoint llama: add_override: /spec/kvCacheSpec/enableL3Cache: 'enableL3Cache': is not a field of "
     "spec.kvCacheSpec in the InferenceEndpointConfig CRD schema; allowed there: cacheConfigFile, enableL1Cache, "
     "enableL2Cache, l2CacheSpec"),
    ("/spec/kvCacheSpec/enableL2Cache", "yes",
     "endpoint llama: add_override: /spec/kvCacheSpec/enableL2Cache: 'yes': must be of type boolean (the "
     "InferenceEndpointConfig CRD schema)"),
    ("/spec/loadBalancer/idleTimeoutSeconds", 5000,
     "endpoint llama: add_override: /spec/loadBalancer/idleTimeoutSeconds: 5000: must be at most 4000 (the "
     "InferenceEndpointConfig CRD schema)"),
    ("/spec/kvCacheSpec/l2CacheSpec", {"l2CacheBackend": "tieredstorage", "size": 3},
     "endpoint llama: add_override: /spec/kvCacheSpec/l2CacheSpec/size: 'size': is not a field of "
     "spec.kvCacheSpec.l2CacheSpec in the InferenceEndpointConfig CRD schema; allowed there: l2CacheBackend, "
     "l2CacheLocalUrl"),
    ("/metadata/name", "x", "must be a JSON pointer into the IEC's spec"),
])
def test_add_override_refuses_an_unknown_path_or_a_wrong_value(make_endpoint: Callable[..., EndpointConfig],
                                                               path: str, value: Any, expected: str) -> None:
    endpoint = DisaggregatedEndpoint(cdk8s.Testing.chart(), "E", endpoint=make_endpoint())
    with pytest.raises(ConfigError) as raised:
        endpoint.add_override(path, value)
    assert len(str(raised.value).splitlines()) == 1
    assert expected in str(raised.value)


def test_add_override_refuses_the_redis_backend_the_operator_does_not_honour(
        make_endpoint: Callable[..., EndpointConfig]) -> None:
    endpoint = DisaggregatedEndpoint(cdk8s.Testing.chart(), "E", endpoint=make_endpoint(), operator_version="3.2")
    with pytest.raises(ConfigError, match="sets l2CacheBackend 'redis', which is ignored by operator 3.2"):
        endpoint.add_override("/spec/kvCacheSpec/l2CacheSpec/l2CacheBackend", "redis")


@pytest.mark.parametrize("path", ["/spec/pdSpec/prefillSpec/replicas", "/spec/worker/environmentVariables",
                                  "/spec/kvCacheSpec/enableL1Cache"])
def test_add_override_refuses_a_field_the_toolkit_renders_from_a_typed_one(
        make_endpoint: Callable[..., EndpointConfig], path: str) -> None:
    # GIVEN an endpoint whose replicas were checked against its groups, whose environment names its generation
    endpoint = DisaggregatedEndpoint(cdk8s.Testing.chart(), "E", endpoint=make_endpoint())
    value = {"/spec/pdSpec/prefillSpec/replicas": 10, "/spec/worker/environmentVariables": [],
             "/spec/kvCacheSpec/enableL1Cache": False}[path]
    # WHEN an override would set one of those rendered fields THEN it is refused in one line, pointing at the config
    with pytest.raises(ConfigError) as raised:
        endpoint.add_override(path, value)
    assert len(str(raised.value).splitlines()) == 1
    assert f"{path}: " in str(raised.value) and "is rendered from the endpoint's typed configuration" in str(
        raised.value)
    # AND the manifest keeps what the configuration says
    manifest = endpoint.resource.to_json()
    assert manifest["spec"]["pdSpec"]["prefillSpec"]["replicas"] == endpoint.endpoint.prefill.replicas


def test_an_unknown_override_of_a_python_endpoint_is_refused_before_it_renders(
        make_endpoint: Callable[..., EndpointConfig]) -> None:
    # GIVEN an endpoint built in Python whose overrides name a field the CRD schema does not declare
    # WHEN it is parsed (parse_endpoint, as make_endpoint does) THEN it is refused in one line naming its field,
    # before any construct exists
    with pytest.raises(ConfigError) as raised:
        make_endpoint(overrides={"/spec/notAField": 1})
    assert len(str(raised.value).splitlines()) == 1
    assert str(raised.value).startswith("test endpoint: overrides['/spec/notAField']: 'notAField': is not a field of "
                                        "spec in the InferenceEndpointConfig CRD schema; allowed there: ")


def test_an_override_of_a_field_the_chart_renders_names_the_environment_file(
        write_config: Callable[..., Path]) -> None:
    # GIVEN an environment file whose endpoint overrides a field the IEC renders from the typed configuration
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"][0]["overrides"] = {"/spec/modelName": "other"}
    config = load_environment("dev", write_config(mutate))  # only rendering tells: the schema allows the value
    # WHEN its charts are built THEN the refusal is one line naming the file and the field path inside it
    with pytest.raises(ConfigError) as raised:
        add_environment_charts(cdk8s.App(), config)
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert message.startswith(f"{config.source}: endpoints[0].overrides['/spec/modelName']: 'other': is rendered "
                              "from the endpoint's typed configuration")
    assert config.source.endswith("dev.yaml")


def test_a_json_patch_that_cannot_apply_points_to_add_override(make_endpoint: Callable[..., EndpointConfig]) -> None:
    chart = cdk8s.Testing.chart()
    endpoint = DisaggregatedEndpoint(chart, "E", endpoint=make_endpoint())
    endpoint.resource.add_json_patch(cdk8s.JsonPatch.replace("/spec/noSuchBlock/field", 1))
    # THEN synthesis stops with the toolkit's message (jsii carries it as a RuntimeError out of its callback)
    with pytest.raises((ConfigError, RuntimeError), match="a JSON patch does not apply.*add_override"):
        cdk8s.Testing.synth(chart)


@pytest.mark.parametrize(("path", "value", "owner"), [
    ("/spec/worker/args/-", "--port=9000", "(args)"),  # an append to a rendered list writes that list
    ("/spec/pdSpec/prefillSpec/args", ["--tensor-parallel-size", "4"], "(prefill.args)"),  # not rendered when empty
    ("/spec/worker/environmentVariables/-", {"name": "LMCACHE_SAVE_DECODE_CACHE", "value": "True"}, "(environment)"),
    ("/spec/tolerations", [{"key": "gpu", "operator": "Exists"}], "(spec.tolerations)"),  # a 3.7 field
    ("/spec/lmcache", {"mode": "MultiProcess"}, "(spec.lmcache)"),
    ("/spec/modelCacheConfig/imageCache/enabled", True, "(spec.modelCacheConfig.imageCache)"),  # a 3.3 field
])
def test_add_override_refuses_a_field_a_typed_setting_owns_even_when_it_renders_nothing(
        make_endpoint: Callable[..., EndpointConfig], path: str, value: Any, owner: str) -> None:
    # GIVEN an endpoint on operator 3.2, whose vLLM flags, DPD environment and newer fields have typed settings
    endpoint = DisaggregatedEndpoint(cdk8s.Testing.chart(), "E", endpoint=make_endpoint(), operator_version="3.2")
    before = endpoint.resource.to_json()
    # WHEN an override writes one of them (or appends to it) THEN it is refused in one line naming the setting
    with pytest.raises(ConfigError) as raised:
        endpoint.add_override(path, value)
    assert len(str(raised.value).splitlines()) == 1
    assert f"is rendered from the endpoint's typed configuration {owner}" in str(raised.value)
    # AND the manifest is unchanged: no managed flag, no variable that names the generation, no field 3.2 lacks
    assert endpoint.resource.to_json() == before


def test_an_append_to_a_list_the_toolkit_does_not_render_creates_the_list(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> None:
    # GIVEN an override that appends a tag (the endpoint renders no tags)
    def build(chart: cdk8s.Chart) -> None:
        DisaggregatedEndpoint(chart, "E", endpoint=make_endpoint()).add_override(
            "/spec/tags/-", {"name": "team", "value": "ml"})
    # THEN the rendered spec holds a one-element list (not a mapping keyed '-'), and the manifest validates
    assert _iec(synth(build))["spec"]["tags"] == [{"name": "team", "value": "ml"}]


def test_a_field_inside_a_list_element_that_does_not_exist_is_one_line(
        make_endpoint: Callable[..., EndpointConfig]) -> None:
    endpoint = DisaggregatedEndpoint(cdk8s.Testing.chart(), "E", endpoint=make_endpoint())
    with pytest.raises(ConfigError, match="spec.tags has no element 0 to set a field in"):
        endpoint.add_override("/spec/tags/0/name", "team")
