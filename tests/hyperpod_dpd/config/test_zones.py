"""Zones in the configuration: every zone field checked against the Region's zones, the GPU zone by name or AZ ID."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.errors import ConfigError
from tests.paths import ROOT

ADOPTED = ROOT / "tests" / "fixtures" / "adopted" / "config" / "adopted.yaml"
US_WEST_2 = "us-west-2a, us-west-2b, us-west-2c, us-west-2d (names) or usw2-az1, usw2-az2, usw2-az3, usw2-az4 (IDs)"


@pytest.fixture
def parse(base_configs: dict[str, dict[str, Any]]) -> Callable[..., EnvironmentConfig]:
    """The fixture dev environment (tests/fixtures/config/dev.yaml), mutated, parsed as the loader does."""

    def make(mutate: Callable[[dict[str, Any]], None], *, env: str = "dev") -> EnvironmentConfig:
        data = copy.deepcopy(base_configs[env])
        mutate(data)
        return parse_environment(data, name=env, source=f"{env}.yaml", base_dir=ROOT)

    return make


def _error(parse: Callable[..., EnvironmentConfig], mutate: Callable[[dict[str, Any]], None]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(mutate)
    return str(caught.value)


def test_a_zone_past_the_regions_zones_is_one_line_with_file_field_value_and_the_real_zones(parse) -> None:
    # GIVEN dev (us-west-2) with a fifth zone, which the old prefix check accepted
    def mutate(data: dict[str, Any]) -> None:
        data["network"]["create"]["availability_zones"] = ["us-west-2a", "us-west-2e"]

    # WHEN it is loaded
    message = _error(parse, mutate)
    # THEN one line names the file, the field path, the value and us-west-2's zones
    assert message == f"dev.yaml: network.create.availability_zones[1]: 'us-west-2e': does not exist: the zones of " \
                      f"us-west-2 are {US_WEST_2}"


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("gpu", "usw2-az9", "does not exist"),
    ("gpu", "us-east-1a", "must be an AZ of region us-west-2"),
    ("gpu", "us-west-2-lax-1a", "is a Local Zone or Wavelength Zone"),
    ("vpc", "usw2-lax1-az1", "is a Local Zone or Wavelength Zone"),
    ("vpc", "usw2-az1", "is an AZ ID; this field takes the AZ's name"),
    ("group", "us-west-2-lax-1a", "is a Local Zone or Wavelength Zone"),
])
def test_every_zone_field_refuses_what_is_not_a_zone_of_the_region(parse, field: str, value: str,
                                                                    expected: str) -> None:
    # GIVEN one zone field set to something that is not an Availability Zone of us-west-2 (or not of that kind)
    paths = {"gpu": "network.gpu_availability_zone", "vpc": "network.create.availability_zones[0]",
             "group": "hyperpod.instance_groups[1].availability_zone"}

    def mutate(data: dict[str, Any]) -> None:
        if field == "gpu":
            data["network"]["gpu_availability_zone"] = value
        elif field == "vpc":
            data["network"]["create"]["availability_zones"] = [value, "us-west-2a", "us-west-2b"]
        else:
            data["hyperpod"]["instance_groups"][1]["availability_zone"] = value

    # WHEN it is loaded THEN the first line names the field and the value, and says why
    first = _error(parse, mutate).splitlines()[0]
    assert first.startswith(f"dev.yaml: {paths[field]}: '{value}': "), first
    assert expected in first


def test_the_gpu_zone_as_an_az_id_is_accepted_and_is_no_zone_name(parse) -> None:
    # GIVEN dev with its GPU zone given as the AZ ID its training plan reports
    env = parse(lambda d: d["network"].__setitem__("gpu_availability_zone", "usw2-az2"))
    # THEN it loads: the ID is the GPU zone, the VPC's zones are the names given, and no name is invented for the ID
    assert env.network.gpu_availability_zone == "usw2-az2" and env.network.gpu_zone_is_id
    assert env.network.gpu_zone_name is None
    assert env.network.availability_zones == ("us-west-2a", "us-west-2b")
    # AND every zone field is known with its path (what preflight resolves)
    assert list(env.network.zone_fields("network")) == [
        ("network.gpu_availability_zone", "usw2-az2"), ("network.create.availability_zones[0]", "us-west-2a"),
        ("network.create.availability_zones[1]", "us-west-2b")]


def test_a_gpu_group_must_give_the_gpu_zone_in_the_same_form(parse) -> None:
    # GIVEN the GPU zone as an ID and the prefill group pinned by name
    def mutate(data: dict[str, Any]) -> None:
        data["network"]["gpu_availability_zone"] = "usw2-az2"
        data["hyperpod"]["instance_groups"][1]["availability_zone"] = "us-west-2a"

    # THEN the group is refused: offline the name cannot be shown to be that ID
    assert "hyperpod.instance_groups[1].availability_zone: 'us-west-2a': GPU groups must share one AZ" in \
        _error(parse, mutate)
    # AND the same ID is accepted
    env = parse(lambda d: (d["network"].__setitem__("gpu_availability_zone", "usw2-az2"),
                           d["hyperpod"]["instance_groups"][1].__setitem__("availability_zone", "usw2-az2")))
    assert env.hyperpod.instance_groups[1].availability_zone == "usw2-az2"


def test_an_adopted_gpu_subnet_keeps_its_name_next_to_an_az_id() -> None:
    # GIVEN the adopted environment (tests/fixtures/adopted) with its GPU zone given as an AZ ID
    data = yaml.safe_load(ADOPTED.read_text())
    data["network"]["gpu_availability_zone"] = "usw2-az2"
    # WHEN it is parsed
    adopted = parse_environment(data, name="adopted", source="adopted.yaml", base_dir=ROOT)
    # THEN the subnet's configured name is the GPU zone's name (preflight checks it is that ID's name)
    assert adopted.network.gpu_zone_name == "us-west-2a"
    assert "usw2-az2" not in adopted.network.availability_zones


def test_a_name_outside_an_unconfirmed_row_warns_with_its_field(parse, base_configs) -> None:
    # GIVEN an environment in us-west-1, whose zone names differ per account (an unconfirmed catalogue row),
    # using us-west-1c, which older accounts have and the recorded answer lacks
    def mutate(data: dict[str, Any]) -> None:
        data["region"] = "us-west-1"
        data["network"]["gpu_availability_zone"] = "us-west-1a"
        data["network"]["create"]["availability_zones"] = ["us-west-1a", "us-west-1c"]
        data["hyperpod"]["dependencies_chart"]["repository"] = "oci://111111111111.dkr.ecr.us-west-1.amazonaws.com/x"
        data["operator"]["model_buckets"] = []
        data.pop("endpoints")

    # WHEN it is loaded
    env = parse(mutate)
    # THEN it loads, with a warning on that field that says preflight checks it against the account
    zone_warnings = [w for w in env.warnings() if w.path.startswith("network")]
    assert [(w.path, w.value) for w in zone_warnings] == [("network.create.availability_zones[1]", "us-west-1c")]
    assert "unconfirmed" in zone_warnings[0].message and "preflight" in zone_warnings[0].message
    # AND a confirmed Region's zones warn about nothing
    assert not [w for w in parse(lambda d: None).warnings() if w.path.startswith("network")]


@pytest.mark.parametrize("network", ["create", "existing"])
def test_a_gpu_zone_the_region_lacks_is_one_message(parse, network: str) -> None:
    # GIVEN a GPU zone us-west-2 does not have, with a created VPC or with the adopted one (its GPU subnet elsewhere)
    def mutate(data: dict[str, Any]) -> None:
        if network == "existing":
            data["network"] = yaml.safe_load(ADOPTED.read_text())["network"]
        data["network"]["gpu_availability_zone"] = "us-west-2e"

    # WHEN it is loaded
    message = _error(parse, mutate)
    # THEN one line says the zone does not exist, without a second one comparing the missing zone with the VPC's
    assert message == f"dev.yaml: network.gpu_availability_zone: 'us-west-2e': does not exist: the zones of " \
                      f"us-west-2 are {US_WEST_2}"


def test_a_group_in_the_adopted_gpu_subnets_zone_is_in_the_gpu_zone_given_as_an_id(parse) -> None:
    # GIVEN the adopted network with its GPU zone as an AZ ID, and the prefill group and the endpoint pinned to the
    # zone the adopted GPU subnet is configured in (us-west-2a)
    def mutate(data: dict[str, Any], zone: str) -> None:
        data["network"] = yaml.safe_load(ADOPTED.read_text())["network"]
        data["network"]["gpu_availability_zone"] = "usw2-az2"
        data["hyperpod"]["instance_groups"][1]["availability_zone"] = zone
        data["endpoints"][0]["topology"] = {"availability_zone": zone}

    # WHEN it is loaded THEN it is accepted: the group runs in that subnet (preflight checks the ID is its name)
    env = parse(lambda d: mutate(d, "us-west-2a"))
    assert env.hyperpod.instance_groups[1].availability_zone == "us-west-2a"
    # AND another name is refused, one line per field, naming both forms of the GPU zone the configuration knows
    lines = _error(parse, lambda d: mutate(d, "us-west-2b")).splitlines()
    assert lines == [
        "dev.yaml: hyperpod.instance_groups[1].availability_zone: 'us-west-2b': GPU groups must share one AZ for EFA KV "
        "transfer: network.gpu_availability_zone (usw2-az2) or the adopted GPU subnet's zone (us-west-2a), the AZ of "
        "the GPU subnet",
        "dev.yaml: endpoints[0].topology.availability_zone: 'us-west-2b': must be network.gpu_availability_zone "
        "(usw2-az2) or the adopted GPU subnet's zone (us-west-2a), the AZ of the prefill and decode groups"]


def test_a_name_next_to_a_created_gpu_subnets_az_id_is_refused_saying_to_give_the_id(parse) -> None:
    # GIVEN a created VPC whose GPU zone is an AZ ID, and the prefill group pinned by a zone name
    def mutate(data: dict[str, Any]) -> None:
        data["network"]["gpu_availability_zone"] = "usw2-az2"
        data["hyperpod"]["instance_groups"][1]["availability_zone"] = "us-west-2b"

    # WHEN it is loaded THEN the one line says why a name cannot match, and what to give instead
    assert _error(parse, mutate) == (
        "dev.yaml: hyperpod.instance_groups[1].availability_zone: 'us-west-2b': GPU groups must share one AZ for EFA KV "
        "transfer: network.gpu_availability_zone (usw2-az2), the AZ of the GPU subnet; it is an AZ ID, and which name "
        "it has is the account's: give the ID here too")
