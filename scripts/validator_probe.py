"""Which (instance type, Region) pairs the CloudFormation validators reject for ``AWS::SageMaker::Cluster``.

Both lists behind rule E3644 drift: cfn-lint's comes from EC2 pricing, and aws-cdk-lib bundles an older copy in its
validator. ``make offerings`` regenerates ``hyperpod_dpd/catalogue/offerings.py`` from these probes, and
``tests/hyperpod_dpd/catalogue/test_offerings.py`` re-runs them against the installed tools.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk
import cfnlint
from aws_cdk import aws_sagemaker as sagemaker

CFN_LINT_ENUM = Path(cfnlint.__file__).parent / "data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json"


def cfn_lint_regions(instance_type: str, regions: Iterable[str]) -> frozenset[str]:
    """The Regions where cfn-lint's E3644 list (EC2 pricing) has the type."""
    data = json.loads(CFN_LINT_ENUM.read_text())
    return frozenset(r for r in regions if instance_type in data.get(r, {}).get("enum", []))


def cdk_validator_rejections(instance_types: list[str], regions: Iterable[str]) -> set[tuple[str, str]]:
    """(type, Region) pairs that aws-cdk-lib's bundled validator reports as E3644, by synthesizing one probe per pair."""
    regions = list(regions)
    with tempfile.TemporaryDirectory() as outdir:
        app = cdk.App(outdir=outdir, context={"@aws-cdk/core:validateAgainstDefaultRules": False})
        for region in regions:
            stack = cdk.Stack(app, f"R{region.replace('-', '')}", env=cdk.Environment(account="111111111111", region=region))
            for index, name in enumerate(instance_types):
                sagemaker.CfnCluster(stack, f"C{index}", cluster_name=f"c{index}", instance_groups=[
                    sagemaker.CfnCluster.ClusterInstanceGroupProperty(
                        instance_group_name="g", instance_type=name, instance_count=1,
                        execution_role="arn:aws:iam::111111111111:role/probe")])
        app.synth()
        report_path = Path(outdir) / "validation-report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {"pluginReports": []}
    by_stack = {f"R{r.replace('-', '')}": r for r in regions}
    rejected = set()
    for plugin in report["pluginReports"]:
        for violation in plugin["violations"]:
            if violation["ruleName"] != "E3644":
                continue
            for construct in violation["violatingConstructs"]:
                stack_id, resource_id = construct["constructPath"].split("/")[:2]
                rejected.add((instance_types[int(resource_id[1:])], by_stack[stack_id]))
    return rejected
