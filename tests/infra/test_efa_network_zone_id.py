"""The GPU zone given as an AZ ID (tests/fixtures/zone-id/config/zoneid.yaml, GPU zone usw2-az2): the whole
environment synthesizes offline and passes the guardrails and cfn-lint; the GPU subnet carries AvailabilityZoneId
(AWS::EC2::Subnet takes it instead of AvailabilityZone); nothing that needs a zone name is given the ID."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_dpd.config import CreateVpc, load_environment
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.platform import availability_zone_context
from hyperpod_dpd.stacks.application import build_app, cdk_json_context, synthesis_errors
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly
from tests.paths import ROOT
from tests.validators import cfn_lint_findings, report_violations, validation_report

ZONE_ID_DIR = ROOT / "tests" / "fixtures" / "zone-id" / "config"
ENV = "zoneid"


@pytest.fixture(scope="module")
def zoneid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Synthesized, list[str]]:
    """GIVEN the zone-ID environment WHEN it is synthesized as ``make synth`` does (the guardrails raise on a finding)."""
    outdir = tmp_path_factory.mktemp("zoneid.out")
    app, _ = build_app(config_dir=ZONE_ID_DIR, outdir=str(outdir), context=cdk_json_context())
    assembly = app.synth()
    return read_assembly(outdir), synthesis_errors(assembly)


def _subnets(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in synthesized.resources(ENV, "network", "AWS::EC2::Subnet").items()}


def test_it_synthesizes_and_passes_the_guardrails_and_cfn_lint(zoneid) -> None:
    synthesized, errors = zoneid
    assert errors == []
    # cdk-nag and the project's rules ran and find nothing (the configuration's own warnings are reported elsewhere)
    report = validation_report(synthesized.outdir)
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPodDpd"}
    assert [v for v in report_violations(report)
            if v[0] in {"AwsSolutions", "HyperPodDpd"}] == []
    assert cfn_lint_findings(synthesized.templates, {ENV: "us-west-2"}) == []


def test_the_gpu_subnet_is_placed_by_its_az_id_and_the_others_by_name(zoneid) -> None:
    synthesized, _ = zoneid
    subnets = _subnets(synthesized)
    (gpu,) = [p for p in subnets.values() if p["CidrBlock"] == "10.1.0.0/16"]
    # THEN the GPU subnet names its zone by ID only (the two properties exclude each other)
    assert gpu["AvailabilityZoneId"] == "usw2-az2" and "AvailabilityZone" not in gpu
    # AND the public and EKS subnets keep the configured zone names
    others = [p for p in subnets.values() if p["CidrBlock"] != "10.1.0.0/16"]
    assert sorted(p["AvailabilityZone"] for p in others) == ["us-west-2a", "us-west-2a", "us-west-2b", "us-west-2b"]
    assert all("AvailabilityZoneId" not in p for p in others)


def test_the_gpu_subnet_routes_through_the_nat_gateway_of_the_first_vpc_zone(zoneid) -> None:
    synthesized, _ = zoneid
    resources = synthesized.template(ENV, "network")["Resources"]
    (route,) = [v["Properties"] for k, v in resources.items()
                if v["Type"] == "AWS::EC2::Route" and k.startswith("NetworkGpuSubnet")]
    nat = resources[route["NatGatewayId"]["Ref"]]
    # THEN it is the first zone's NAT gateway (which name the ID has is the account's: preflight's gpu-zone row)
    assert resources[nat["Properties"]["SubnetId"]["Ref"]]["Properties"]["AvailabilityZone"] == "us-west-2a"


def test_the_endpoint_is_not_pinned_to_the_id_as_if_it_were_a_zone_name(zoneid) -> None:
    synthesized, _ = zoneid
    text = json.dumps(synthesized.template(ENV, "endpoints"))
    # THEN the IEC keeps both roles in one zone (sameAZ) and names no zone: the operator pins to a zone *name*
    assert '\\"topologySpec\\":{\\"sameAZ\\":true}' in text
    assert "usw2-az2" not in text


def test_the_cdk_zone_context_holds_names_only() -> None:
    config = load_environment(ENV, ZONE_ID_DIR)
    assert availability_zone_context(config) == {
        "availability-zones:account=111111111111:region=us-west-2": ["us-west-2a", "us-west-2b"]}


def test_the_construct_resolves_the_zone_name_at_deploy_time() -> None:
    # GIVEN an EfaNetwork built directly with an AZ ID for the GPU zone
    stack = cdk.Stack(cdk.App(), "Net", env=cdk.Environment(account="111111111111", region="us-west-2"))
    network = EfaNetwork(stack, "Network", gpu_availability_zone="usw2-az2",
                         create=CreateVpc(availability_zones=("us-west-2a", "us-west-2b")))
    # THEN the GPU zone's name is the subnet's own AvailabilityZone attribute, known once it exists
    assert cdk.Token.is_unresolved(network.gpu_availability_zone_name)
    resolved = stack.resolve(network.gpu_availability_zone_name)
    assert resolved["Fn::GetAtt"][1] == "AvailabilityZone"
    assert resolved["Fn::GetAtt"][0].startswith("NetworkGpuSubnet")
