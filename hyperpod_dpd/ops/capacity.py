"""Capacity checks: HyperPod instance quotas, instance types offered in the GPU AZ, free IPs in the GPU subnet.

IP rule: every HyperPod group runs in the GPU subnet, and the VPC CNI claims a whole ENI's worth of addresses per
node up front (its default ``WARM_ENI_TARGET=1``: the node's address plus a warm pool for pods). So each node that
still has to launch needs ``Ipv4AddressesPerInterface`` of its EC2 type (50 on ml.p5.48xlarge, 15 on
ml.m7i.2xlarge); nodes an existing cluster already runs are not counted again. The check fails when the subnet's
``AvailableIpAddressCount`` is below that sum.

Quotas (one ``quota:<type>`` row per configured type, then ``quota:instances-per-cluster`` and
``quota:instances-all-clusters``): the rules are in :mod:`hyperpod_dpd.ops.quotas`. A quota the account-wide rows
cannot confirm (no such quota listed, no value, the other clusters' instances unreadable) is a WARN, never a PASS.

Parked groups (``count: 0``) launch nothing: they need no quota, no offering in the AZ and no addresses, so every
check here looks at the groups that have instances only. Autoscaled groups count at their ``autoscaling.max_nodes``,
the most Karpenter may launch.

Headroom (one ``capacity:<group>`` row per GPU group): the GPUs of the group's most nodes against what the endpoints'
maximum replicas need there (:func:`hyperpod_dpd.config.capacity.placements`), and, when the cluster can be read,
against the nodes running now. Live node counts come from SageMaker's DescribeCluster (``CurrentCount``);
:func:`live_nodes` is the one place to read them from elsewhere (e.g. Kubernetes node capacity) instead.
"""

from __future__ import annotations

import ipaddress
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import error_code
from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.zones import zone_kind
from hyperpod_dpd.config.capacity import Demand, gpus_per_node, placements
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.ops.checks import Check, failed, passed, warned, why_unchecked
from hyperpod_dpd.ops.clusters import HyperPodState
from hyperpod_dpd.ops.quotas import (
    ACROSS_CLUSTERS_QUOTA,
    PER_CLUSTER_QUOTA,
    SERVICE_CODE,
    USAGE_PERMISSIONS,
    ClusterUsage,
    Quota,
    find_quotas,
    quota_name,
)

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig, InstanceGroup

OFFERING_PERMISSION = "ec2:DescribeInstanceTypeOfferings"
SUBNET_PERMISSIONS = "ec2:DescribeSubnets and ec2:DescribeInstanceTypes"
RESERVED_PER_SUBNET = 5  # AWS reserves the first four and the last address of every subnet
FALLBACK_IPS_PER_NODE = 50


def active_groups(env: EnvironmentConfig) -> tuple[InstanceGroup, ...]:
    """The instance groups that have instances: every group but the parked ones (``count: 0``)."""
    return tuple(g for g in env.hyperpod.instance_groups if not g.parked)


def configured_counts(env: EnvironmentConfig) -> dict[str, int]:
    """Configured instances per HyperPod instance type, summed over groups (autoscaled groups at their most nodes);
    a type only parked groups use is absent."""
    counts: dict[str, int] = defaultdict(int)
    for group in active_groups(env):
        counts[group.instance_type] += group.max_nodes
    return dict(counts)


PER_CLUSTER_ROW = "quota:instances-per-cluster"
ALL_CLUSTERS_ROW = "quota:instances-all-clusters"


def quota_row_names(env: EnvironmentConfig) -> list[str]:
    """The quota rows, in order: one per configured instance type, then the two cluster-wide instance quotas."""
    return [*(f"quota:{t}" for t in configured_counts(env)), PER_CLUSTER_ROW, ALL_CLUSTERS_ROW]


def quota_checks(env: EnvironmentConfig, service_quotas: Any, usage: ClusterUsage | BaseException) -> Iterator[Check]:
    """The quota rows (hyperpod_dpd/ops/quotas.py): ``usage`` is what the account's other HyperPod clusters hold, or
    the AWS error that stopped reading it (then a row that this environment alone does not exceed WARNs)."""
    counts = configured_counts(env)
    names = {t: quota_name(t) for t in counts}
    found = find_quotas(service_quotas, [*names.values(), PER_CLUSTER_QUOTA, ACROSS_CLUSTERS_QUOTA])
    known = None if isinstance(usage, BaseException) else usage
    unread = usage if isinstance(usage, BaseException) else None
    for instance_type, needed in counts.items():
        yield _quota_row(f"quota:{instance_type}", names[instance_type], found[names[instance_type]], needed,
                         others=known.of(instance_type) if known else 0,
                         unsure=known.unsure_of(instance_type) if known else 0,
                         holders=known.describe(instance_type) if known else "", unread=unread)
    total = sum(counts.values())
    yield _quota_row(PER_CLUSTER_ROW, PER_CLUSTER_QUOTA, found[PER_CLUSTER_QUOTA], total, shared=False)
    yield _quota_row(ALL_CLUSTERS_ROW, ACROSS_CLUSTERS_QUOTA, found[ACROSS_CLUSTERS_QUOTA], total,
                     others=known.total if known else 0, holders=known.describe() if known else "", unread=unread)


