"""Room for a second generation: the GPUs the running nodes have free, and the nodes autoscaled groups may still add
(``autoscaling.max_nodes`` minus the nodes they run, less what pending pods already wait for)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.rollout import Promotion
from hyperpod_dpd.ops.rollout_room import room, room_problem
from tests.fakes import kube_api
from tests.hyperpod_dpd.ops import rollout_cluster as rc


def _autoscaled(data: dict[str, Any]) -> None:
    """Karpenter sizes both GPU groups between 0 and 2 nodes."""
    data["hyperpod"]["autoscaling"] = {"enabled": True}
    data["hyperpod"]["node_provisioning_mode"] = "Continuous"
    for group in data["hyperpod"]["instance_groups"]:
        if group["role"] != "system":
            group.update(count=0, autoscaling={"max_nodes": 2})


ENV = rc.environment(_autoscaled)
FIXED = rc.environment()
ENDPOINT = ENV.endpoints[0]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    """The serving generation fills the one node Karpenter runs per group; no free node."""
    with rc.serving(ENDPOINT, {}, tmp_path) as (fake, kube):
        fake.nodes = [n for n in fake.nodes if not n["metadata"]["name"].endswith("-1")]
        yield fake, kube


def test_autoscaled_groups_count_the_nodes_karpenter_may_still_add(cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    _, kube = cluster
    # WHEN the room beside the serving generation is measured
    rooms = {r.role: r for r in room(kube, ENDPOINT, ENV.hyperpod.instance_groups)}
    # THEN no running node has room, but each group may add one more p5 node (2 max, 1 running): one 8-GPU pod
    for role in ("prefill", "decode"):
        assert (rooms[role].fits, rooms[role].may_add_nodes, rooms[role].may_add_pods) == (0, 1, 1)
        assert rooms[role].groups == (role,) and rooms[role].enough and rooms[role].waits_for_nodes
    # AND with the groups fixed at their count, the same cluster has no room
    assert room_problem(room(kube, ENDPOINT, FIXED.hyperpod.instance_groups), 8) is not None


def test_pods_already_waiting_for_new_nodes_take_that_room(cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    fake, kube = cluster
    # GIVEN another 8-GPU pod pending for a decode node (Karpenter will launch its node first)
    waiting = kube_api.pod("batch-0", namespace="batch", node_name=None, gpus=8, phase="Pending")
    waiting["spec"]["nodeSelector"] = {"hyperpod-dpd/instance-group": "decode"}
    fake.pods.append(waiting)
    # WHEN the room is measured
    rooms = room(kube, ENDPOINT, ENV.hyperpod.instance_groups)
    # THEN decode has none left, and the refusal says what Karpenter may add
    problem = room_problem(rooms, ENDPOINT.gpus_per_pod)
    assert problem is not None and "decode: 0 free GPU(s) on 1 node(s), and Karpenter may add 1 node(s) of " \
                                   "decode for 0 pod(s), 1 pod(s) of 8 GPU(s) needed" in problem
    assert "prefill" not in problem


def test_a_promote_on_nodes_karpenter_may_add_says_the_pods_wait_for_them(
        cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    fake, kube = cluster
    manifest = rc.chart_objects(ENV, ENDPOINT)["iec"]

    def karpenter(fake: kube_api.FakeKube, document: dict[str, Any]) -> None:  # the nodes arrive, the pods run
        fake.nodes += [kube_api.node("p5-prefill-1", role="prefill"), kube_api.node("p5-decode-1", role="decode")]
        bring_up(fake, document)

    bring_up, fake.on_iec_created = fake.on_iec_created, karpenter
    # WHEN the configured generation is promoted
    result = Promotion(kube=kube, endpoint=ENDPOINT, manifest=lambda: copy.deepcopy(manifest),
                       checks=lambda iec, keep: [], groups=ENV.hyperpod.instance_groups, drain_seconds=0).run()
    # THEN it went ahead, saying that the new pods stay Pending until Karpenter adds the nodes
    assert result.outcome == "promoted", result.message
    assert "room: prefill has room for 0 of 1 pod(s) on its nodes; Karpenter may add 1 node(s) of prefill: the " \
           "new pods stay Pending until it does" in result.steps
    assert result.to_json()["room"][1] == {"role": "decode", "nodes": 1, "free_gpus": 0, "fits": 0, "needed": 1,
                                           "may_add_nodes": 1, "may_add_pods": 1, "autoscaled_groups": ["decode"]}
