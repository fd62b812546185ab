"""Preflight's zone checks: every configured zone resolved for this account (name and AZ ID), and the zone of each
training plan's reserved capacity against the zone of the group that uses it.

Why: AZ names map to physical zones independently per account in the oldest Regions, while AZ IDs are the same in
every account (AWS, "AZ IDs", docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html), and GPU capacity
is reported per AZ ID. The configuration is checked offline against the Region's zones
(hyperpod_dpd.catalogue.zones); only the account knows which name each ID has.

Rows (stable names):

* ``zones``: EC2 ``DescribeAvailabilityZones`` (filter ``zone-type`` = ``availability-zone``; answer
  ``AvailabilityZones[].ZoneName``, ``ZoneId``, ``State``: botocore 1.44.8 ``ec2`` service model). FAIL when a
  configured zone is no zone of the account, or ``unavailable``; WARN for another state than ``available``
  (``information``, ``impaired``, ``constrained``).
* ``gpu-zone``: the GPU zone's name and ID here. Given as an ID with a created VPC, the GPU subnet routes through the
  NAT gateway of the first of ``network.create.availability_zones`` (infra/efa_network.py): WARN unless that is the
  GPU zone. Given as an ID with an adopted VPC, FAIL unless ``existing.gpu_subnet.availability_zone`` is its name.
* ``training-plan:<group>``: SageMaker ``DescribeTrainingPlan`` (``TrainingPlanName`` takes the ARN too; the zones are
  in ``ReservedCapacitySummaries[].AvailabilityZone`` / ``AvailabilityZoneId``, botocore 1.44.8 ``sagemaker``). FAIL
  when the plan is ``Expired`` or ``Failed``, reserves none of the group's type, none in the group's zone, or fewer
  (``TotalInstanceCount`` of its usable summaries there) than the groups of that type on the plan need; WARN when the
  answer names no zone or no count, or the plan is not ``Active`` yet (``Pending``, ``Scheduled``).

EC2 capacity reservations are not read: a HyperPod instance group takes a training plan and no EC2 reservation
(botocore 1.44.8, ``ClusterInstanceGroupSpecification``: ``TrainingPlanArn``, ``CapacityRequirements`` with ``Spot`` /
``OnDemand`` only), so the configuration has none to compare.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import MalformedAnswer, is_not_found
from hyperpod_dpd.ops.checks import Check, attempt, could_not_check, failed, passed, warned

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig, InstanceGroup

ZONES_PERMISSION = "ec2:DescribeAvailabilityZones"
PLAN_PERMISSION = "sagemaker:DescribeTrainingPlan"
ZONE_NAMES = ("zones", "gpu-zone")
AVAILABLE = "available"
UNAVAILABLE = "unavailable"  # EC2 AvailabilityZoneState: available | information | impaired | unavailable | constrained
# TrainingPlanStatus and ReservedCapacityStatus: Pending | Active | Scheduled | Expired | Failed (botocore 1.44.8 sagemaker)
PLAN_ACTIVE = "Active"
PLAN_ENDED = frozenset({"Expired", "Failed"})


@dataclass(frozen=True, kw_only=True)
class AccountZone:
    """One Availability Zone as this account sees it."""

    name: str
    zone_id: str
    state: str

    def describe(self) -> str:
        return f"{self.name} ({self.zone_id})"


@dataclass(frozen=True, kw_only=True)
class AccountZones:
    """The account's Availability Zones in the Region (Local and Wavelength Zones left out)."""

    zones: tuple[AccountZone, ...]

    def find(self, zone: str) -> AccountZone | None:
        """The zone named ``zone`` or with the AZ ID ``zone``."""
        return next((z for z in self.zones if zone in (z.name, z.zone_id)), None)

    def describe(self) -> str:
        return ", ".join(z.describe() for z in self.zones) or "none"


def account_zones(ec2: Any) -> AccountZones:
    answer = ec2.describe_availability_zones(Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}])
    found = []
    for zone in answer.get("AvailabilityZones", []):
        name, zone_id = zone.get("ZoneName"), zone.get("ZoneId")
        if not name or not zone_id:  # a zone without a name or an ID cannot be matched: not EC2's answer
            raise MalformedAnswer(operation="DescribeAvailabilityZones", endpoint=str(ec2.meta.endpoint_url),
                                  detail="a zone without ZoneName or ZoneId")
        found.append(AccountZone(name=name, zone_id=zone_id, state=str(zone.get("State") or "?")))
    return AccountZones(zones=tuple(sorted(found, key=lambda z: z.name)))


