"""Parked GPU groups: ``count: 0`` keeps a prefill or decode group in the cluster with no instances
(``AWS::SageMaker::Cluster`` allows ``InstanceCount: 0``). The system group keeps a node, and no endpoint may need
nodes of a parked group; the refusals are rows of test_bad_input_matrix.py, the accepted layouts are here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hyperpod_dpd.config import InstanceGroup, load_environment
from hyperpod_dpd.errors import ConfigError


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == name)


def test_prefill_and_decode_groups_can_be_parked_when_no_endpoint_needs_them(write_config: Callable[..., Path]) -> None:
    # GIVEN dev with both GPU groups at count 0 (one with min_count 0) and its endpoint removed
    def park(data: dict[str, Any]) -> None:
        _group(data, "prefill")["count"] = 0
        _group(data, "decode").update(count=0, min_count=0)
        del data["endpoints"]

    env = load_environment("dev", write_config(park))
    # THEN it loads; the groups stay in the config, parked, and the system group keeps its nodes
    groups = {g.name: g for g in env.hyperpod.instance_groups}
    assert [(n, g.count, g.parked) for n, g in groups.items()] == [
        ("system", 2, False), ("prefill", 0, True), ("decode", 0, True)]
    assert groups["decode"].min_count == 0
    assert groups["prefill"].effective_deep_health_checks == ("InstanceStress", "InstanceConnectivity")


def test_an_endpoint_runs_on_the_active_group_while_another_group_of_its_role_is_parked(
        write_config: Callable[..., Path]) -> None:
    # GIVEN a second decode group that is parked, and the endpoint on the first
    def spare(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"].append(dict(_group(data, "decode"), name="decode-spare", count=0))

    env = load_environment("dev", write_config(spare))
    assert env.endpoints[0].decode.instance_group == "decode"
    assert [g.name for g in env.hyperpod.groups("decode") if g.parked] == ["decode-spare"]


def test_an_endpoint_placed_by_role_alone_is_fine_while_one_group_of_the_role_has_nodes(
        write_config: Callable[..., Path]) -> None:
    # GIVEN two prefill groups, one parked, and the endpoint's prefill role placed by its role label only
    def by_role(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"].append(dict(_group(data, "prefill"), name="prefill-spare", count=0))
        del data["endpoints"][0]["prefill"]["instance_group"]

    env = load_environment("dev", write_config(by_role))
    assert env.endpoints[0].prefill.instance_group is None


def test_moving_an_endpoint_onto_a_parked_group_names_the_endpoint_field_the_value_and_the_group(
        write_config: Callable[..., Path]) -> None:
    # GIVEN a parked decode group 'decode-spare' and the endpoint's decoder moved onto it
    def moved(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"].append(dict(_group(data, "decode"), name="decode-spare", count=0))
        data["endpoints"][0]["decode"]["instance_group"] = "decode-spare"

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(moved))
    # THEN one line: the replicas field, its value, and the parked group
    (line,) = str(raised.value).splitlines()
    assert line.endswith("dev.yaml: endpoints[0].decode.replicas: 1: needs 1 node of instance group 'decode-spare', "
                         "which is parked (count 0); set the group's count, or remove the endpoint while the group is "
                         "parked")


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_gpu_group_built_in_python_may_have_count_zero(role: str) -> None:
    group = InstanceGroup(name=role, role=role, instance_type="ml.p5.48xlarge", count=0, min_count=0)
    assert (group.count, group.parked) == (0, True)


def test_a_system_group_built_in_python_keeps_a_node() -> None:
    with pytest.raises(ValidationError, match="a system group must keep at least 1 node"):
        InstanceGroup(name="system", role="system", instance_type="ml.m7i.2xlarge", count=0)
    assert InstanceGroup(name="system", role="system", instance_type="ml.m7i.2xlarge", count=1).count == 1
