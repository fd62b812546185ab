"""GPU capacity across all the endpoints of an environment (hyperpod_dpd.config.capacity.shared_capacity_issues):
the endpoints' replicas (autoscaled roles at their maximum) times their GPUs per pod must fit each group's nodes
(``count``, ``autoscaling.max_nodes``; parked groups hold none), fixed groups included, in one line per mistake."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.capacity import Demand, nodes_needed, placements
from hyperpod_dpd.errors import ConfigError


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == name)


def _endpoints(count: int, **changes: Any) -> Callable[[dict[str, Any]], None]:
    """dev with ``count`` copies of its endpoint, each in its own namespace, and ``changes`` to the groups."""
    def mutate(data: dict[str, Any]) -> None:
        first = data["endpoints"][0]
        data["endpoints"] += [{**copy.deepcopy(first), "name": f"copy-{i}", "namespace": f"team-{i}"}
                              for i in range(1, count)]
        for name, group_changes in changes.items():
            _group(data, name).update(group_changes)
    return mutate


def _refusal(config_dir: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.split("dev.yaml: ", 1)[1]


def test_two_endpoints_on_one_prefill_and_one_decode_node_are_one_line(write_config: Callable[..., Path]) -> None:
    # GIVEN dev's single prefill node and single decode node, and a second endpoint that needs both too
    # WHEN the environment loads
    message = _refusal(write_config(_endpoints(2)))
    # THEN one line names the first group, both endpoints, what they need, and the other group short the same way
    assert message == (
        "hyperpod.instance_groups[1].count: 1: holds 8 GPUs (1 x 8), but the endpoints' replicas on instance group "
        "'prefill' need 16: llama-3-3-70b prefill 1 x 8, copy-1 prefill 1 x 8; an environment's endpoints share its "
        "groups: raise count to 2, or lower the endpoints' replicas, or remove an endpoint; instance group 'decode' "
        "is short too: hyperpod.instance_groups[2].count 1 holds 8 GPUs, they need 16 (llama-3-3-70b decode 1 x 8, "
        "copy-1 decode 1 x 8); raise it to 2")


def test_sixty_endpoints_on_one_node_pair_are_still_one_short_line(write_config: Callable[..., Path]) -> None:
    config_dir = write_config(_endpoints(60))
    started = time.monotonic()
    message = _refusal(config_dir)
    # THEN the line counts what it does not list, and the check stays fast
    assert time.monotonic() - started < 10
    assert "need 480: llama-3-3-70b prefill 1 x 8, copy-1 prefill 1 x 8" in message
    assert "and 54 more; an environment's endpoints share its groups: raise count to 60" in message
    assert len(message) < 1200, len(message)


def test_endpoints_that_fit_the_groups_together_are_accepted(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(_endpoints(2, prefill={"count": 2}, decode={"count": 2})))
    placed = placements(env.hyperpod, env.endpoints)
    assert {name: [d.endpoint for d in demands] for name, demands in placed.by_group.items()} == {
        "prefill": ["llama-3-3-70b", "copy-1"], "decode": ["llama-3-3-70b", "copy-1"]}


def test_an_autoscaled_role_counts_with_its_maximum_replicas_on_a_fixed_group(write_config: Callable[..., Path]) -> None:
    # GIVEN two prefill nodes, one endpoint whose prefill scales 1-2 replicas and a second with one fixed prefill
    def mutate(data: dict[str, Any]) -> None:
        _endpoints(2, prefill={"count": 2}, decode={"count": 2})(data)
        data["endpoints"][0]["prefill"]["autoscaling"] = {
            "min_replicas": 1, "max_replicas": 2, "prometheus": {"query": "q", "target_value": 1}}

    # THEN 3 pods of 8 GPUs at most do not fit 16 GPUs
    assert _refusal(write_config(mutate)).startswith(
        "hyperpod.instance_groups[1].count: 2: holds 16 GPUs (2 x 8), but the endpoints' replicas on instance group "
        "'prefill' need 24 at most: llama-3-3-70b prefill 2 x 8, copy-1 prefill 1 x 8")


def test_a_role_placed_by_label_alone_counts_against_its_only_group(write_config: Callable[..., Path]) -> None:
    # GIVEN one endpoint whose two prefill replicas name no group, on dev's only (fixed, single-node) prefill group
    def mutate(data: dict[str, Any]) -> None:
        prefill = data["endpoints"][0]["prefill"]
        prefill.pop("instance_group")
        prefill["replicas"] = 2

    # THEN they are refused: the group holds one 8-GPU pod
    assert _refusal(write_config(mutate)).startswith(
        "hyperpod.instance_groups[1].count: 1: holds 8 GPUs (1 x 8), but the endpoints' replicas on instance group "
        "'prefill' need 16: llama-3-3-70b prefill 2 x 8")


def test_an_endpoint_refused_on_its_own_is_not_counted_again(write_config: Callable[..., Path]) -> None:
    # GIVEN a second endpoint in the first one's namespace (refused by the endpoint checks)
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"].append({**copy.deepcopy(data["endpoints"][0]), "name": "copy-1"})

    # THEN its line is the only one: the capacity it would need is not reported on top
    assert _refusal(write_config(mutate)).startswith("endpoints[1].namespace: 'llm-serving': already holds endpoints[0]")


def _demand(gpus_per_pod: int, replicas: int) -> Demand:
    return Demand("e", "prefill", gpus_per_pod, replicas, replicas, named=True)


@pytest.mark.parametrize(("demands", "gpn", "nodes"), [
    ([_demand(4, 3), _demand(8, 1)], 8, 3),  # 4+4 | 4 | 8: sizes dividing each other pack without gaps
    ([_demand(1, 9)], 8, 2),
    ([_demand(2, 3), _demand(4, 1)], 8, 2),  # 10 GPUs
    ([_demand(3, 2), _demand(2, 3)], 6, 2),  # sizes that do not divide each other: each on nodes of its own
    ([_demand(8, 10**9)], 8, 10**9),  # arithmetic, not a pod-by-pod loop
])
def test_nodes_needed_packs_pods_that_never_span_nodes(demands: list[Demand], gpn: int, nodes: int) -> None:
    assert nodes_needed(demands, gpn) == nodes
