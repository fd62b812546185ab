"""The zone catalogue against moto's recorded DescribeAvailabilityZones answer, and what it accepts and refuses."""

from __future__ import annotations

import pytest
from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.operator import GRAFANA_REGIONS
from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS
from hyperpod_dpd.catalogue.zones import LOCAL_ZONE_WHY, ZONES, check_zone, is_local_zone, zone_kind


def test_every_region_the_toolkit_supports_has_a_row() -> None:
    # GIVEN the Regions an environment may be in (HyperPod's: hyperpod_dpd.config.environment refuses any other)
    # THEN each has its zones, and the catalogue holds no Region the toolkit cannot deploy to
    assert set(ZONES) == set(HYPERPOD_REGIONS)
    # AND every Region where a catalogue instance type is priced, or the operator creates Grafana, is among them
    priced = {r for spec in INSTANCE_TYPES.values() for r in spec.priced_regions}
    assert (priced | set(GRAFANA_REGIONS)) & HYPERPOD_REGIONS <= set(ZONES)


@pytest.mark.parametrize("region", sorted(HYPERPOD_REGIONS))
def test_each_row_is_what_moto_recorded_for_the_region(region: str) -> None:
    # GIVEN moto 5.2.5's recorded DescribeAvailabilityZones answer for the Region (the catalogue's source)
    recorded = RegionsAndZonesBackend.zones[region]
    row = ZONES[region]
    # THEN the row holds exactly its names and its AZ IDs, each of the Region
    assert sorted(row.names) == sorted(z.name for z in recorded)
    assert sorted(row.zone_ids) == sorted(z.zone_id for z in recorded)
    assert all(zone_kind(n) == "name" and n[:-1] == region for n in row.names)
    assert all(zone_kind(i) == "id" and i.startswith(row.id_prefix + "-az") for i in row.zone_ids)
    # AND an unconfirmed row says why
    assert row.confirmed or row.note


@pytest.mark.parametrize("zone", ["us-west-2a", "us-west-2d", "usw2-az1", "usw2-az4"])
def test_a_zone_of_the_region_is_accepted_by_name_or_id(zone: str) -> None:
    verdict = check_zone("us-west-2", zone)
    assert verdict.error is None and verdict.warning is None


def test_a_letter_past_the_regions_zones_is_refused_with_the_real_zones() -> None:
    # GIVEN us-west-2, whose zones are a-d (usw2-az1..az4)
    for zone in ("us-west-2e", "usw2-az5"):
        # WHEN a fifth zone is checked
        verdict = check_zone("us-west-2", zone)
        # THEN it is refused, naming the Region's names and IDs
        assert verdict.error is not None and verdict.warning is None, zone
        assert "us-west-2a, us-west-2b, us-west-2c, us-west-2d (names)" in verdict.error
        assert "usw2-az1, usw2-az2, usw2-az3, usw2-az4 (IDs)" in verdict.error


@pytest.mark.parametrize("zone", ["us-east-1a", "use1-az1", "eu-west-1b"])
def test_a_zone_of_another_region_is_refused(zone: str) -> None:
    verdict = check_zone("us-west-2", zone)
    assert verdict.error is not None and verdict.error.startswith("must be an AZ of region us-west-2")


@pytest.mark.parametrize(("region", "zone"), [
    ("us-west-2", "us-west-2-lax-1a"), ("us-west-2", "usw2-lax1-az1"),
    ("us-east-1", "us-east-1-wl1-bos-wlz-1"), ("us-east-1", "use1-wl1-bos-wlz1")])
def test_local_and_wavelength_zones_are_refused_with_the_reason(region: str, zone: str) -> None:
    # GIVEN a Local Zone or Wavelength Zone name or ID (the forms of the AWS Local Zones and Wavelength guides)
    assert is_local_zone(zone) and zone_kind(zone) is None
    # THEN the catalogue refuses it with why it is not a zone for this toolkit
    assert check_zone(region, zone).error == LOCAL_ZONE_WHY


def test_outside_an_unconfirmed_row_is_a_warning_and_a_foreign_zone_still_an_error() -> None:
    # GIVEN us-west-1, whose names differ per account (unconfirmed: older accounts see us-west-1c)
    assert not ZONES["us-west-1"].confirmed
    # WHEN a zone its recorded list lacks is checked
    verdict = check_zone("us-west-1", "us-west-1c")
    # THEN it is let through with a warning that says preflight decides
    assert verdict.error is None and verdict.warning is not None and "preflight" in verdict.warning
    assert "usw1-az1, usw1-az3 (IDs)" in verdict.warning
    # AND a zone of another Region is still refused
    assert check_zone("us-west-1", "us-west-2a").error is not None
    assert check_zone("us-west-1", "usw2-az1").error is not None
