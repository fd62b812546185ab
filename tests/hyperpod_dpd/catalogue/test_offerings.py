"""The Region lists behind rule E3644 match the installed cfn-lint and aws-cdk-lib validators."""

from __future__ import annotations

import pytest

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.offerings import CDK_VALIDATOR_LAGS, PRICED
from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS
from scripts.validator_probe import cdk_validator_rejections, cfn_lint_regions

PROBED_REGIONS = ("us-west-2", "us-east-1")  # the configured ones; `make offerings` probes every Region


def test_priced_regions_equal_cfn_lint_data() -> None:
    for name in INSTANCE_TYPES:
        assert PRICED[name] == cfn_lint_regions(name, HYPERPOD_REGIONS), name
        assert INSTANCE_TYPES[name].priced_regions == PRICED[name]


@pytest.fixture(scope="module")
def cdk_rejections() -> set[tuple[str, str]]:
    return cdk_validator_rejections(list(INSTANCE_TYPES), PROBED_REGIONS)


@pytest.mark.parametrize("region", PROBED_REGIONS)
def test_cdk_validator_lags_match_the_bundled_validator(region: str, cdk_rejections: set[tuple[str, str]]) -> None:
    for name in INSTANCE_TYPES:
        rejected = (name, region) in cdk_rejections
        expected = region not in PRICED[name] or region in CDK_VALIDATOR_LAGS.get(name, frozenset())
        assert rejected == expected, f"{name} in {region}: validator rejects={rejected}, catalogue expects={expected}"
