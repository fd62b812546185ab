"""Preflight's zone rows: moto for DescribeAvailabilityZones (its us-west-2 account: us-west-2a is usw2-az2, 2b is
usw2-az1), botocore's Stubber for another account's answer and for DescribeTrainingPlan (moto 5.2.5 lacks it); and
the checks role against the training-plan call preflight really makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory, MalformedAnswer
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.checks_role import PLAN_CALLS, READ_CALLS, ChecksRole, CheckTargets
from hyperpod_dpd.ops.checks import guarded
from hyperpod_dpd.ops.zones import ZONE_NAMES, ZONES_PERMISSION, plan_checks, zone_checks
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, REGION
from tests.iam_eval import Deployment, Request, role_policies

PLAN = f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:training-plan/p5-week"
ZONE_FILTER = {"Filters": [{"Name": "zone-type", "Values": ["availability-zone"]}]}


def _rows(env: EnvironmentConfig, clients: ClientFactory) -> dict[str, Any]:
    return {c.name: c for c in guarded(lambda: zone_checks(env, clients.client("ec2")), names=ZONE_NAMES,
                                       permission=ZONES_PERMISSION)}


def _with_gpu_zone(zone: str, vpc_zones: list[str] | None = None) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["network"]["gpu_availability_zone"] = zone
        if vpc_zones:
            data["network"]["create"]["availability_zones"] = vpc_zones
    return mutate


def test_the_configured_zones_are_resolved_to_names_and_ids(env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN dev (GPU zone us-west-2a, VPC zones us-west-2a and 2b) in moto's account
    # WHEN the zone rows run
    rows = _rows(env, clients)
    # THEN every zone is resolved, and the GPU zone's AZ ID is the one a training plan would report
    assert rows["zones"].status == "pass"
    assert "us-west-2a (usw2-az2), us-west-2b (usw2-az1)" in rows["zones"].detail
    assert rows["gpu-zone"].status == "pass" and "GPU zone us-west-2a is AZ ID usw2-az2" in rows["gpu-zone"].detail


def test_a_gpu_zone_id_that_is_the_first_vpc_zone_passes(make_env: Callable[..., EnvironmentConfig],
                                                         clients: ClientFactory) -> None:
    # GIVEN the GPU zone as usw2-az1, which is us-west-2b in this account, listed first among the VPC's zones
    env = make_env(_with_gpu_zone("usw2-az1", ["us-west-2b", "us-west-2a"]))
    rows = _rows(env, clients)
    # THEN the row names the zone both ways, and its NAT gateway is in the GPU zone
    assert rows["gpu-zone"].status == "pass", rows["gpu-zone"]
    assert "GPU zone usw2-az1 is us-west-2b in account" in rows["gpu-zone"].detail


def test_a_gpu_zone_id_behind_another_zones_nat_gateway_warns_with_the_order_to_use(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory) -> None:
    # GIVEN usw2-az1 (us-west-2b here) as the GPU zone, but us-west-2a listed first (its NAT gateway serves the GPU
    # subnet: infra/efa_network.py)
    env = make_env(_with_gpu_zone("usw2-az1"))
    row = _rows(env, clients)["gpu-zone"]
    # THEN it warns, and the fix is the order that puts the NAT gateway in the GPU zone
    assert row.status == "warn" and "NAT gateway is the one in us-west-2a" in row.detail
    assert row.fix == "list us-west-2b first in network.create.availability_zones"


@pytest.mark.parametrize(("subnet_zone", "status"), [("us-west-2a", "pass"), ("us-west-2b", "fail")])
def test_an_adopted_gpu_subnet_must_be_in_the_gpu_zone_id(make_env: Callable[..., EnvironmentConfig],
                                                          clients: ClientFactory, subnet_zone: str, status: str) -> None:
    # GIVEN an adopted VPC whose GPU subnet is configured in subnet_zone, and the GPU zone usw2-az2 (us-west-2a here)
    def mutate(data: dict[str, Any]) -> None:
        data["network"] = {"gpu_availability_zone": "usw2-az2", "existing": {
            "vpc_id": "vpc-0a1b2c3d4e5f60718", "cidr": "10.20.0.0/16",
            "private_subnets": [{"subnet_id": "subnet-0a1b2c3d4e5f60001", "availability_zone": "us-west-2a"},
                                {"subnet_id": "subnet-0a1b2c3d4e5f60002", "availability_zone": "us-west-2b"}],
            "gpu_subnet": {"subnet_id": "subnet-0a1b2c3d4e5f60003", "availability_zone": subnet_zone}}}

    row = _rows(make_env(mutate), clients)["gpu-zone"]
    # THEN the row passes only when the configured name is that ID's name in this account
    assert row.status == status, row
    if status == "fail":
        assert "network.existing.gpu_subnet.availability_zone is us-west-2b" in row.detail


def test_a_zone_this_account_lacks_fails_naming_the_field_and_the_accounts_zones(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory) -> None:
    # GIVEN an account that sees three zones of us-west-2 (another account's answer: moto records one with four), and
    # a VPC in us-west-2d
    env = make_env(_with_gpu_zone("us-west-2a", ["us-west-2a", "us-west-2d"]))
    ec2 = clients.client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneName": f"us-west-2{letter}", "ZoneId": f"usw2-az{n}", "State": "available"}
            for letter, n in (("a", 3), ("b", 1), ("c", 2))]}, ZONE_FILTER)
        rows = _rows(env, clients)
        stub.assert_no_pending_responses()
    # THEN the zones row fails with the field, the value and this account's zones
    assert rows["zones"].status == "fail"
    assert rows["zones"].detail.startswith("network.create.availability_zones[1] us-west-2d: no such zone for account")
    assert "us-west-2a (usw2-az3), us-west-2b (usw2-az1), us-west-2c (usw2-az2)" in rows["zones"].detail
    # AND the GPU zone is resolved with this account's mapping
    assert "GPU zone us-west-2a is AZ ID usw2-az3" in rows["gpu-zone"].detail


@pytest.mark.parametrize(("state", "status"), [("impaired", "warn"), ("unavailable", "fail")])
def test_a_zone_that_is_not_available_is_reported(env: EnvironmentConfig, clients: ClientFactory, state: str,
                                                  status: str) -> None:
    ec2 = clients.client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneName": "us-west-2a", "ZoneId": "usw2-az2", "State": state},
            {"ZoneName": "us-west-2b", "ZoneId": "usw2-az1", "State": "available"}]}, ZONE_FILTER)
        row = _rows(env, clients)["zones"]
    assert row.status == status and state in row.detail


def test_access_denied_is_a_warning_per_row_naming_the_permission(env: EnvironmentConfig,
                                                                  clients: ClientFactory) -> None:
    with Stubber(clients.client("ec2")) as stub:
        stub.add_client_error("describe_availability_zones", "UnauthorizedOperation", "You are not authorized")
        rows = _rows(env, clients)
    assert [(n, r.status) for n, r in rows.items()] == [("zones", "warn"), ("gpu-zone", "warn")]
    assert all(ZONES_PERMISSION in (r.fix or "") for r in rows.values())


def test_an_answer_whose_zone_has_no_id_stops_the_command(env: EnvironmentConfig, clients: ClientFactory) -> None:
    with Stubber(clients.client("ec2")) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [{"ZoneName": "us-west-2a"}]},
                          ZONE_FILTER)
        with pytest.raises(MalformedAnswer, match="DescribeAvailabilityZones"):
            _rows(env, clients)


# -- training plans ------------------------------------------------------------------------------------------------

def _planned(make_env: Callable[..., EnvironmentConfig], gpu_zone: str = "us-west-2a") -> EnvironmentConfig:
    """dev with both GPU groups on one training plan, and the GPU zone ``gpu_zone``."""
    def mutate(data: dict[str, Any]) -> None:
        data["network"]["gpu_availability_zone"] = gpu_zone
        for group in data["hyperpod"]["instance_groups"][1:]:
            group["training_plan_arn"] = PLAN
    return make_env(mutate)


def _plan(zone: str | None, zone_id: str | None, instance_type: str = "ml.p5.48xlarge") -> dict[str, Any]:
    summary: dict[str, Any] = {"ReservedCapacityArn": f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:reserved-capacity/r1",
                               "InstanceType": instance_type, "TotalInstanceCount": 2, "Status": "Active"}
    if zone:
        summary["AvailabilityZone"] = zone
    if zone_id:
        summary["AvailabilityZoneId"] = zone_id
    return {"TrainingPlanArn": PLAN, "TrainingPlanName": "p5-week", "Status": "Active",
            "ReservedCapacitySummaries": [summary]}


@pytest.mark.parametrize("gpu_zone", ["us-west-2a", "usw2-az2"])
def test_a_plan_in_the_gpu_zone_passes_by_name_or_id_and_is_described_once(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory, gpu_zone: str) -> None:
    # GIVEN prefill and decode on one plan whose capacity is in us-west-2a (usw2-az2), the GPU zone given as gpu_zone
    env = _planned(make_env, gpu_zone)
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", _plan("us-west-2a", "usw2-az2"), {"TrainingPlanName": PLAN})
        # WHEN the plan rows run
        rows = list(plan_checks(env, sagemaker))
        stub.assert_no_pending_responses()  # one call for the two groups
    # THEN both groups pass, naming the plan's zone both ways
    assert [(r.name, r.status) for r in rows] == [("training-plan:prefill", "pass"), ("training-plan:decode", "pass")]
    assert "reserves ml.p5.48xlarge in us-west-2a (usw2-az2)" in rows[0].detail


def test_a_plan_in_another_zone_fails_with_the_plans_az_id_as_the_fix(make_env: Callable[..., EnvironmentConfig],
                                                                      clients: ClientFactory) -> None:
    env = _planned(make_env)
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", _plan("us-west-2b", "usw2-az1"), {"TrainingPlanName": PLAN})
        rows = list(plan_checks(env, sagemaker))
    assert [r.status for r in rows] == ["fail", "fail"]
    assert "in us-west-2b (usw2-az1), not in us-west-2a, the zone of group prefill" in rows[0].detail
    assert rows[0].fix is not None and rows[0].fix.startswith("set network.gpu_availability_zone: usw2-az1")


def test_a_plan_without_a_zone_warns_and_a_missing_plan_fails(make_env: Callable[..., EnvironmentConfig],
                                                              clients: ClientFactory) -> None:
    env = _planned(make_env)
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", _plan(None, None), {"TrainingPlanName": PLAN})
        unzoned = list(plan_checks(env, sagemaker))
        stub.add_client_error("describe_training_plan", "ResourceNotFound", f"Could not find training plan {PLAN}")
        missing = list(plan_checks(env, sagemaker))
    assert [r.status for r in unzoned] == ["warn", "warn"] and "names no zone" in unzoned[0].detail
    assert [r.status for r in missing] == ["fail", "fail"] and "does not exist" in missing[0].detail


@pytest.mark.parametrize(("change", "status", "words"), [
    ({"Status": "Expired"}, "fail", "(Expired): its reserved capacity cannot be used"),
    ({"Status": "Failed"}, "fail", "(Failed): its reserved capacity cannot be used"),
    ({"instance_type": "ml.p5en.48xlarge"}, "fail", "reserves ml.p5en.48xlarge, no ml.p5.48xlarge for group prefill"),
    ({"TotalInstanceCount": 1}, "fail", "reserves 1 ml.p5.48xlarge in us-west-2a; groups prefill, decode need 2"),
    ({"summary_status": "Expired"}, "fail", "reserves 0 ml.p5.48xlarge in us-west-2a; groups prefill, decode need 2"),
    ({"Status": "Scheduled"}, "warn", "the plan is Scheduled, not Active"),
])
def test_a_plan_in_the_gpu_zone_that_cannot_hold_the_groups_does_not_pass(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory, change: dict[str, Any], status: str,
        words: str) -> None:
    # GIVEN prefill and decode (1 + 1 ml.p5.48xlarge) on one plan whose capacity is in their zone, but the plan has
    # ended, reserves another type, too few instances, only an ended reservation, or has not started
    env = _planned(make_env)
    answer = _plan("us-west-2a", "usw2-az2", instance_type=change.get("instance_type", "ml.p5.48xlarge"))
    summary = answer["ReservedCapacitySummaries"][0]
    answer["Status"] = change.get("Status", "Active")
    summary["TotalInstanceCount"] = change.get("TotalInstanceCount", 2)
    summary["Status"] = change.get("summary_status", "Active")
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", answer, {"TrainingPlanName": PLAN})
        # WHEN the plan rows run
        rows = list(plan_checks(env, sagemaker))
    # THEN neither group's row passes, and the row says why
    assert [r.status for r in rows] == [status, status], rows
    assert words in rows[0].detail


def test_a_plan_that_cannot_be_read_warns_with_the_permission(make_env: Callable[..., EnvironmentConfig],
                                                              clients: ClientFactory) -> None:
    env = _planned(make_env)
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_client_error("describe_training_plan", "AccessDeniedException", "not authorized")
        rows = list(plan_checks(env, sagemaker))
    assert [r.status for r in rows] == ["warn", "warn"]
    assert "sagemaker:DescribeTrainingPlan" in (rows[0].fix or "")


def test_the_checks_role_allows_the_plan_call_on_the_configured_plan_only(
        make_env: Callable[..., EnvironmentConfig], clients: ClientFactory, tmp_path: Any) -> None:
    # GIVEN the calls the plan rows make, recorded as botocore builds them
    env = _planned(make_env)
    sagemaker = clients.client("sagemaker")
    made: list[tuple[str, dict[str, Any]]] = []
    sagemaker.meta.events.register("before-parameter-build",
                                   lambda params, model, **_: made.append((model.name, dict(params))))
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", _plan("us-west-2a", "usw2-az2"), {"TrainingPlanName": PLAN})
        list(plan_checks(env, sagemaker))
    # AND the environment's checks role, synthesized
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Checks", env=cdk.Environment(account=MOTO_ACCOUNT, region=REGION))
    role = ChecksRole(stack, "ChecksRole", role_name="hpdpd-dev-checks",
                      trusted_role_arn="arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev",
                      targets=CheckTargets.of(env))
    policies = role_policies(assertions.Template.from_stack(stack).to_json(),
                             stack.get_logical_id(role.role.node.default_child),  # type: ignore[arg-type]
                             Deployment(account=MOTO_ACCOUNT, region=REGION, partition="aws"))
    # THEN the call is a known one, allowed on the plan it names, and refused on another plan
    assert [name for name, _ in made] == ["DescribeTrainingPlan"]
    action = PLAN_CALLS[("sagemaker", "DescribeTrainingPlan")]
    assert ("sagemaker", "DescribeTrainingPlan") not in READ_CALLS  # granted only with training plans
    assert policies.evaluate(Request(action, made[0][1]["TrainingPlanName"])).allowed
    assert not policies.evaluate(Request(action, PLAN.replace("p5-week", "someone-elses"))).allowed
    assert policies.evaluate(Request("ec2:DescribeAvailabilityZones", "*")).allowed


def test_preflight_runs_the_zone_rows_before_the_headroom_rows(env: EnvironmentConfig, clients: ClientFactory,
                                                               create_hyperpod: Callable[..., None]) -> None:
    from hyperpod_dpd.ops.preflight import run_preflight
    from tests.hyperpod_dpd.ops.test_preflight import stub_eks, stub_quotas

    # GIVEN dev deployed in moto (its HyperPod cluster; EKS and quotas stubbed as the preflight tests do)
    create_hyperpod(clients.client("sagemaker"), env)
    with Stubber(clients.client("eks")) as eks, Stubber(clients.client("service-quotas")) as quotas:
        stub_eks(eks, env)
        stub_quotas(quotas, env)
        # WHEN the whole preflight runs
        names = [c.name for c in run_preflight(env, clients, endpoints=()).checks]
    # THEN the zone rows are part of it, after the model checks and before the GPU headroom
    assert names.index("zones") + 1 == names.index("gpu-zone") < names.index("capacity:prefill")