def _quota_row(name: str, label: str, quota: Quota | None, needed: int, *, shared: bool = True, others: int = 0,
               unsure: int = 0, holders: str = "", unread: BaseException | None = None) -> Check:
    if quota is None:
        return warned(name, f"no quota named '{label}' in service code {SERVICE_CODE}, so the limit could not be "
                            "confirmed", fix=f"look the quota up in the Service Quotas console (SageMaker, '{label}') "
                                             "and request it if the account has none")
    if quota.value is None:
        return warned(name, f"Service Quotas lists '{quota.name}' ({quota.code}) without a value, so the limit could "
                            "not be confirmed", fix=f"aws service-quotas get-service-quota --service-code "
                                                    f"{SERVICE_CODE} --quota-code {quota.code}")
    value = int(quota.value)
    source = "applied" if quota.applied else "AWS default"
    want = needed + others
    increase = (f"aws service-quotas request-service-quota-increase --service-code {SERVICE_CODE} "
                f"--quota-code {quota.code} --desired-value ")
    if not shared:
        if value < needed:
            return failed(name, f"quota {value} ({source}) is below the {needed} instance(s) of this cluster",
                          fix=increase + str(needed))
        return passed(name, f"quota {value} ({source}) covers the {needed} instance(s) of this cluster")
    held = f" and the {others} that other clusters of the account hold ({holders})" if others else ""
    if value < want:
        what = f"{want} instance(s) needed: {needed} configured{held}" if others else f"{needed} instance(s) configured"
        return failed(name, f"quota {value} ({source}) is below the {what}", fix=increase + str(want))
    if unread is not None:
        reason, fix = why_unchecked(unread, permission=USAGE_PERMISSIONS)
        return warned(name, f"quota {value} ({source}) covers the {needed} instance(s) configured, but the account's "
                            f"other HyperPod clusters share it and what they hold could not be read: {reason}", fix=fix)
    if unsure and value < want + unsure:
        return warned(name, f"quota {value} ({source}) covers the {needed} instance(s) configured{held}, but "
                            f"{unsure} more instance(s) of flexible groups in other clusters may take it",
                      fix=f"check the other clusters' flexible instance groups, or {increase}{want + unsure}")
    return passed(name, f"quota {value} ({source}) covers the {needed} instance(s) configured"
                        + (held or "; no other HyperPod cluster of the account holds any"))


def _zones(env: EnvironmentConfig) -> dict[str, set[str]]:
    zones: dict[str, set[str]] = defaultdict(set)
    for group in active_groups(env):
        zones[group.availability_zone or env.network.gpu_availability_zone].add(group.instance_type)
    return zones


def offering_checks(env: EnvironmentConfig, ec2: Any) -> Iterator[Check]:
    plans = {g.instance_type for g in active_groups(env) if g.training_plan_arn}
    for zone, types in sorted(_zones(env).items()):
        ec2_names = {INSTANCE_TYPES[t].ec2_name: t for t in types}
        offered: set[str] = set()
        paginator = ec2.get_paginator("describe_instance_type_offerings")
        # an AZ ID is looked up as one (LocationType availability-zone-id: botocore 1.44.8 ec2 service-2.json)
        location_type = "availability-zone-id" if zone_kind(zone) == "id" else "availability-zone"
        for page in paginator.paginate(LocationType=location_type, Filters=[
                {"Name": "location", "Values": [zone]}, {"Name": "instance-type", "Values": sorted(ec2_names)}]):
            offered.update(str(o["InstanceType"]) for o in page.get("InstanceTypeOfferings", []) if o.get("InstanceType"))
        for ec2_name, instance_type in sorted(ec2_names.items(), key=lambda item: item[1]):
            name = f"offering:{instance_type}"
            if ec2_name in offered:
                yield passed(name, f"{ec2_name} is offered in {zone}")
            elif instance_type in plans:
                yield warned(name, f"{ec2_name} is not offered on demand in {zone}; capacity must come from the "
                                   "training plan", fix="check that the training plan reserves capacity in " + zone)
            else:
                yield failed(name, f"{ec2_name} is not offered in {zone}",
                             fix="choose an AZ that offers it (aws ec2 describe-instance-type-offerings --location-type "
                                 f"availability-zone --filters Name=instance-type,Values={ec2_name}) or set a training plan")


