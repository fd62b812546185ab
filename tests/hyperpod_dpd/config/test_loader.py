"""Loading config/<env>.yaml: the committed files load; each kind of bad input fails with one precise line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import EnvironmentConfig, list_environments, load_all, load_environment
from hyperpod_dpd.errors import ConfigError

Mutation = Callable[[dict[str, Any]], None]


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == name)


def test_committed_environments_load() -> None:
    # WHEN every committed environment is loaded
    envs = load_all()
    # THEN each is typed, named after its file, and immutable
    assert [e.name for e in envs] == ["dev", "prod", "staging"]
    assert all(isinstance(e, EnvironmentConfig) for e in envs)
    with pytest.raises(Exception):
        envs[0].account = "999999999999"  # type: ignore[misc]
    assert list_environments() == ["dev", "prod", "staging"]


def test_defaults_are_resolved_when_fields_are_omitted(write_config: Callable[..., Path]) -> None:
    def strip(data: dict[str, Any]) -> None:
        del data["eks"]["version"]
        del data["hyperpod"]["node_recovery"]
        del _group(data, "prefill")["ebs_volume_gb"]

    env = load_environment("dev", write_config(strip))
    assert env.eks.version == "1.34"
    assert env.hyperpod.node_recovery == "Automatic"
    prefill = env.hyperpod.groups("prefill")[0]
    assert prefill.ebs_volume_gb == 500
    assert prefill.effective_deep_health_checks == ("InstanceStress", "InstanceConnectivity")
    assert env.hyperpod.groups("system")[0].effective_deep_health_checks == ()


# Each case: a mutation of config/dev.yaml, the field path it must name, the bad value, and words of the allowed set.
BAD_INPUT: dict[str, tuple[Mutation, str, str, str]] = {
    "unknown key": (
        lambda d: d["eks"].__setitem__("verison", "1.35"),
        "eks.verison", "'verison'", "unknown key; allowed keys here: cluster_name, version"),
    "prefill group on a type that is not DPD-capable": (
        lambda d: _group(d, "prefill").__setitem__("instance_type", "ml.m7i.4xlarge"),
        "hyperpod.instance_groups[1].instance_type", "'ml.m7i.4xlarge'",
        "needs a DPD-capable EFA GPU type; allowed: ml.p5.48xlarge"),
    "decode group on an unknown type": (
        lambda d: _group(d, "decode").__setitem__("instance_type", "ml.g5.48xlarge"),
        "hyperpod.instance_groups[2].instance_type", "'ml.g5.48xlarge'",
        "a decode group needs a DPD-capable EFA GPU type; allowed: ml.p5.48xlarge"),
    "count below 1": (
        lambda d: _group(d, "decode").__setitem__("count", -1),
        "hyperpod.instance_groups[2].count", "-1", "greater than or equal to 0"),
    "minimum above the count": (
        lambda d: _group(d, "prefill").update(count=1, min_count=2),
        "hyperpod.instance_groups[1].min_count", "2", "must not exceed count (1)"),
    "GPU groups in two AZs": (
        lambda d: _group(d, "decode").__setitem__("availability_zone", "us-west-2b"),
        "hyperpod.instance_groups[2].availability_zone", "'us-west-2b'",
        "GPU groups must share one AZ for EFA KV transfer: network.gpu_availability_zone (us-west-2a)"),
    "EKS version out of range": (
        lambda d: d["eks"].__setitem__("version", "1.29"),
        "eks.version", "'1.29'", "must be one of 1.30, 1.31, 1.32, 1.33, 1.34, 1.35"),
    "EKS version written as a YAML number": (
        lambda d: d["eks"].__setitem__("version", 1.3),
        "eks.version", "1.3", "must be a quoted string"),
    "malformed account id": (
        lambda d: d.__setitem__("account", "11111111111"),
        "account", "'11111111111'", "must be a 12-digit AWS account id"),
    "malformed region": (
        lambda d: d.__setitem__("region", "us-west"),
        "region", "'us-west'", "must be an AWS Region code such as 'us-west-2'"),
    "region without HyperPod": (
        lambda d: d.__setitem__("region", "eu-west-3"),
        "region", "'eu-west-3'", "SageMaker HyperPod (AWS::SageMaker::Cluster) is not available there"),
    "duplicate group name": (
        lambda d: _group(d, "decode").__setitem__("name", "prefill"),
        "hyperpod.instance_groups[2].name", "'prefill'", "duplicate instance group name (also instance_groups[1])"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_fails_with_one_line_naming_file_field_value_and_allowed(
        case: str, write_config: Callable[..., Path]) -> None:
    mutate, path, value, allowed = BAD_INPUT[case]
    # GIVEN dev.yaml with one bad field
    config_dir = write_config(mutate)
    # WHEN it is loaded
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    # THEN exactly one line names the file, the field path, the value and what is allowed
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"{config_dir / 'dev.yaml'}: {path}: ") or message.startswith(f"config/dev.yaml: {path}: ") \
        or re.match(rf".*dev\.yaml: {re.escape(path)}: ", message), message
    assert value in message and allowed in message, message


def test_missing_environment_file_names_the_available_ones(write_config: Callable[..., Path]) -> None:
    config_dir = write_config()
    with pytest.raises(ConfigError) as raised:
        load_environment("qa", config_dir)
    message = str(raised.value)
    assert "qa.yaml: <file>: 'qa': no such environment file; available environments: dev" in message
    assert len(message.splitlines()) == 1


def test_duplicate_yaml_key_is_an_error_not_a_silent_overwrite(write_config: Callable[..., Path]) -> None:
    config_dir = write_config(raw="account: '111111111111'\naccount: '222222222222'\n")
    with pytest.raises(ConfigError, match=r"dev\.yaml: line 2: \"account: '222222222222'\": invalid YAML: duplicate key 'account'"):
        load_environment("dev", config_dir)


def test_a_file_that_is_not_a_mapping_is_rejected(write_config: Callable[..., Path]) -> None:
    with pytest.raises(ConfigError, match=r"<root>: \['a', 'b'\]: must be a mapping"):
        load_environment("dev", write_config(raw="- a\n- b\n"))


def test_several_problems_are_all_reported_one_per_line(write_config: Callable[..., Path]) -> None:
    def two(data: dict[str, Any]) -> None:
        data["account"] = "x"
        _group(data, "decode")["count"] = -1

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(two))
    assert [i.path for i in raised.value.issues] == ["account", "hyperpod.instance_groups[2].count"]


@pytest.mark.parametrize(("key", "meant"), [("ebs_volum_gb", "'ebs_volume_gb'"), ("instnace_type", "'instance_type'"),
                                            ("colour", None)])
def test_a_misspelt_key_names_the_key_it_was_meant_to_be(key: str, meant: str | None,
                                                         write_config: Callable[..., Path]) -> None:
    # GIVEN dev.yaml whose prefill group has a key that is not a field: a misspelling of one, or nothing like any
    def mutate(data: dict[str, Any]) -> None:
        group = _group(data, "prefill")
        group[key] = group.pop("instance_type") if key == "instnace_type" else 1

    config_dir = write_config(mutate)
    # WHEN it is loaded
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    # THEN the unknown key's line lists the allowed keys and, when one is close, names it as the likely meaning
    line = next(li for li in str(raised.value).splitlines() if f"instance_groups[1].{key}: " in li)
    assert "unknown key; allowed keys here: name, role, instance_type, count" in line, line
    assert line.endswith(f"; did you mean {meant}?") if meant else "did you mean" not in line, line
