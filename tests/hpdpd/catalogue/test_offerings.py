"""The Region lists behind rule E3644 match the installed cfn-lint and aws-cdk-lib validators."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import cfnlint
import pytest
from aws_cdk import aws_sagemaker as sagemaker

from hpdpd.catalogue.instances import INSTANCE_TYPES
from hpdpd.catalogue.offerings import CDK_VALIDATOR_LAGS, PRICED
from hpdpd.catalogue.regions import HYPERPOD_REGIONS

PROBED_REGIONS = ("us-west-2", "us-east-1")


def test_priced_regions_equal_cfn_lint_data() -> None:
    data = json.loads((Path(cfnlint.__file__).parent / "data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json").read_text())
    for name in INSTANCE_TYPES:
        expected = {r for r in HYPERPOD_REGIONS if name in data.get(r, {}).get("enum", [])}
        assert PRICED[name] == expected, name


@pytest.fixture(scope="module")
def cdk_rejections(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    """Which (type, Region) pairs aws-cdk-lib's bundled validator rejects, probed in the configured Regions."""
    outdir = tmp_path_factory.mktemp("probe")
    app = cdk.App(outdir=str(outdir), context={"@aws-cdk/core:validateAgainstDefaultRules": False})
    names = list(INSTANCE_TYPES)
    for region in PROBED_REGIONS:
        stack = cdk.Stack(app, region.replace("-", ""), env=cdk.Environment(account="111111111111", region=region))
        for index, name in enumerate(names):
            sagemaker.CfnCluster(stack, f"C{index}", cluster_name=f"c{index}", instance_groups=[
                sagemaker.CfnCluster.ClusterInstanceGroupProperty(
                    instance_group_name="g", instance_type=name, instance_count=1,
                    execution_role="arn:aws:iam::111111111111:role/probe")])
    app.synth()
    report = json.loads((outdir / "validation-report.json").read_text())
    rejected = set()
    for plugin in report["pluginReports"]:
        for violation in plugin["violations"]:
            if violation["ruleName"] != "E3644":
                continue
            for construct in violation["violatingConstructs"]:
                stack_id, cid = construct["constructPath"].split("/")[:2]
                region = next(r for r in PROBED_REGIONS if r.replace("-", "") == stack_id)
                rejected.add((names[int(cid[1:])], region))
    return rejected


@pytest.mark.parametrize("region", PROBED_REGIONS)
def test_cdk_validator_lags_match_the_bundled_validator(region: str, cdk_rejections: set[tuple[str, str]]) -> None:
    for name, spec in INSTANCE_TYPES.items():
        rejected = (name, region) in cdk_rejections
        expected = region not in PRICED[name] or region in CDK_VALIDATOR_LAGS.get(name, frozenset())
        assert rejected == expected, f"{name} in {region}: validator rejects={rejected}, catalogue expects={expected}"
        assert spec.priced_regions == PRICED[name]
