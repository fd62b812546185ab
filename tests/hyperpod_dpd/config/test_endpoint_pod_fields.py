"""Fields of later operators on an endpoint: tolerations (derived from tainted groups), lmcache.mode and pod annotations,
each gated on the operator release that added it, refused in one line below it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import Taint, load_environment
from hyperpod_dpd.config.endpoint_pods import Toleration
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.errors import ConfigError

Mutation = Callable[[dict[str, Any]], None]
MINIMAL: dict[str, Any] = {
    "name": "llama",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "prefix": "llama", "region": "us-west-2"}},
    "instance_type": "ml.p5.48xlarge",
}
PREFILL_TAINT = {"key": "example.com/pool", "value": "prefill", "effect": "NoSchedule"}
DECODE_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}


def _variant(operator: str | None = None, taints: dict[str, list[dict[str, Any]]] | None = None,
             **endpoint: Any) -> Mutation:
    """dev.yaml (operator 3.4, groups 'prefill' and 'decode') with another operator, group taints, endpoint fields."""

    def mutate(data: dict[str, Any]) -> None:
        if operator is not None:
            data["operator"]["version"] = operator
        for group in data["hyperpod"]["instance_groups"]:
            group["taints"] = copy.deepcopy((taints or {}).get(group["name"], []))
        data["endpoints"][0].update(copy.deepcopy(endpoint))

    return mutate


TAINTED = {"prefill": [PREFILL_TAINT], "decode": [DECODE_TAINT]}


def _error(write_config: Callable[..., Path], mutate: Mutation) -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(mutate))
    return str(raised.value)


# --- tolerations -------------------------------------------------------------------------------------------------------

def test_tainted_gpu_groups_give_both_roles_matching_tolerations_on_operator_3_7(write_config: Callable[..., Path]) -> None:
    # GIVEN dev with a tainted prefill group and a tainted decode group, on operator 3.7
    env = load_environment("dev", write_config(_variant("3.7", TAINTED)))
    # WHEN the endpoint is resolved for its environment
    endpoint = env.endpoints[0].for_environment(env)
    # THEN it tolerates the taint of each role's group: Equal for a taint with a value, Exists for one without
    assert [t.manifest() for t in endpoint.tolerations or ()] == [
        {"key": "example.com/pool", "operator": "Equal", "value": "prefill", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # AND the configured endpoint itself keeps "derive" (no list of its own)
    assert env.endpoints[0].tolerations is None


def test_the_same_tainted_groups_on_operator_3_4_are_refused_in_one_line(write_config: Callable[..., Path]) -> None:
    message = _error(write_config, _variant(None, TAINTED))
    assert message.endswith(
        "dev.yaml: endpoints[0].tolerations: missing: instance groups 'prefill' (prefill: "
        "example.com/pool=prefill:NoSchedule), 'decode' (decode: nvidia.com/gpu:NoSchedule) taint their nodes, so "
        "the endpoint's pods need tolerations, which need operator 3.7 or later (operator.version is \"3.4\"); set "
        "operator.version to \"3.7\" or later, or remove the taints")
    assert len(message.splitlines()) == 1


def test_untainted_groups_need_no_tolerations_on_any_operator(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(_variant("3.4")))
    assert env.endpoints[0].for_environment(env).tolerations == ()


def test_a_soft_taint_does_not_block_an_older_operator_and_is_tolerated_on_3_7(write_config: Callable[..., Path]) -> None:
    soft = {"decode": [{"key": "example.com/busy", "effect": "PreferNoSchedule"}]}
    # GIVEN only a PreferNoSchedule taint, which discourages but does not forbid scheduling
    old = load_environment("dev", write_config(_variant("3.4", soft)))
    # THEN operator 3.4 loads and renders no tolerations, while 3.7 tolerates the taint too
    assert old.endpoints[0].for_environment(old).tolerations == ()
    new = load_environment("dev", write_config(_variant("3.7", soft)))
    assert [t.manifest() for t in new.endpoints[0].for_environment(new).tolerations or ()] == [
        {"key": "example.com/busy", "operator": "Exists", "effect": "PreferNoSchedule"}]


def test_a_role_without_an_instance_group_tolerates_every_group_of_its_role(write_config: Callable[..., Path]) -> None:
    def second_prefill_group(data: dict[str, Any]) -> None:
        _variant("3.7", {"prefill": [PREFILL_TAINT]}, prefill={"replicas": 1})(data)
        data["hyperpod"]["instance_groups"].append({"name": "prefill-b", "role": "prefill", "instance_type": "ml.p5.48xlarge",
                                                    "count": 1, "taints": [{"key": "example.com/batch", "effect": "NoExecute"}]})

    env = load_environment("dev", write_config(second_prefill_group))
    keys = [t.key for t in env.endpoints[0].for_environment(env).tolerations or ()]
    assert keys == ["example.com/pool", "example.com/batch"]


def test_an_explicit_list_replaces_the_derived_tolerations(write_config: Callable[..., Path]) -> None:
    everything = [{"operator": "Exists"}]
    env = load_environment("dev", write_config(_variant("3.7", TAINTED, tolerations=everything)))
    assert [t.manifest() for t in env.endpoints[0].for_environment(env).tolerations or ()] == [{"operator": "Exists"}]


def test_an_explicit_list_that_misses_a_group_taint_is_refused(write_config: Callable[..., Path]) -> None:
    only_prefill = [{"key": "example.com/pool", "value": "prefill", "effect": "NoSchedule"}]
    message = _error(write_config, _variant("3.7", TAINTED, tolerations=only_prefill))
    assert "dev.yaml: endpoints[0].tolerations: [{'key': 'example.com/pool', 'operator': 'Equal', " in message
    assert message.endswith(": does not tolerate the taints of instance group 'decode' (decode: nvidia.com/gpu:NoSchedule), "
                            "so those pods cannot schedule there; add matching tolerations, or leave tolerations out "
                            "to derive them from the groups' taints")
    assert len(message.splitlines()) == 1


def test_explicit_tolerations_on_operator_3_4_need_operator_3_7(write_config: Callable[..., Path]) -> None:
    message = _error(write_config, _variant(None, TAINTED, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]))
    assert message.endswith("dev.yaml: endpoints[0].tolerations: [{'key': 'nvidia.com/gpu', 'operator': 'Exists'}]: "
                            'needs operator 3.7 or later (operator.version is "3.4")')
    assert len(message.splitlines()) == 1


def test_an_explicit_empty_list_on_tainted_groups_below_3_7_is_refused_as_well(write_config: Callable[..., Path]) -> None:
    message = _error(write_config, _variant("3.6", TAINTED, tolerations=[]))
    assert "endpoints[0].tolerations: []: instance groups 'prefill'" in message
    assert '(operator.version is "3.6")' in message


# --- lmcache.mode and pod annotations: gated on their release ---------------------------------------------------------

@pytest.mark.parametrize(("operator", "fields", "refused"), [
    ("3.6", {"lmcache": {"mode": "InProcess"}}, "endpoints[0].lmcache.mode: 'InProcess': needs operator 3.7 or later "
                                                '(operator.version is "3.6")'),
    ("3.5", {"pod_annotations": {"example.com/team": "llm"}},
     "endpoints[0].pod_annotations: {'example.com/team': 'llm'}: needs operator 3.6 or later "
     '(operator.version is "3.5")'),
    ("3.6", {"pod_annotations": {"example.com/team": "llm"}}, None),
    ("3.7", {"lmcache": {"mode": "InProcess"}, "pod_annotations": {"example.com/team": "llm"}}, None),
])
def test_later_fields_load_from_their_release_on_and_are_refused_below(write_config: Callable[..., Path], operator: str,
                                                                      fields: dict[str, Any], refused: str | None) -> None:
    mutate = _variant(operator, **fields)
    if refused is None:
        endpoint = load_environment("dev", write_config(mutate)).endpoints[0]
        assert endpoint.pod_annotations == fields.get("pod_annotations", {})
    else:
        message = _error(write_config, mutate)
        assert message.endswith(refused) and len(message.splitlines()) == 1


def test_multiprocess_needs_lmcache_0_5_which_the_documented_images_do_not_ship() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_endpoint({**MINIMAL, "lmcache": {"mode": "MultiProcess"}})
    assert str(raised.value) == (
        "endpoint: lmcache.mode: 'MultiProcess': needs LMCache 0.5.0 or later, but "
        "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1 ships LMCache 0.4.3; use mode "
        "'InProcess', or an image with LMCache 0.5.0 or later and image_versions.lmcache saying so "
        "(image_versions: {lmcache: \"0.5.0\"})")


def test_multiprocess_on_an_image_whose_lmcache_is_unknown_is_refused() -> None:
    # GIVEN an image of one's own whose LMCache nobody states WHEN it runs MultiProcess THEN refused (fail safe)
    with pytest.raises(ConfigError, match="cannot tell which LMCache example.com/vllm:custom ships"):
        parse_endpoint({**MINIMAL, "image": "example.com/vllm:custom", "lmcache": {"mode": "MultiProcess"}})


def test_multiprocess_on_an_lmcache_0_5_image_is_accepted_without_an_lmcache_warning() -> None:
    endpoint = parse_endpoint({**MINIMAL, "image": "lmcache/vllm-openai:v0.5.0", "lmcache": {"mode": "MultiProcess"}})
    assert endpoint.lmcache is not None and endpoint.lmcache.mode == "MultiProcess"
    assert [w.path for w in endpoint.warnings()] == ["image"]  # not a documented DPD image; LMCache itself is fine


# --- bad input, one line each -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "expected"), [
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]},
     "tolerations[0]: {'key': 'a', 'operator': 'Exists', 'value': 'b'}: operator 'Exists' matches any value"),
    ({"tolerations": [{"value": "b"}]}, "tolerations[0]: {'value': 'b'}: operator 'Equal' needs a 'key'"),
    ({"tolerations": [{"key": "a", "effect": "NoRun"}]}, "tolerations[0].effect: 'NoRun': Input should be"),
    ({"tolerations": [{"key": "bad key"}]}, "tolerations[0].key: 'bad key': must be a Kubernetes taint key"),
    ({"lmcache": {"mode": "Both"}}, "lmcache.mode: 'Both': Input should be 'InProcess' or 'MultiProcess'"),
    ({"lmcache": {}}, "lmcache.mode: missing:"),
    ({"pod_annotations": {"team name": "llm"}}, "pod_annotations: {'team name': 'llm'}: annotation key 'team name'"),
    ({"pod_annotations": {"example.com/replicas": 2}}, "pod_annotations.example.com/replicas: 2: Input should be a valid string"),
    ({"pod_annotations": {"example.com/blob": "x" * 262_144}}, "annotations total 262160 bytes; Kubernetes allows 262144"),
])
def test_bad_later_fields_are_refused_in_one_line(fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_endpoint({**MINIMAL, **fields})
    message = str(raised.value)
    assert expected in message and len(message.splitlines()) == 1, message


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [
    ({"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),  # no effect: every effect
    ({"key": "k", "value": "w"}, {"key": "k", "value": "v"}, False),
    ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"key": "k", "value": "v"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "k", "value": "v"}, False),
    ({"key": "other", "operator": "Exists"}, {"key": "k"}, False),
    ({"operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),  # no key: every taint
    ({"key": "k"}, {"key": "k"}, True),  # Equal with no value matches a taint without one
])
def test_a_toleration_matches_taints_as_kubernetes_does(toleration: dict[str, Any], taint: dict[str, Any],
                                                        tolerated: bool) -> None:
    assert Toleration.model_validate(toleration).tolerates(Taint.model_validate(taint)) is tolerated