def ips_per_node(env: EnvironmentConfig, ec2: Any) -> dict[str, int]:
    """Addresses one node of each configured type claims (EC2's ``Ipv4AddressesPerInterface``)."""
    names = {INSTANCE_TYPES[g.instance_type].ec2_name: g.instance_type for g in active_groups(env)}
    found: dict[str, int] = {}
    for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=sorted(names)):
        for info in page.get("InstanceTypes", []):
            if info.get("InstanceType") in names:  # an answer about a type not asked for is not used
                found[names[info["InstanceType"]]] = int((info.get("NetworkInfo") or {}).get("Ipv4AddressesPerInterface")
                                                         or 0)
    return {t: found.get(t) or INSTANCE_TYPES[t].ipv4_per_eni or FALLBACK_IPS_PER_NODE for t in names.values()}


def needed_ips(env: EnvironmentConfig, per_node: dict[str, int], cluster: HyperPodState | None) -> tuple[int, int]:
    """(addresses needed, nodes still to launch) for the configured groups, minus nodes already running."""
    running = cluster.current_counts() if cluster else {}
    groups = active_groups(env)
    nodes = {g.name: max(0, g.max_nodes - running.get(g.name, 0)) for g in groups}
    total = sum(nodes[g.name] * per_node[g.instance_type] for g in groups)
    return total, sum(nodes.values())


def subnet_checks(env: EnvironmentConfig, ec2: Any, cluster: HyperPodState | None) -> Iterator[Check]:
    name = "subnet-ips"
    per_node = ips_per_node(env, ec2)
    need, nodes = needed_ips(env, per_node, cluster)
    sizing = ", ".join(f"{t}: {n}/node" for t, n in sorted(per_node.items()))
    existing = env.network.existing
    if existing is None:
        assert env.network.create is not None
        cidr = ipaddress.IPv4Network(env.network.create.gpu_subnet_cidr)
        usable = cidr.num_addresses - RESERVED_PER_SUBNET
        if nodes == 0:
            yield passed(name, f"GPU subnet {cidr} has {usable} usable addresses; the cluster already runs every "
                               "configured node")
        elif usable < need:
            yield failed(name, f"the new GPU subnet {cidr} has {usable} usable addresses; {nodes} node(s) need {need} "
                               f"({sizing})", fix="set network.create.gpu_subnet_cidr to a larger block (up to /16)")
        else:
            yield passed(name, f"new VPC: GPU subnet {cidr} has {usable} usable addresses for the {need} that "
                               f"{nodes} node(s) need ({sizing})")
        return
    subnet_id = existing.gpu_subnet.subnet_id
    try:  # DescribeSubnets paginates (botocore's paginator), even for one SubnetIds entry
        subnets = [s for page in ec2.get_paginator("describe_subnets").paginate(SubnetIds=[subnet_id])
                   for s in page.get("Subnets", []) if s.get("SubnetId") == subnet_id]
    except Exception as exc:
        if error_code(exc).endswith("NotFound"):  # InvalidSubnetID.NotFound
            subnets = []
        else:
            raise
    if not subnets:
        yield failed(name, f"GPU subnet {subnet_id} does not exist in {env.account}/{env.region}",
                     fix="set network.existing.gpu_subnet.subnet_id to a subnet of " + existing.vpc_id)
        return
    subnet = subnets[0]
    if subnet.get("VpcId") != existing.vpc_id:
        yield failed(name, f"GPU subnet {subnet_id} belongs to {subnet.get('VpcId')}, not {existing.vpc_id}",
                     fix="set network.existing.vpc_id or gpu_subnet.subnet_id so they match")
        return
    if env.network.gpu_availability_zone not in (subnet.get("AvailabilityZone"), subnet.get("AvailabilityZoneId")):
        yield failed(name, f"GPU subnet {subnet_id} is in {subnet.get('AvailabilityZone')}, not the GPU AZ "
                           f"{env.network.gpu_availability_zone}",
                     fix="use a subnet in the GPU AZ (prefill and decode must share one AZ for EFA)")
        return
    if subnet.get("AvailableIpAddressCount") is None and nodes:
        yield warned(name, f"EC2 did not report the free addresses of GPU subnet {subnet_id}, so whether {nodes} "
                           f"node(s) fit ({need} addresses) could not be checked",
                     fix=f"aws ec2 describe-subnets --subnet-ids {subnet_id}")
        return
    free = int(subnet.get("AvailableIpAddressCount") or 0)
    if nodes == 0:
        yield passed(name, f"GPU subnet {subnet_id} has {free} free addresses; the cluster already runs every "
                           "configured node")
    elif free < need:
        yield failed(name, f"GPU subnet {subnet_id} has {free} free addresses; {nodes} node(s) need {need} ({sizing})",
                     fix="add a larger subnet (a secondary /16 CIDR in the GPU AZ) or free addresses")
    else:
        yield passed(name, f"GPU subnet {subnet_id} has {free} free addresses for the {need} that {nodes} node(s) "
                           f"need ({sizing})")


