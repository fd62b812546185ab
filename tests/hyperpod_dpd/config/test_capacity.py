"""Capacity-aware scaling in the configuration: HyperPod autoscaling (Karpenter) bounds per GPU group, endpoint demand
against the groups' maximum nodes, and the prefill:decode replica ratio. The one-line refusals of the file path are
rows of test_bad_input_matrix.py; the accepted layouts, the semantics and the Python path are here."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.capacity import DEFAULT_RATIO, placements
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.errors import ConfigError


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == name)


def _scaling(minimum: int, maximum: int) -> dict[str, Any]:
    return {"min_replicas": minimum, "max_replicas": maximum, "prometheus": {"query": "q", "target_value": 1}}


def _autoscale(data: dict[str, Any], name: str, **bounds: Any) -> None:
    data["hyperpod"]["autoscaling"] = {"enabled": True}
    _group(data, name).update(count=0, autoscaling=bounds)


def _refusal(write_config: Callable[..., Path], mutate: Callable[[dict[str, Any]], None]) -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(mutate))
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.split("dev.yaml: ", 1)[1]


# -- HyperPod autoscaling ------------------------------------------------------------------------------------------------

def test_an_autoscaled_prefill_group_takes_the_endpoints_maximum_replicas(write_config: Callable[..., Path]) -> None:
    # GIVEN cluster autoscaling, prefill sized 1-3 nodes by Karpenter and the prefill role scaling 1-3 replicas by KEDA
    def scaled(data: dict[str, Any]) -> None:
        _autoscale(data, "prefill", min_nodes=1, max_nodes=3)
        data["endpoints"][0]["prefill"]["autoscaling"] = _scaling(1, 3)

    env = load_environment("dev", write_config(scaled))
    # THEN it loads: the group starts at 0 nodes, is not parked, can grow to 3 and skips the deep health checks
    prefill = env.hyperpod.groups("prefill")[0]
    assert (prefill.count, prefill.parked, prefill.autoscaled, prefill.max_nodes) == (0, False, True, 3)
    assert prefill.effective_deep_health_checks == ()
    assert env.hyperpod.autoscaling is not None and env.hyperpod.autoscaling.consolidate_after_minutes == 10
    # AND the endpoint's roles land on their groups with their minimum and maximum replicas
    placed = placements(env.hyperpod, env.endpoints)
    assert [(d.min_replicas, d.max_replicas, d.max_gpus) for d in placed.by_group["prefill"]] == [(1, 3, 24)]
    assert [(d.min_replicas, d.max_replicas) for d in placed.by_group["decode"]] == [(1, 1)]


def test_endpoints_share_an_autoscaled_group_within_its_maximum(write_config: Callable[..., Path]) -> None:
    # GIVEN two endpoints on the same groups, prefill autoscaled to 2 nodes and decode fixed at 2
    def shared(data: dict[str, Any]) -> None:
        _autoscale(data, "prefill", max_nodes=2)
        _group(data, "decode")["count"] = 2
        data["endpoints"].append({**copy.deepcopy(data["endpoints"][0]), "name": "second", "namespace": "team-b"})

    env = load_environment("dev", write_config(shared))
    # THEN both fit: 2 x 8 GPUs of maximum demand on 2 x 8 GPUs
    assert [d.endpoint for d in placements(env.hyperpod, env.endpoints).by_group["prefill"]] == ["llama-3-3-70b", "second"]


def test_autoscaling_can_be_switched_off_once_no_group_autoscales(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(lambda d: d["hyperpod"].__setitem__("autoscaling", {"enabled": False})))
    assert env.hyperpod.autoscaling is not None and not env.hyperpod.autoscaling.enabled


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: (_autoscale(d, "prefill", max_nodes=2), _group(d, "prefill").update(labels={"node.k8s.io/pool": "a"})),
     "hyperpod.instance_groups[1].labels.node.k8s.io/pool: 'a': label domain 'k8s.io' is restricted on Karpenter "
     "NodePools (the group's NodePool carries its labels); use another label domain"),
    (lambda d: (_autoscale(d, "prefill", max_nodes=2), d["hyperpod"].__setitem__("node_recovery", "None")),
     "hyperpod.node_recovery: 'None': must be 'Automatic' when hyperpod.autoscaling is enabled"),
    (lambda d: (_autoscale(d, "prefill", max_nodes=2), _group(d, "prefill").__setitem__(
        "training_plan_arn", "arn:aws:sagemaker:us-west-2:111111111111:training-plan/p5-plan")),
     "hyperpod.instance_groups[1].training_plan_arn: 'arn:aws:sagemaker:us-west-2:111111111111:training-plan/p5-plan': "
     "autoscaling uses on-demand capacity only; a group with a training plan cannot autoscale"),
    (lambda d: (_autoscale(d, "prefill", max_nodes=2),
                d["hyperpod"]["instance_groups"].append({**copy.deepcopy(_group(d, "prefill")), "name": "Prefill"})),
     "hyperpod.instance_groups[3].name: 'Prefill': differs from autoscaled group 'prefill' only in case; their "
     "Karpenter resources (lower-case Kubernetes names) would collide"),
], ids=["restricted label domain", "manual node recovery", "training plan", "names equal but for case"])
def test_what_karpenter_autoscaling_does_not_support_is_refused(write_config: Callable[..., Path],
                                                                mutate: Callable[[dict[str, Any]], None],
                                                                expected: str) -> None:
    assert _refusal(write_config, mutate) == expected


def test_a_role_placed_by_label_counts_against_every_group_of_its_role(write_config: Callable[..., Path]) -> None:
    # GIVEN two prefill groups (one fixed node, one autoscaled to 1 node) and a prefill role placed by label, 3 at most
    def pooled(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"].append({**copy.deepcopy(_group(data, "prefill")), "name": "prefill-burst"})
        _autoscale(data, "prefill-burst", max_nodes=1)
        prefill = data["endpoints"][0]["prefill"]
        prefill.pop("instance_group")
        prefill["autoscaling"] = _scaling(1, 3)

    # THEN the pool of 2 nodes (16 GPUs) cannot hold 3 replicas of 8 GPUs
    assert _refusal(write_config, pooled) == (
        "hyperpod.instance_groups[3].autoscaling.max_nodes: 1: the prefill groups 'prefill', 'prefill-burst' hold 16 "
        "GPUs at most, but the endpoints' maximum replicas on them need 24: llama-3-3-70b prefill 3 x 8; raise their "
        "maximum nodes or lower max_replicas")


# -- prefill:decode ratio ------------------------------------------------------------------------------------------------

def _endpoint(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "llama", "instance_type": "ml.p5.48xlarge",
                            "model": {"name": "m", "s3": {"bucket": "models-bucket", "region": "us-west-2"}}}
    return {**base, **changes}


@pytest.mark.parametrize("change", [
    {"prefill": {"replicas": 4}},
    {"prefill": {"replicas": 2, "autoscaling": _scaling(1, 4)}},
    {"prefill": {"autoscaling": _scaling(0, 2)}, "decode": {"autoscaling": _scaling(0, 1)}},  # both scale to zero
    {"decode": {"replicas": 2, "allow_multiple_replicas": True}},  # the default applies to the single decoder only
    {"prefill": {"replicas": 6}, "ratio": {"min": 2, "max": 6}},
    {"prefill": {"autoscaling": _scaling(0, 2)}, "ratio": {"min": 0, "max": 2}},
])
def test_ratios_within_the_bounds_are_accepted(change: dict[str, Any]) -> None:
    parse_endpoint(_endpoint(**change))


@pytest.mark.parametrize(("change", "path", "value", "message"), [
    ({"prefill": {"autoscaling": _scaling(0, 2)}}, "prefill.autoscaling.min_replicas", "0",
     "at the minimum replicas, 0 prefill per 1 decode (ratio 0) is outside the default ratio"),
    ({"decode": {"replicas": 2, "allow_multiple_replicas": True}, "ratio": {"min": 1, "max": 4}}, "prefill.replicas",
     "1", "at the fixed replicas, 1 prefill per 2 decode (ratio 0.5) is outside ratio: 1 to 4 prefill per decode"),
    ({"ratio": {"min": 0.5, "max": 0}}, "ratio.max", "0", "greater than 0"),
])
def test_ratios_outside_the_bounds_are_one_line(change: dict[str, Any], path: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_endpoint(_endpoint(**change), source="endpoint llama")
    text = str(raised.value)
    assert len(text.splitlines()) == 1, text
    assert text.startswith(f"endpoint llama: {path}: {value}: ") and message in text, text


def test_the_default_ratio_follows_the_documented_guidance() -> None:
    # 1:1 for balanced traffic up to 3:1 prefill-heavy (one step of burst room beyond), one prefiller per decoder at least
    assert (DEFAULT_RATIO.min, DEFAULT_RATIO.max) == (1, 4)


def test_a_capacity_refusal_leaves_the_endpoints_own_group_checks_running(write_config: Callable[..., Path]) -> None:
    # GIVEN an autoscaled prefill group too small for the endpoint's maximum replicas, and a decode role naming a
    # group that does not exist
    def both(data: dict[str, Any]) -> None:
        _autoscale(data, "prefill", min_nodes=0, max_nodes=1)
        data["endpoints"][0]["prefill"]["autoscaling"] = _scaling(1, 3)
        data["endpoints"][0]["decode"]["instance_group"] = "nosuchgroup"

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(both))
    # THEN both problems are reported, each once: the shared capacity check does not silence the endpoint's checks
    lines = str(raised.value).splitlines()
    assert len([line for line in lines if "prefill.autoscaling.max_replicas" in line]) == 1, lines
    assert len([line for line in lines if "decode.instance_group" in line]) == 1, lines
