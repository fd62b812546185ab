"""EfaNetwork: subnets sized for pod IPs, the GPU subnet in the GPU AZ, and an EFA group closed to the outside."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from hyperpod_dpd.config import CreateVpc, ExistingSubnet, ExistingVpc
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.efa_network import EfaNetwork


def _ref_id(value: Any) -> str:
    return value["Ref"] if isinstance(value, dict) and "Ref" in value else value["Fn::GetAtt"][0]


@pytest.fixture(scope="module")
def dev_network(synthesized) -> dict[str, Any]:
    return synthesized.template("dev", "network")


def test_vpc_has_the_configured_cidr_and_a_secondary_block_for_gpu_pods(dev_network: dict[str, Any]) -> None:
    vpc = Template.from_json(dev_network)
    vpc.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.192.0.0/16", "EnableDnsHostnames": True})
    vpc.has_resource_properties("AWS::EC2::VPCCidrBlock", {"CidrBlock": "10.1.0.0/16"})


def test_gpu_subnet_is_private_large_and_in_the_gpu_az(dev_network: dict[str, Any]) -> None:
    # GIVEN the dev network (GPU AZ us-west-2a, GPU CIDR 10.1.0.0/16)
    subnets = {k: v for k, v in dev_network["Resources"].items() if v["Type"] == "AWS::EC2::Subnet"}
    gpu = [v["Properties"] for v in subnets.values() if v["Properties"]["CidrBlock"] == "10.1.0.0/16"]
    # THEN exactly one subnet carries the whole secondary block, in the GPU AZ, with no public IPs
    assert len(gpu) == 1
    assert gpu[0]["AvailabilityZone"] == "us-west-2a"
    assert gpu[0]["MapPublicIpOnLaunch"] is False
    assert {"Key": "kubernetes.io/role/internal-elb", "Value": "1"} in gpu[0]["Tags"]
    gpu_id = next(k for k, v in subnets.items() if v["Properties"]["CidrBlock"] == "10.1.0.0/16")
    assert any(d.startswith("NetworkGpuCidrBlock") for d in dev_network["Resources"][gpu_id].get("DependsOn", []))


def test_gpu_subnet_routes_to_the_nat_gateway_in_its_own_az(dev_network: dict[str, Any]) -> None:
    resources = dev_network["Resources"]
    routes = [v["Properties"] for k, v in resources.items()
              if v["Type"] == "AWS::EC2::Route" and k.startswith("NetworkGpuSubnet")]
    assert len(routes) == 1 and routes[0]["DestinationCidrBlock"] == "0.0.0.0/0"
    nat = resources[_ref_id(routes[0]["NatGatewayId"])]
    nat_subnet = resources[_ref_id(nat["Properties"]["SubnetId"])]
    assert nat_subnet["Properties"]["AvailabilityZone"] == "us-west-2a"


def test_subnets_are_tagged_for_load_balancers(dev_network: dict[str, Any]) -> None:
    template = Template.from_json(dev_network)
    public = template.find_resources("AWS::EC2::Subnet", {"Properties": {"MapPublicIpOnLaunch": False, "Tags": Match.array_with(
        [{"Key": "aws-cdk:subnet-type", "Value": "Public"}])}})
    assert len(public) == 2
    for subnet in public.values():
        assert {"Key": "kubernetes.io/role/elb", "Value": "1"} in subnet["Properties"]["Tags"]
    private = template.find_resources("AWS::EC2::Subnet", {"Properties": {"Tags": Match.array_with(
        [{"Key": "aws-cdk:subnet-type", "Value": "Private"}])}})
    assert len(private) == 2
    for subnet in private.values():
        assert subnet["Properties"]["CidrBlock"].endswith("/20")
        assert {"Key": "kubernetes.io/role/internal-elb", "Value": "1"} in subnet["Properties"]["Tags"]


def test_s3_gateway_endpoint_serves_the_gpu_subnet_too(dev_network: dict[str, Any]) -> None:
    endpoints = [v["Properties"] for v in dev_network["Resources"].values() if v["Type"] == "AWS::EC2::VPCEndpoint"]
    assert len(endpoints) == 1
    assert endpoints[0]["VpcEndpointType"] == "Gateway"
    tables = {_ref_id(t) for t in endpoints[0]["RouteTableIds"]}
    assert any(t.startswith("NetworkGpuSubnet") for t in tables)
    assert len(tables) == 3  # two EKS private subnets + the GPU subnet


def test_efa_security_group_admits_only_itself_and_egresses_to_itself_and_anywhere(dev_network: dict[str, Any]) -> None:
    resources = dev_network["Resources"]
    group_id = next(k for k, v in resources.items() if v["Type"] == "AWS::EC2::SecurityGroup" and k.startswith("NetworkEfaSecurityGroup"))
    group = resources[group_id]["Properties"]
    # THEN no inline ingress from any CIDR, egress to anywhere
    assert "SecurityGroupIngress" not in group
    assert group["SecurityGroupEgress"] == [{"CidrIp": "0.0.0.0/0", "Description": "Allow all outbound traffic by default", "IpProtocol": "-1"}]
    ingress = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroupIngress"]
    ours = [r for r in ingress if _ref_id(r["GroupId"]) == group_id]
    assert all(_ref_id(r["SourceSecurityGroupId"]) == group_id and "CidrIp" not in r for r in ours)
    assert {(r["IpProtocol"], r.get("FromPort"), r.get("ToPort")) for r in ours} == {("-1", None, None), ("tcp", 988, 988), ("tcp", 1018, 1023)}
    egress = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroupEgress"]
    assert [(_ref_id(e["GroupId"]), _ref_id(e["DestinationSecurityGroupId"]), e["IpProtocol"]) for e in egress] == [(group_id, group_id, "-1")]


def test_flow_logs_capture_all_traffic(dev_network: dict[str, Any]) -> None:
    Template.from_json(dev_network).has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL", "ResourceType": "VPC"})


def test_nat_gateway_count_follows_the_config(synthesized) -> None:
    assert len(synthesized.resources("dev", "network", "AWS::EC2::NatGateway")) == 1
    assert len(synthesized.resources("staging", "network", "AWS::EC2::NatGateway")) == 2
    assert len(synthesized.resources("prod", "network", "AWS::EC2::NatGateway")) == 3


def test_existing_vpc_is_adopted_without_creating_one() -> None:
    # GIVEN an existing VPC and GPU subnet
    app = cdk.App()
    stack = cdk.Stack(app, "Adopt", env=cdk.Environment(account="111111111111", region="us-west-2"))
    existing = ExistingVpc(
        vpc_id="vpc-0123456789abcdef0", cidr="10.0.0.0/16",
        private_subnets=(ExistingSubnet(subnet_id="subnet-0aaaaaaaaaaaaaaaa", availability_zone="us-west-2a"),
                         ExistingSubnet(subnet_id="subnet-0bbbbbbbbbbbbbbbb", availability_zone="us-west-2b")),
        gpu_subnet=ExistingSubnet(subnet_id="subnet-0cccccccccccccccc", availability_zone="us-west-2a"))
    # WHEN the network adopts it
    network = EfaNetwork(stack, "Network", gpu_availability_zone="us-west-2a", existing=existing)
    template = Template.from_stack(stack)
    # THEN no VPC or subnet is created, the EFA group is created in that VPC, and the GPU subnet passes through
    template.resource_count_is("AWS::EC2::VPC", 0)
    template.resource_count_is("AWS::EC2::Subnet", 0)
    template.has_resource_properties("AWS::EC2::SecurityGroup", {"VpcId": "vpc-0123456789abcdef0"})
    assert network.gpu_subnet.subnet_id == "subnet-0cccccccccccccccc"
    assert [s.subnet_id for s in network.eks_subnets] == ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]


def test_exactly_one_of_create_or_existing_is_required() -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    with pytest.raises(ConfigError, match=r"EfaNetwork: \[\]: pass exactly one of 'create' or 'existing'"):
        EfaNetwork(stack, "Network", gpu_availability_zone="us-west-2a")


def test_gpu_az_outside_the_vpc_azs_is_rejected() -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    with pytest.raises(ConfigError, match=r"EfaNetwork.gpu_availability_zone: 'us-west-2c': must be one of"):
        EfaNetwork(stack, "Network", gpu_availability_zone="us-west-2c",
                   create=CreateVpc(availability_zones=("us-west-2a", "us-west-2b")))


@pytest.mark.parametrize(("gpu_zone", "accepted"), [("us-west-2a", False), ("usw2-az2", True)])
def test_an_adopted_gpu_subnet_outside_the_gpu_zone_is_rejected(gpu_zone: str, accepted: bool) -> None:
    # GIVEN an adopted VPC whose GPU subnet is in us-west-2b, where no HyperPod group can reach capacity in us-west-2a
    existing = ExistingVpc(
        vpc_id="vpc-0123456789abcdef0", cidr="10.0.0.0/16",
        private_subnets=(ExistingSubnet(subnet_id="subnet-0aaaaaaaaaaaaaaaa", availability_zone="us-west-2a"),
                         ExistingSubnet(subnet_id="subnet-0bbbbbbbbbbbbbbbb", availability_zone="us-west-2b")),
        gpu_subnet=ExistingSubnet(subnet_id="subnet-0cccccccccccccccc", availability_zone="us-west-2b"))
    stack = cdk.Stack(cdk.App(), "Adopt", env=cdk.Environment(account="111111111111", region="us-west-2"))
    if accepted:
        # WHEN the GPU zone is an AZ ID THEN the network is built: only the account knows the ID's name (preflight)
        network = EfaNetwork(stack, "Network", gpu_availability_zone=gpu_zone, existing=existing)
        assert network.gpu_availability_zone_name == "us-west-2b"
        return
    # WHEN the GPU zone is another zone's name THEN the construct refuses it with one line naming field, value and rule
    with pytest.raises(ConfigError) as caught:
        EfaNetwork(stack, "Network", gpu_availability_zone=gpu_zone, existing=existing)
    assert str(caught.value) == (
        "EfaNetwork.existing.gpu_subnet.availability_zone: 'us-west-2b': must be gpu_availability_zone (us-west-2a): "
        "the HyperPod groups run in the GPU subnet, in the zone of their capacity")
