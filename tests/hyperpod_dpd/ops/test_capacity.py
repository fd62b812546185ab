"""Quotas (Stubber), AZ offerings and GPU-subnet addresses (moto's EC2 data) for the configured instance groups, and
the GPU headroom of each group against the endpoints' maximum replicas."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.ops.capacity import (
    configured_counts,
    headroom_checks,
    live_nodes,
    needed_ips,
    offering_checks,
    quota_checks,
    subnet_checks,
)
from hyperpod_dpd.ops.clusters import GroupState, HyperPodState, describe_hyperpod
from hyperpod_dpd.ops.quotas import ClusterUsage

NO_OTHER_CLUSTERS = ClusterUsage()  # the account holds no other HyperPod cluster

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
        # WHEN the quota checks run (no other cluster in the account)
        rows = _by_name(list(quota_checks(env, client, NO_OTHER_CLUSTERS)))
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
            {"QuotaName": name, "QuotaCode": "L-1", "Value": 4.0}
            for name in ("ml.p5.48xlarge for cluster usage", "ml.m7i.2xlarge for cluster usage",
                         "Maximum number instances allowed per SageMaker HyperPod cluster",
                         "Total number of instances allowed across SageMaker HyperPod clusters")]},
            {"ServiceCode": "sagemaker"})
        rows = list(quota_checks(env, client, NO_OTHER_CLUSTERS))
    assert [(r.name, r.status) for r in rows] == [
        ("quota:ml.m7i.2xlarge", "pass"), ("quota:ml.p5.48xlarge", "pass"), ("quota:instances-per-cluster", "pass"),
        ("quota:instances-all-clusters", "pass")]


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


def test_a_gpu_zone_given_by_its_id_is_looked_up_as_an_id(make_env: Callable[..., EnvironmentConfig],
                                                         clients: ClientFactory) -> None:
    # GIVEN the GPU zone as an AZ ID (moto's us-west-2 maps usw2-az2 to us-west-2a)
    env = make_env(lambda d: d["network"].__setitem__("gpu_availability_zone", "usw2-az2"))
    # WHEN the offerings are read
    rows = _by_name(list(offering_checks(env, clients.client("ec2"))))
    # THEN EC2 is asked by zone ID, and the GPU types offered there pass
    assert rows["offering:ml.p5.48xlarge"].status == "pass"
    assert rows["offering:ml.p5.48xlarge"].detail == "p5.48xlarge is offered in usw2-az2"


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
        stub.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        rows = list(quota_checks(env, quotas, NO_OTHER_CLUSTERS))
        assert [(r.name, r.status) for r in rows if r.name.startswith("quota:ml.")] == [("quota:ml.m7i.2xlarge", "pass")]
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


def test_an_adopted_gpu_subnet_matches_a_gpu_zone_given_by_its_id(make_env: Callable[..., EnvironmentConfig],
                                                                 clients: ClientFactory, existing_network: Any) -> None:
    # GIVEN an adopted GPU subnet in us-west-2a and the GPU zone given as that zone's ID
    def by_id(data: dict[str, Any]) -> None:
        existing_network("10.1.0.0/24")(data)
        data["network"]["gpu_availability_zone"] = "usw2-az2"

    rows = list(subnet_checks(make_env(by_id), clients.client("ec2"), None))
    # THEN the subnet's AvailabilityZoneId matches: its addresses are counted, not a false zone mismatch
    assert rows[0].status == "pass" and "free addresses" in rows[0].detail


# -- headroom: free GPUs per group against the endpoints' maximum replicas ---------------------------------------------

def _scaling(minimum: int, maximum: int) -> dict[str, Any]:
    return {"min_replicas": minimum, "max_replicas": maximum, "prometheus": {"query": "q", "target_value": 1}}


@pytest.fixture
def scaled_env(make_env: Callable[..., EnvironmentConfig], base_configs: dict[str, Any]) -> EnvironmentConfig:
    """dev with its endpoint, the prefill group autoscaled to 3 nodes and the prefill role scaling 1-2 replicas."""
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"] = copy.deepcopy(base_configs["dev"]["endpoints"])
        data["endpoints"][0]["prefill"]["autoscaling"] = _scaling(1, 2)
        data["hyperpod"]["autoscaling"] = {"enabled": True}
        _group(data, "prefill").update(count=0, autoscaling={"max_nodes": 3})

    return make_env(mutate)


def test_headroom_reports_free_gpus_per_gpu_group_at_the_groups_maximum(scaled_env: EnvironmentConfig) -> None:
    # GIVEN prefill autoscaled up to 3 p5 nodes (24 GPUs) for 1-2 prefill replicas of 8 GPUs, decode fixed at 1 node
    # WHEN the headroom is computed without a cluster to read
    rows = _by_name(list(headroom_checks(scaled_env, scaled_env.endpoints, live=None)))
    # THEN one row per GPU group (none for the system group), each passing with its numbers
    assert list(rows) == ["capacity:prefill", "capacity:decode"]
    prefill, decode = rows["capacity:prefill"], rows["capacity:decode"]
    assert prefill.status == "pass" and prefill.detail == (
        "ml.p5.48xlarge autoscaling up to 3 node(s): 24 GPUs (3 x 8) at most; the endpoints' maximum replicas need 16 "
        "(llama-3-3-70b prefill 2 x 8); 8 free")
    assert decode.status == "pass" and "count 1: 8 GPUs (1 x 8) at most" in decode.detail and "; 0 free" in decode.detail


def test_headroom_counts_the_nodes_running_now_and_warns_below_the_endpoints_minimum(scaled_env: EnvironmentConfig) -> None:
    # GIVEN a cluster running one prefill node (Karpenter scaled up) and no decode node yet
    cluster = HyperPodState(name="hpdpd-dev", status="InService", failure_message="", groups=(
        GroupState(name="prefill", instance_type="ml.p5.48xlarge", current=1, target=1),
        GroupState(name="decode", instance_type="ml.p5.48xlarge", current=0, target=1)))
    # WHEN the headroom reads the live node counts
    rows = _by_name(list(headroom_checks(scaled_env, scaled_env.endpoints, live=live_nodes(cluster))))
    # THEN prefill passes with the running node, and decode warns: its endpoint's minimum replica has no GPUs yet
    assert rows["capacity:prefill"].status == "pass"
    assert rows["capacity:prefill"].detail.endswith("; 1 node(s) running now (8 GPUs)")
    decode = rows["capacity:decode"]
    assert decode.status == "warn" and decode.detail.endswith(
        "; 0 node(s) running now (0 GPUs); the endpoints' minimum replicas need 8 GPUs now")
    assert "hpdpd wait --for cluster" in (decode.fix or "")


def test_headroom_fails_when_the_endpoints_maximum_exceeds_the_group(env: EnvironmentConfig, base_configs: dict[str, Any]) -> None:
    # GIVEN endpoints checked against dev without them (preflight --endpoints-style): two 8-GPU prefill replicas at most
    data = copy.deepcopy(base_configs["dev"]["endpoints"][0])
    data["prefill"]["autoscaling"] = _scaling(1, 2)
    endpoint = parse_endpoint(data)
    # WHEN the headroom is computed; an endpoint double (no replicas or GPUs to read) is left out
    rows = _by_name(list(headroom_checks(env, [endpoint, object()], live=None)))
    # THEN the prefill row fails with the numbers and the fix, the decode row passes
    prefill = rows["capacity:prefill"]
    assert prefill.status == "fail" and "8 GPUs (1 x 8) at most; the endpoints' maximum replicas need 16" in prefill.detail
    assert prefill.fix == "raise the group to 2 node(s) (count or autoscaling.max_nodes), or lower the endpoints' max_replicas"
    assert rows["capacity:decode"].status == "pass"


def test_quotas_and_addresses_count_an_autoscaled_group_at_its_maximum(scaled_env: EnvironmentConfig) -> None:
    # GIVEN the prefill group at count 0 that Karpenter may grow to 3 nodes
    # THEN the quota needed for p5 is its maximum plus the fixed decode node, and all of them may need addresses
    assert configured_counts(scaled_env) == {"ml.m7i.2xlarge": 2, "ml.p5.48xlarge": 4}
    assert needed_ips(scaled_env, {"ml.m7i.2xlarge": 15, "ml.p5.48xlarge": 50}, None) == (2 * 15 + 4 * 50, 6)


def _stub_instance_types(stub: Stubber) -> None:
    stub.add_response("describe_instance_types", {"InstanceTypes": [
        {"InstanceType": "m7i.2xlarge", "NetworkInfo": {"Ipv4AddressesPerInterface": 15}},
        {"InstanceType": "p5.48xlarge", "NetworkInfo": {"Ipv4AddressesPerInterface": 50}}]},
        {"InstanceTypes": ["m7i.2xlarge", "p5.48xlarge"]})


def test_the_gpu_subnet_is_read_across_pages_and_a_missing_free_count_warns(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory, existing_network: Any) -> None:
    env = make_env(existing_network("10.1.0.0/24"))
    assert env.network.existing is not None
    gpu = env.network.existing.gpu_subnet.subnet_id
    subnet = {"SubnetId": gpu, "VpcId": env.network.existing.vpc_id, "AvailabilityZone": "us-west-2a"}
    ec2 = clients.client("ec2")
    with Stubber(ec2) as stub:
        # GIVEN DescribeSubnets answering an empty first page and the GPU subnet on the second
        _stub_instance_types(stub)
        stub.add_response("describe_subnets", {"Subnets": [], "NextToken": "n"}, {"SubnetIds": [gpu]})
        stub.add_response("describe_subnets", {"Subnets": [{**subnet, "AvailableIpAddressCount": 251}]},
                          {"SubnetIds": [gpu], "NextToken": "n"})
        # WHEN the subnet check runs
        (paged,) = subnet_checks(env, ec2, None)
        # AND again, for an answer that gives no free-address count
        _stub_instance_types(stub)
        stub.add_response("describe_subnets", {"Subnets": [subnet]}, {"SubnetIds": [gpu]})
        (uncounted,) = subnet_checks(env, ec2, None)
        stub.assert_no_pending_responses()
    # THEN the second page's subnet is the one judged (not "does not exist"), and no count is a WARN, not a FAIL or PASS
    assert paged.status == "pass" and "has 251 free addresses for the 130 that 4 node(s) need" in paged.detail
    assert uncounted.status == "warn" and "did not report the free addresses" in uncounted.detail
