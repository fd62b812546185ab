"""An endpoint's ``model_cache``: the weights cache (pinned to the prefill and decode groups) and the image cache render
into the IEC's ``spec.modelCacheConfig`` on the operator releases that have them, validate against the CRD schema
(extended by the table rows) and kubernetes-validate, and are refused below their release in one line."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_cache import ModelCacheConfig, WeightsCacheConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import add_environment_charts
from hyperpod_dpd.k8s.extensions import apply_extensions
from hyperpod_dpd.k8s.validation import validate_manifest

BOTH = {"weights_cache": {}, "image_cache": {}}


def _dev(operator: str, cache: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["operator"]["version"] = operator
        data["endpoints"][0]["model_cache"] = copy.deepcopy(cache)

    return mutate


def _spec(write_config: Callable[..., Path], operator: str, cache: dict[str, Any]) -> dict[str, Any]:
    env = load_environment("dev", write_config(_dev(operator, cache)))
    [chart] = add_environment_charts(cdk8s.App(), env)  # every manifest is validated on the way
    [iec] = [m for m in chart.to_json() if m["kind"] == "InferenceEndpointConfig"]
    validate_manifest(iec, kubernetes_version=env.eks.version)  # the CRD schema and kubernetes-validate, again
    return dict(iec["spec"])


def test_both_caches_render_on_operator_3_5_pinned_to_the_prefill_and_decode_groups(
        write_config: Callable[..., Path]) -> None:
    # GIVEN dev (prefill and decode instance groups) on operator 3.5 with both caches
    spec = _spec(write_config, "3.5", BOTH)
    # THEN the weights cache is on, on the CRD's NVMe default path, and its node affinity matches the nodes each role's
    # pods select (the same labels as pdSpec's node selectors), one ORed term per role
    weights = spec["modelCacheConfig"]["weightsCache"]
    assert (weights["enabled"], weights["hostPath"]) == (True, "/opt/dlami/nvme")
    terms = weights["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    for term, role_spec in zip(terms, (spec["pdSpec"]["prefillSpec"], spec["pdSpec"]["decodingSpec"]), strict=True):
        labels = {e["key"]: e["values"][0] for e in term["matchExpressions"]}
        assert labels == role_spec["nodeSelector"]
        assert all(e["operator"] == "In" and len(e["values"]) == 1 for e in term["matchExpressions"])
    # AND the image cache is on
    assert spec["modelCacheConfig"]["imageCache"] == {"enabled": True}


def test_the_pinned_weights_cache_below_3_5_is_refused_in_one_line(write_config: Callable[..., Path]) -> None:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(_dev("3.4", BOTH)))
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    # AND it says what runs on this release instead
    assert message.endswith('endpoints[0].model_cache.weights_cache.pin_to_groups: true: needs operator 3.5 or later '
                            '(operator.version is "3.4"); or set it to false to cache the weights without node '
                            'affinity (operator 3.3 and later)')


def test_below_3_3_each_cache_is_refused_naming_its_release(write_config: Callable[..., Path]) -> None:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(_dev("3.2", {"image_cache": {}})))
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert message.endswith('endpoints[0].model_cache.image_cache: true: needs operator 3.3 or later '
                            '(operator.version is "3.2")')


def test_an_unpinned_weights_cache_renders_the_3_3_fields_alone(write_config: Callable[..., Path]) -> None:
    spec = _spec(write_config, "3.3", {"weights_cache": {"pin_to_groups": False, "host_path": "/opt/dlami/nvme/w"}})
    assert spec["modelCacheConfig"] == {"weightsCache": {"enabled": True, "hostPath": "/opt/dlami/nvme/w"}}


def test_no_section_or_disabled_caches_render_nothing(write_config: Callable[..., Path]) -> None:
    assert "modelCacheConfig" not in _spec(write_config, "3.2", {})
    disabled = {"weights_cache": {"enabled": False}, "image_cache": {"enabled": False}}
    assert "modelCacheConfig" not in _spec(write_config, "3.2", disabled)


def test_the_schema_still_refuses_what_the_crd_and_the_row_do_not_declare(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(_dev("3.5", BOTH)))
    [chart] = add_environment_charts(cdk8s.App(), env)
    [iec] = [m for m in chart.to_json() if m["kind"] == "InferenceEndpointConfig"]
    broken = copy.deepcopy(iec)
    broken["spec"]["modelCacheConfig"]["weightsCache"]["sizeGiB"] = 100
    with pytest.raises(ConfigError, match="spec.modelCacheConfig.weightsCache.sizeGiB: .*is not a field of the CRD"):
        validate_manifest(broken, kubernetes_version=env.eks.version)
    broken = copy.deepcopy(iec)
    broken["spec"]["modelCacheConfig"]["weightsCache"]["hostPath"] = "x" * 256
    with pytest.raises(ConfigError, match="hostPath"):
        validate_manifest(broken, kubernetes_version=env.eks.version)


@pytest.mark.parametrize(("path", "why"), [
    ("opt/dlami/nvme", "must be an absolute path"),
    ("/opt/dlami/../nvme", "must be a normal absolute path"),
    ("/opt/dlami/nvme/", "must be a normal absolute path"),
    ("//opt/dlami/nvme", "must be a normal absolute path"),  # normpath keeps a leading '//' (POSIX leaves it open)
    ("/", "root directory"),
    ("/" + "a" * 255, "at most 255 characters"),
])
def test_host_paths_the_node_cannot_use_are_refused(write_config: Callable[..., Path], path: str, why: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(_dev("3.5", {"weights_cache": {"host_path": path}})))
    assert "endpoints[0].model_cache.weights_cache.host_path" in str(raised.value) and why in str(raised.value)


def test_the_weights_cache_needs_local_nvme() -> None:
    cache = ModelCacheConfig(weights_cache=WeightsCacheConfig())
    [issue] = list(cache.issues("ml.m5.xlarge", "endpoints[0].model_cache"))
    assert issue.path == "endpoints[0].model_cache.weights_cache"
    assert "ml.m5.xlarge has no NVMe instance store" in issue.message
    assert list(cache.issues("ml.p5.48xlarge", "endpoints[0].model_cache")) == []
    assert list(ModelCacheConfig().issues("ml.m5.xlarge", "x")) == []


def test_a_value_inside_an_earlier_one_keeps_it() -> None:
    # GIVEN the weights cache's object and then its node affinity, which sits inside it
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    rendered = apply_extensions({"spec": {"modelName": "m"}}, {
        "spec.modelCacheConfig.weightsCache": {"enabled": True, "hostPath": "/opt/dlami/nvme"},
        "spec.modelCacheConfig.weightsCache.nodeAffinity": affinity,
        "spec.modelCacheConfig.imageCache": {"enabled": True}})
    # THEN the parent is created once and neither value overwrites the other
    assert rendered["spec"] == {"modelName": "m", "modelCacheConfig": {
        "weightsCache": {"enabled": True, "hostPath": "/opt/dlami/nvme", "nodeAffinity": affinity},
        "imageCache": {"enabled": True}}}