def configured_zones(env: EnvironmentConfig) -> list[tuple[str, str]]:
    """(field path, zone) of every zone the environment names: the network's and the instance groups'."""
    fields = list(env.network.zone_fields("network"))
    for index, group in enumerate(env.hyperpod.instance_groups):
        if group.availability_zone:
            fields.append((f"hyperpod.instance_groups[{index}].availability_zone", group.availability_zone))
    return fields


def zone_checks(env: EnvironmentConfig, ec2: Any) -> Iterator[Check]:
    """The ``zones`` and ``gpu-zone`` rows (an AWS error propagates: :func:`~hyperpod_dpd.ops.checks.guarded`)."""
    zones = account_zones(ec2)
    yield _zones_row(env, zones)
    yield _gpu_zone_row(env, zones)


def _zones_row(env: EnvironmentConfig, zones: AccountZones) -> Check:
    where = f"account {env.account} in {env.region}"
    missing: list[str] = []
    unavailable: list[str] = []
    doubtful: list[str] = []
    resolved: dict[str, AccountZone] = {}
    for path, value in configured_zones(env):
        zone = zones.find(value)
        if zone is None:
            missing.append(f"{path} {value}")
        elif zone.state == UNAVAILABLE:
            unavailable.append(f"{path} {value} ({zone.describe()})")
        else:
            if zone.state != AVAILABLE:
                doubtful.append(f"{zone.describe()} is {zone.state}")
            resolved[zone.name] = zone
    if missing:
        return failed("zones", f"{'; '.join(missing)}: no such zone for {where}; its zones are {zones.describe()}",
                      fix="give a zone of the list (name or, for the GPU zone, AZ ID)")
    if unavailable:
        return failed("zones", f"{'; '.join(unavailable)}: the zone is unavailable for {where}",
                      fix="choose another zone ('aws ec2 describe-availability-zones' shows each zone's state)")
    listing = ", ".join(z.describe() for _, z in sorted(resolved.items()))
    if doubtful:
        return warned("zones", f"{'; '.join(doubtful)} ({where}); configured zones: {listing}",
                      fix="read the zone's messages ('aws ec2 describe-availability-zones') before deploying there")
    return passed("zones", f"configured zones in {where}: {listing}")


def _gpu_zone_row(env: EnvironmentConfig, zones: AccountZones) -> Check:
    network = env.network
    given = network.gpu_availability_zone
    zone = zones.find(given)
    if zone is None:
        return failed("gpu-zone", f"network.gpu_availability_zone {given} is no zone of account {env.account} in "
                                  f"{env.region} (see the zones row)", fix="give one of the account's zones")
    if not network.gpu_zone_is_id:
        return passed("gpu-zone", f"GPU zone {given} is AZ ID {zone.zone_id} in account {env.account}, the ID "
                                  "training plans and capacity blocks report")
    here = f"GPU zone {given} is {zone.name} in account {env.account}"
    if network.existing is not None:
        configured = network.existing.gpu_subnet.availability_zone
        if configured != zone.name:
            return failed("gpu-zone", f"{here}, but network.existing.gpu_subnet.availability_zone is {configured}",
                          fix=f"use a GPU subnet in {zone.name} (prefill and decode must share the GPU zone for "
                              f"EFA), or set network.gpu_availability_zone to the subnet's zone")
        return passed("gpu-zone", f"{here}, the adopted GPU subnet's zone")
    assert network.create is not None
    first = network.create.availability_zones[0]
    if first != zone.name:
        return warned("gpu-zone", f"{here}; the GPU subnet's NAT gateway is the one in {first}, the first of "
                                  "network.create.availability_zones: its egress crosses zones (charged per GB) and "
                                  f"depends on {first}",
                      fix=f"list {zone.name} first in network.create.availability_zones")
    return passed("gpu-zone", f"{here}, the first of network.create.availability_zones (its NAT gateway serves the "
                              "GPU subnet)")


# -- training plans ------------------------------------------------------------------------------------------------

def plan_groups(env: EnvironmentConfig) -> list[InstanceGroup]:
    """The groups with instances that take their capacity from a training plan."""
    return [g for g in env.hyperpod.instance_groups if g.training_plan_arn and not g.parked]


def plan_checks(env: EnvironmentConfig, sagemaker: Any) -> Iterator[Check]:
    """One ``training-plan:<group>`` row per group with a training plan; each plan is described once."""
    answers: dict[str, dict[str, Any] | BaseException | None] = {}
    for group in plan_groups(env):
        arn = group.training_plan_arn
        assert arn is not None
        if arn not in answers:
            answers[arn] = attempt(functools.partial(_describe_plan, sagemaker, arn))
        yield _plan_row(env, group, arn, answers[arn])


