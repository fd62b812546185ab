"""Quotas (Stubber), AZ offerings and GPU-subnet addresses (moto's EC2 data) for the configured instance groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.ops.capacity import configured_counts, needed_ips, offering_checks, quota_checks, subnet_checks
from hyperpod_dpd.ops.clusters import GroupState, HyperPodState, describe_hyperpod

REGION = "us-west-2"


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == name)


def _by_name(rows: list[Any]) -> dict[str, Any]:
    return {r.name: r for r in rows}


def test_quotas_below_the_configured_count_fail_with_the_increase_command(env: EnvironmentConfig,
                                                                          aws_credentials: None) -> None:
    # GIVEN dev (2 x ml.p5.48xlarge, 2 x ml.m7i.2xlarge) and a p5 quota of 1, with no m7i quota at all
    client = boto3.client("service-quotas", region_name=REGION)
    assert configured_counts(env) == {"ml.m7i.2xlarge": 2, "ml.p5.48xlarge": 2}
    with Stubber(client) as stub:
        stub.add_response("list_service_quotas", {"Quotas": [
            {"QuotaName": "ml.p5.48xlarge for cluster usage", "QuotaCode": "L-P5", "Value": 1.0}]},
            {"ServiceCode": "sagemaker"})
        stub.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        # WHEN the quota checks run
        rows = _by_name(list(quota_checks(env, client)))
    # THEN p5 fails with the exact increase request and m7i warns that no quota was found
    p5 = rows["quota:ml.p5.48xlarge"]
    assert p5.status == "fail" and "quota 1 (applied) is below the 2 instance(s)" in p5.detail
    assert p5.fix == ("aws service-quotas request-service-quota-increase --service-code sagemaker "
                      "--quota-code L-P5 --desired-value 2")
    assert rows["quota:ml.m7i.2xlarge"].status == "warn"
    assert "ml.m7i.2xlarge for cluster usage" in rows["quota:ml.m7i.2xlarge"].detail


def test_quotas_that_cover_the_count_pass(env: EnvironmentConfig, aws_credentials: None) -> None:
    client = boto3.client("service-quotas", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_response("list_service_quotas", {"Quotas": [
            {"QuotaName": f"{t} for cluster usage", "QuotaCode": "L-1", "Value": 4.0}
            for t in ("ml.p5.48xlarge", "ml.m7i.2xlarge")]}, {"ServiceCode": "sagemaker"})
        rows = list(quota_checks(env, client))
    assert [r.status for r in rows] == ["pass", "pass"]


def test_types_offered_in_the_gpu_az_pass(env: EnvironmentConfig, clients: ClientFactory) -> None:
    rows = _by_name(list(offering_checks(env, clients.client("ec2"))))
    assert rows["offering:ml.p5.48xlarge"].status == "pass"
    assert rows["offering:ml.p5.48xlarge"].detail == "p5.48xlarge is offered in us-west-2a"
    assert rows["offering:ml.m7i.2xlarge"].status == "pass"


def test_a_type_missing_from_the_gpu_az_fails(make_env: Callable[..., EnvironmentConfig],
                                              clients: ClientFactory) -> None:
    # GIVEN p5en groups in us-west-2b, where EC2 does not offer p5en
    def p5en_in_b(data: dict[str, Any]) -> None:
        data["network"]["gpu_availability_zone"] = "us-west-2b"
        for name in ("prefill", "decode"):
            _group(data, name)["instance_type"] = "ml.p5en.48xlarge"

    rows = _by_name(list(offering_checks(make_env(p5en_in_b), clients.client("ec2"))))
    # THEN the check fails and says how to find an AZ that offers it
    assert rows["offering:ml.p5en.48xlarge"].status == "fail"
    assert "p5en.48xlarge is not offered in us-west-2b" in rows["offering:ml.p5en.48xlarge"].detail
    assert "describe-instance-type-offerings" in (rows["offering:ml.p5en.48xlarge"].fix or "")


def test_a_capacity_block_type_with_a_training_plan_warns(make_env: Callable[..., EnvironmentConfig],
                                                          clients: ClientFactory) -> None:
    plan = f"arn:aws:sagemaker:{REGION}:123456789012:training-plan/p5e-plan"

    def p5e(data: dict[str, Any]) -> None:
        _group(data, "prefill").update(instance_type="ml.p5e.48xlarge", training_plan_arn=plan)

    rows = _by_name(list(offering_checks(make_env(p5e), clients.client("ec2"))))
    assert rows["offering:ml.p5e.48xlarge"].status == "warn"
    assert "training plan" in rows["offering:ml.p5e.48xlarge"].detail


def test_a_new_vpc_is_sized_offline(make_env: Callable[..., EnvironmentConfig], clients: ClientFactory) -> None:
    # GIVEN a new VPC whose GPU subnet is a /24 and 6 p5 + 2 m7i nodes (6 x 50 + 2 x 15 addresses)
    def crowded(data: dict[str, Any]) -> None:
        data["network"]["create"]["gpu_subnet_cidr"] = "10.1.0.0/24"
        _group(data, "prefill")["count"] = 5

    env = make_env(crowded)
    rows = list(subnet_checks(env, clients.client("ec2"), None))
    # THEN it fails: 251 usable addresses for 330 needed
    assert rows[0].status == "fail"
    assert "has 251 usable addresses; 8 node(s) need 330" in rows[0].detail
    # AND once a cluster runs every node, nothing more is needed
    running = HyperPodState(name="hpdpd-dev", status="InService", failure_message="", groups=tuple(
        GroupState(name=g.name, instance_type=g.instance_type, current=g.count, target=g.count)
        for g in env.hyperpod.instance_groups))
    rows = list(subnet_checks(env, clients.client("ec2"), running))
    assert rows[0].status == "pass" and "already runs every configured node" in rows[0].detail


def test_parked_groups_need_no_quota_offering_or_addresses(make_env: Callable[..., EnvironmentConfig],
                                                          clients: ClientFactory, aws_credentials: None) -> None:
    # GIVEN dev with both GPU groups parked (count 0): only the 2 system nodes launch
    def park(data: dict[str, Any]) -> None:
        _group(data, "prefill")["count"] = 0
        _group(data, "decode")["count"] = 0

    env = make_env(park)
    # THEN no check asks for p5 capacity: no quota, no AZ offering, no subnet addresses for it
    assert configured_counts(env) == {"ml.m7i.2xlarge": 2}
    quotas = boto3.client("service-quotas", region_name=REGION)
    with Stubber(quotas) as stub:
        stub.add_response("list_service_quotas", {"Quotas": [
            {"QuotaName": "ml.m7i.2xlarge for cluster usage", "QuotaCode": "L-M7I", "Value": 2.0}]},
            {"ServiceCode": "sagemaker"})
        assert [(r.name, r.status) for r in quota_checks(env, quotas)] == [("quota:ml.m7i.2xlarge", "pass")]
    assert [r.name for r in offering_checks(env, clients.client("ec2"))] == ["offering:ml.m7i.2xlarge"]
    (subnet,) = subnet_checks(env, clients.client("ec2"), None)
    assert subnet.status == "pass" and "for the 30 that 2 node(s) need (ml.m7i.2xlarge: 15/node)" in subnet.detail


@pytest.fixture
def existing_network(clients: ClientFactory) -> Callable[..., Callable[[dict[str, Any]], None]]:
    """Create a VPC in moto and return a mutation adopting it, with a GPU subnet of the given size."""

    def build(gpu_cidr: str = "10.1.0.0/24", gpu_zone: str = "us-west-2a") -> Callable[[dict[str, Any]], None]:
        ec2 = clients.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
        gpu = ec2.create_subnet(VpcId=vpc, CidrBlock=gpu_cidr, AvailabilityZone=gpu_zone)["Subnet"]["SubnetId"]
        a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.128.0/24", AvailabilityZone="us-west-2a")["Subnet"]["SubnetId"]
        b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.129.0/24", AvailabilityZone="us-west-2b")["Subnet"]["SubnetId"]

        def adopt(data: dict[str, Any]) -> None:
            data["network"] = {"gpu_availability_zone": "us-west-2a", "existing": {
                "vpc_id": vpc, "cidr": "10.1.0.0/16",
                "private_subnets": [{"subnet_id": a, "availability_zone": "us-west-2a"},
                                    {"subnet_id": b, "availability_zone": "us-west-2b"}],
                "gpu_subnet": {"subnet_id": gpu, "availability_zone": "us-west-2a"}}}

        return adopt

    return build


def test_free_ips_of_an_existing_subnet_cover_the_nodes(make_env: Callable[..., EnvironmentConfig],
                                                        clients: ClientFactory, existing_network: Any) -> None:
    env = make_env(existing_network("10.1.0.0/24"))
    rows = list(subnet_checks(env, clients.client("ec2"), None))
    assert rows[0].status == "pass"
    assert "has 251 free addresses for the 130 that 4 node(s) need" in rows[0].detail
    assert "ml.p5.48xlarge: 50/node" in rows[0].detail and "ml.m7i.2xlarge: 15/node" in rows[0].detail


def test_too_few_free_ips_fail(make_env: Callable[..., EnvironmentConfig], clients: ClientFactory,
                               existing_network: Any) -> None:
    env = make_env(existing_network("10.1.0.0/25"))
    rows = list(subnet_checks(env, clients.client("ec2"), None))
    assert rows[0].status == "fail" and "has 123 free addresses; 4 node(s) need 130" in rows[0].detail


def test_nodes_a_cluster_already_runs_are_not_counted_again(make_env: Callable[..., EnvironmentConfig],
                                                            clients: ClientFactory, existing_network: Any,
                                                            create_hyperpod: Callable[..., None]) -> None:
    # GIVEN a running cluster with every node, and the config asking for one more decode node
    env = make_env(existing_network("10.1.0.0/25"))
    create_hyperpod(clients.client("sagemaker"), env)
    running = describe_hyperpod(clients.client("sagemaker"), env.hyperpod.cluster_name)
    grown = make_env(lambda d: (existing_network("10.1.0.0/25")(d), _group(d, "decode").__setitem__("count", 2)))
    # THEN only the new node's addresses are needed
    assert needed_ips(grown, {"ml.p5.48xlarge": 50, "ml.m7i.2xlarge": 15}, running) == (50, 1)
    rows = list(subnet_checks(env, clients.client("ec2"), running))
    assert rows[0].status == "pass" and "already runs every configured node" in rows[0].detail


def test_a_gpu_subnet_outside_the_gpu_az_or_missing_fails(make_env: Callable[..., EnvironmentConfig],
                                                          clients: ClientFactory, existing_network: Any) -> None:
    in_b = make_env(existing_network("10.1.0.0/24", gpu_zone="us-west-2b"))
    rows = list(subnet_checks(in_b, clients.client("ec2"), None))
    assert rows[0].status == "fail" and "is in us-west-2b, not the GPU AZ us-west-2a" in rows[0].detail

    def missing(data: dict[str, Any]) -> None:
        existing_network()(data)
        data["network"]["existing"]["gpu_subnet"]["subnet_id"] = "subnet-0123456789abcdef0"

    rows = list(subnet_checks(make_env(missing), clients.client("ec2"), None))
    assert rows[0].status == "fail" and "subnet-0123456789abcdef0 does not exist" in rows[0].detail
