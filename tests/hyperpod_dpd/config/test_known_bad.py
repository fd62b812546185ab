"""Known-bad is an error (hyperpod_dpd/config/endpoint_image.py): a routing strategy or LMCache mode the endpoint's image cannot
run is refused in one line with the reason and the fix, and an image of the user's own that states the versions it
ships (``image_versions``) lifts the refusal. Doubtful choices that may still work stay warnings."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.catalogue.operator import (
    DEFAULT_WORKER_IMAGE,
    DOCUMENTED_IMAGE_VLLM,
    DPD_WORKER_IMAGES,
    KVAWARE_MIN_LMCACHE,
    KVAWARE_MIN_VLLM,
    at_least,
    component_version_key,
)
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.errors import ConfigError

MINIMAL: dict[str, Any] = {
    "name": "llama",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "prefix": "llama", "region": "us-west-2"}},
    "instance_type": "ml.p5.48xlarge",
}
KVAWARE: dict[str, Any] = {"routing": {"strategy": "kvaware"}, "invocation_path": "v1/completions"}
OWN_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-dpd:0.19.1"
STRATEGIES = "use strategy 'prefixaware', 'session' or 'roundrobin'"


def _endpoint(**changes: Any) -> EndpointConfig:
    return parse_endpoint({**copy.deepcopy(MINIMAL), **changes}, source="config/dev.yaml")


def _refused(**changes: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        _endpoint(**changes)
    return str(raised.value)


# -- refused: what the image is known not to run, or cannot be shown to run ---------------------------------------------

REFUSED: dict[str, tuple[dict[str, Any], str, list[str]]] = {
    # (the change, the line's start, what the line must say: the reason and the fix)
    "kvaware on the default image (vLLM 0.19.0)": (
        KVAWARE, "config/dev.yaml: routing.strategy: 'kvaware': needs vLLM 0.19.1 and LMCache 0.4.3 or later",
        [f"{DEFAULT_WORKER_IMAGE} ships vLLM 0.19.0", STRATEGIES, 'image_versions: {vllm: "0.19.1", lmcache: "0.4.3"}']),
    "kvaware on the default image with its documented versions restated": (
        {**KVAWARE, "image_versions": {"vllm": "0.19.0", "lmcache": "0.4.3"}},
        "config/dev.yaml: routing.strategy: 'kvaware'", [f"{DEFAULT_WORKER_IMAGE} ships vLLM 0.19.0"]),
    "kvaware on the other documented image": (
        {**KVAWARE, "image": "lmcache/vllm-openai:v0.4.3"}, "config/dev.yaml: routing.strategy: 'kvaware': needs vLLM",
        ["lmcache/vllm-openai:v0.4.3 ships vLLM 0.19.0", STRATEGIES]),
    "kvaware on an image of one's own that states nothing": (
        {**KVAWARE, "image": OWN_IMAGE}, "config/dev.yaml: routing.strategy: 'kvaware': needs vLLM",
        [f"hyperpod-dpd cannot tell which vLLM or LMCache {OWN_IMAGE} ships", "image_versions saying so"]),
    "kvaware on an image that states an older vLLM": (
        {**KVAWARE, "image": OWN_IMAGE, "image_versions": {"vllm": "0.18.2", "lmcache": "0.4.3"}},
        "config/dev.yaml: routing.strategy: 'kvaware'", [f"{OWN_IMAGE} ships vLLM 0.18.2", STRATEGIES]),
    "kvaware on an lmcache/vllm-openai tag (its vLLM unknown)": (
        {**KVAWARE, "image": "lmcache/vllm-openai:v0.5.0"}, "config/dev.yaml: routing.strategy: 'kvaware'",
        ["cannot tell which vLLM lmcache/vllm-openai:v0.5.0 ships"]),
    "MultiProcess on the default image (LMCache 0.4.3)": (
        {"lmcache": {"mode": "MultiProcess"}}, "config/dev.yaml: lmcache.mode: 'MultiProcess': needs LMCache 0.5.0",
        [f"{DEFAULT_WORKER_IMAGE} ships LMCache 0.4.3", "use mode 'InProcess'", 'image_versions: {lmcache: "0.5.0"}']),
    "MultiProcess on an image of one's own that states nothing": (
        {"lmcache": {"mode": "MultiProcess"}, "image": OWN_IMAGE}, "config/dev.yaml: lmcache.mode: 'MultiProcess'",
        [f"cannot tell which LMCache {OWN_IMAGE} ships", "use mode 'InProcess'"]),
    "versions that contradict a documented image": (
        {"image_versions": {"vllm": "0.19.1"}}, "config/dev.yaml: image_versions.vllm: '0.19.1'",
        [f"{DEFAULT_WORKER_IMAGE} is a documented DPD image that ships vLLM 0.19.0", "remove image_versions"]),
    "a release candidate cannot lift a gate": (
        {**KVAWARE, "image": OWN_IMAGE, "image_versions": {"vllm": "0.19.1rc1"}},
        "config/dev.yaml: image_versions.vllm: '0.19.1rc1'", ["must be a release version such as '0.19.1'"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_known_bad_choice_is_one_line_with_the_reason_and_the_fix(case: str) -> None:
    change, start, says = REFUSED[case]
    # WHEN the endpoint is built with a choice its image cannot run
    message = _refused(**change)
    # THEN one line names the file, the field and the value, why, and what to do instead
    assert len(message.splitlines()) == 1, message
    assert message.startswith(start), message
    for text in says:
        assert text in message, message


def test_the_documented_images_are_known_to_ship_a_vllm_too_old_for_kvaware() -> None:
    # The fact the refusal rests on (catalogue: the DPD page's image versions against the kvaware matrix)
    assert not at_least(DOCUMENTED_IMAGE_VLLM, KVAWARE_MIN_VLLM)
    assert all(image in DPD_WORKER_IMAGES for image in (DEFAULT_WORKER_IMAGE, "lmcache/vllm-openai:v0.4.3"))
    assert component_version_key("0.3.9post2") == (0, 3, 9, 2) < component_version_key(KVAWARE_MIN_LMCACHE)


# -- lifted: an image of one's own that states what it ships ------------------------------------------------------------

LIFTED: dict[str, dict[str, Any]] = {
    "kvaware with both versions stated": {**KVAWARE, "image": OWN_IMAGE,
                                          "image_versions": {"vllm": "0.19.1", "lmcache": "0.4.3"}},
    "kvaware with a newer post release": {**KVAWARE, "image": OWN_IMAGE,
                                          "image_versions": {"vllm": "0.20.0.post1", "lmcache": "0.5.1"}},
    "kvaware on an lmcache/vllm-openai tag with its vLLM stated": {**KVAWARE, "image": "lmcache/vllm-openai:v0.5.0",
                                                                   "image_versions": {"vllm": "0.19.1"}},
    "MultiProcess with LMCache 0.5.0 stated": {"lmcache": {"mode": "MultiProcess"}, "image": OWN_IMAGE,
                                               "image_versions": {"lmcache": "0.5.0"}},
}


@pytest.mark.parametrize("case", sorted(LIFTED))
def test_an_image_that_states_the_needed_versions_lifts_the_refusal(case: str) -> None:
    # WHEN the endpoint runs an image of its own whose stated versions meet the gate
    endpoint = _endpoint(**LIFTED[case])
    # THEN it is accepted, and the only thing left is the warning that the image is not a documented DPD image
    # (it must ship LMCache, NIXL and the EFA provider, which no configuration can prove)
    assert [w.path for w in endpoint.warnings()] == ["image"]
    assert endpoint.image_versions is not None


def test_documented_versions_stated_as_they_are_are_accepted() -> None:
    # GIVEN the default image with the versions the catalogue knows for it THEN nothing contradicts, nothing warns
    assert _endpoint(image_versions={"vllm": "0.19.0", "lmcache": "0.4.3"}).warnings() == []


# -- in an environment file: the same line, under the endpoint's path ---------------------------------------------------

def _kvaware_in_file(data: dict[str, Any], **extra: Any) -> None:
    endpoint = data["endpoints"][0]
    endpoint.update({**copy.deepcopy(KVAWARE), **extra})


def test_kvaware_on_the_default_image_is_refused_in_the_file(write_config: Callable[..., Path]) -> None:
    # GIVEN dev's endpoint switched to kvaware on the default image
    config_dir = write_config(_kvaware_in_file)
    # WHEN it is loaded THEN one line names the file and the field path under endpoints[0]
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    [line] = str(raised.value).splitlines()
    assert line.startswith(f"{config_dir / 'dev.yaml'}: endpoints[0].routing.strategy: 'kvaware': needs vLLM 0.19.1")


def test_the_override_image_lifts_it_in_the_file_and_leaves_one_warning(write_config: Callable[..., Path]) -> None:
    # GIVEN the same endpoint on an image of one's own that states its versions
    config_dir = write_config(lambda data: _kvaware_in_file(
        data, image=OWN_IMAGE, image_versions={"vllm": "0.19.1", "lmcache": "0.4.3"}))
    # WHEN it is loaded THEN it is accepted, and its warnings carry the endpoint's full path
    env = load_environment("dev", config_dir)
    assert env.endpoints[0].routing.strategy == "kvaware"
    assert [w.path for w in environment_warnings(env) if w.path.startswith("endpoints")] == ["endpoints[0].image"]