def _describe_plan(sagemaker: Any, arn: str) -> dict[str, Any] | None:
    """The plan's answer, or None when it does not exist."""
    try:
        answer = sagemaker.describe_training_plan(TrainingPlanName=arn)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    if not isinstance(answer, dict) or not answer.get("TrainingPlanArn"):  # a required member of the output
        raise MalformedAnswer(operation="DescribeTrainingPlan", endpoint=str(sagemaker.meta.endpoint_url),
                              detail="it carries no TrainingPlanArn")
    return answer


def _plan_row(env: EnvironmentConfig, group: InstanceGroup, arn: str,
              answer: dict[str, Any] | BaseException | None) -> Check:
    name = f"training-plan:{group.name}"
    if isinstance(answer, BaseException):
        return could_not_check(name, answer, permission=PLAN_PERMISSION)
    index = env.hyperpod.instance_groups.index(group)
    if answer is None:
        return failed(name, f"training plan {arn} does not exist in account {env.account} ({env.region})",
                      fix=f"set hyperpod.instance_groups[{index}].training_plan_arn to a plan of this account")
    zone = group.availability_zone or env.network.gpu_availability_zone
    status = str(answer.get("Status") or "?")
    plan = f"training plan {arn} ({status})"
    if status in PLAN_ENDED:
        return failed(name, f"{plan}: its reserved capacity cannot be used", fix=f"set hyperpod.instance_groups"
                      f"[{index}].training_plan_arn to an active plan of {group.instance_type} in {zone}")
    summaries = [s for s in answer.get("ReservedCapacitySummaries") or [] if isinstance(s, dict)]
    typed = [s for s in summaries if s.get("InstanceType") == group.instance_type]
    if summaries and not typed:
        kinds = ", ".join(sorted({str(s.get("InstanceType") or "?") for s in summaries}))
        return failed(name, f"{plan} reserves {kinds}, no {group.instance_type} for group {group.name}",
                      fix=f"use a plan that reserves {group.instance_type} in {zone}")
    places = [(str(s.get("AvailabilityZone") or ""), str(s.get("AvailabilityZoneId") or "")) for s in typed]
    places = [p for p in places if any(p)]
    if not places:
        return warned(name, f"{plan} names no zone for its reserved capacity, so whether it is in {zone} cannot be "
                            "checked", fix="look the plan up in the SageMaker console")
    described = _places(places)
    here = [s for s in typed if zone in (s.get("AvailabilityZone"), s.get("AvailabilityZoneId"))]
    if not here:
        plan_id = next((zone_id for _, zone_id in places if zone_id), None)
        fix = (f"set network.gpu_availability_zone: {plan_id} (the plan's AZ ID; every GPU group shares the GPU zone)"
               if plan_id else "move the group to the plan's zone, or use a plan in " + zone)
        return failed(name, f"{plan} reserves {group.instance_type} in {described}, not in {zone}, the zone of group "
                            f"{group.name}", fix=fix)
    # every group of this type on this plan draws on the same reserved instances (autoscaled groups take no plan)
    sharing = [g for g in plan_groups(env) if g.training_plan_arn == arn and g.instance_type == group.instance_type]
    needed = sum(g.max_nodes for g in sharing)
    usable = [s for s in here if s.get("Status") not in PLAN_ENDED]
    counts = [s.get("TotalInstanceCount") for s in usable]
    users = ", ".join(g.name for g in sharing)
    if not all(isinstance(c, int) for c in counts):
        return warned(name, f"{plan} reserves {group.instance_type} in {described} without saying how many, so "
                            f"whether it holds the {needed} instance(s) of {users} cannot be checked",
                      fix="look the plan up in the SageMaker console")
    reserved = sum(c for c in counts if isinstance(c, int))
    if reserved < needed:
        return failed(name, f"{plan} reserves {reserved} {group.instance_type} in {zone}; groups {users} need {needed}",
                      fix=f"lower the groups' count to {reserved}, or extend the plan")
    detail = (f"{plan} reserves {group.instance_type} in {described}, the zone of group {group.name} ({zone}): "
              f"{reserved} instance(s) for the {needed} of {users}")
    if status != PLAN_ACTIVE:
        start = answer.get("StartTime")
        return warned(name, detail + f"; the plan is {status}, not {PLAN_ACTIVE}"
                      + (f" (it starts {start})" if start else ""),
                      fix="deploy once the plan is Active: nodes cannot launch from capacity that has not started")
    return passed(name, detail)


def _places(places: Sequence[tuple[str, str]]) -> str:
    shown = dict.fromkeys(f"{n} ({i})" if n and i else n or i for n, i in places)
    return ", ".join(shown)