# -- headroom ------------------------------------------------------------------------------------------------------------

def live_nodes(cluster: HyperPodState | None) -> Mapping[str, int] | None:
    """Nodes running now per instance group, or None when the cluster could not be read or does not exist yet."""
    return cluster.current_counts() if cluster is not None else None


def _gpus(count: int, per_node: int) -> str:
    return f"{count * per_node} GPUs ({count} x {per_node})"


def headroom_checks(env: EnvironmentConfig, endpoints: Iterable[Any], live: Mapping[str, int] | None) -> Iterator[Check]:
    """One row per GPU group: free GPUs at the group's most nodes after the endpoints' maximum replicas (FAIL when
    they do not fit), and WARN when the nodes running now hold fewer GPUs than the endpoints' minimum replicas.
    Endpoints that are not typed endpoint configurations (doubles, other tools) are left out."""
    typed = [e for e in endpoints if isinstance(e, EndpointConfig)]
    placed = placements(env.hyperpod, typed)
    for group in env.hyperpod.instance_groups:
        if not group.is_gpu:
            continue
        per_node = gpus_per_node(group)
        demands = placed.by_group.get(group.name, [])
        yield _headroom(group.name, group.instance_type, group.max_nodes, per_node, demands,
                        None if live is None else live.get(group.name, 0), bound=_bound(group))
    for role, shared in placed.by_role.items():
        pool = [g for g in env.hyperpod.groups(role) if not g.parked]
        nodes = sum(g.max_nodes for g in pool)
        capacity = sum(g.max_nodes * gpus_per_node(g) for g in pool)
        need = sum(d.max_gpus for g in pool for d in placed.by_group.get(g.name, [])) + sum(d.max_gpus for d in shared)
        names = ", ".join(g.name for g in pool)
        detail = (f"{role} groups {names}: {capacity} GPUs at {nodes} node(s) at most; the endpoints placed by role "
                  f"({', '.join(d.describe() for d in shared)}) and those on the groups need {need}; {capacity - need} free")
        if need > capacity:
            yield failed(f"capacity:{role}", detail, fix="raise the groups' count or autoscaling.max_nodes, or lower "
                                                         "the endpoints' max_replicas")
        else:
            yield passed(f"capacity:{role}", detail)


def _bound(group: InstanceGroup) -> str:
    if group.autoscaled:
        return f"autoscaling up to {group.max_nodes} node(s)"
    return "parked" if group.parked else f"count {group.count}"


def _headroom(name: str, instance_type: str, nodes: int, per_node: int, demands: list[Demand], running: int | None, *,
              bound: str) -> Check:
    capacity = nodes * per_node
    need = sum(d.max_gpus for d in demands)
    floor = sum(d.min_gpus for d in demands)
    listed = ", ".join(d.describe() for d in demands) or "no endpoint"
    detail = (f"{instance_type} {bound}: {_gpus(nodes, per_node)} at most; the endpoints' maximum replicas need "
              f"{need} ({listed}); {capacity - need} free")
    if running is not None:
        detail += f"; {running} node(s) running now ({running * per_node} GPUs)"
    row = f"capacity:{name}"
    if need > capacity:
        more = math.ceil(need / per_node) if per_node else 0
        return failed(row, detail, fix=f"raise the group to {more} node(s) (count or autoscaling.max_nodes), or lower "
                                       "the endpoints' max_replicas")
    if running is not None and running * per_node < floor:
        return warned(row, detail + f"; the endpoints' minimum replicas need {floor} GPUs now",
                      fix="wait for the nodes ('hpdpd wait --for cluster'); for an autoscaled group, check the "
                          "NodePool's events (kubectl describe nodepool)")
    return passed(row, detail)
