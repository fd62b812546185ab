"""SageMaker HyperPod instance quotas from Service Quotas, and what the account's other HyperPod clusters hold.

Which quotas (SageMaker Developer Guide, "Prerequisites for using SageMaker HyperPod", quotas table; service code
``sagemaker``), each account-wide in the Region, so every cluster of the account counts against it:

* ``ml.<type> for cluster usage``: "must be greater than the number of instances to add across all your clusters
  in your account in aggregate", compared with this environment's instances of that type (every group of the type,
  autoscaled groups at their most nodes) plus those the account's other clusters hold;
* ``Maximum number instances allowed per SageMaker HyperPod cluster``: this environment's instances, all types;
* ``Total number of instances allowed across SageMaker HyperPod clusters``: those plus the other clusters' instances.

Quotas are found by name, not by quota code. The codes (``L-`` and eight hex digits) are data of the Service Quotas
service: botocore's ``service-quotas`` model carries none (its ``QuotaCode`` is a free string), AWS documents these
quotas by name only, and published listings give different codes for the same name, so a hard-coded code could not
be confirmed. The code shown in a fix is the one AWS's own answer carries. Matching rule: a quota belongs to ``name``
when its ``QuotaName``, compared case-insensitively with runs of whitespace collapsed, is exactly ``name``. The
applied value (``ListServiceQuotas``) wins; a quota never adjusted in the account may be listed only with its default
(``ListAWSDefaultServiceQuotas``), which is then used. Both listings are read through their botocore paginators.

The other clusters: SageMaker ``ListClusters`` (paginator, ``ClusterSummaries[].ClusterName``) and ``DescribeCluster``
of each (botocore 1.44.8 ``sagemaker``: ``InstanceGroups[]`` and ``RestrictedInstanceGroups[]`` with
``InstanceType``, ``CurrentCount``, ``TargetCount``; a flexible group has no ``InstanceType`` but
``InstanceTypeDetails[]`` with each type's ``CurrentCount`` and ``InstanceRequirements.DesiredInstanceTypes``). A
group holds ``max(CurrentCount, TargetCount)``: what it runs, or what it is scaling to. The instances of a flexible
group that are not yet of a known type may become any of its desired types: they are *unsure* for each of them (a
quota row WARNs when only they would exceed it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.aws import is_not_found

# The quota names as the SageMaker Developer Guide's HyperPod prerequisites list them (quotas table, "Search Term")
SERVICE_CODE = "sagemaker"
QUOTA_SUFFIX = "for cluster usage"  # "ml.<instance_type> for cluster usage", e.g. "ml.p5.48xlarge for cluster usage"
PER_CLUSTER_QUOTA = "Maximum number instances allowed per SageMaker HyperPod cluster"
ACROSS_CLUSTERS_QUOTA = "Total number of instances allowed across SageMaker HyperPod clusters"
QUOTA_PERMISSIONS = "servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas"
USAGE_PERMISSIONS = "sagemaker:ListClusters and sagemaker:DescribeCluster"
ANY_TYPE = "*"  # unsure instances of a flexible group that names no desired type: any type


@dataclass(frozen=True, kw_only=True)
class Quota:
    name: str
    code: str
    value: float | None  # None: the answer carries no value (Service Quotas' ``Value`` is optional)
    applied: bool  # False: the AWS default, the account never changed it


def quota_name(instance_type: str) -> str:
    return f"{instance_type} {QUOTA_SUFFIX}"


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _listing(client: Any, operation: str) -> dict[str, Quota]:
    found: dict[str, Quota] = {}
    for page in client.get_paginator(operation).paginate(ServiceCode=SERVICE_CODE):
        for quota in page.get("Quotas", []):
            name = str(quota.get("QuotaName", ""))
            value = quota.get("Value")
            found.setdefault(_key(name), Quota(name=name, code=str(quota.get("QuotaCode", "")),
                                                value=None if value is None else float(value),
                                                applied=operation == "list_service_quotas"))
    return found


def find_quotas(client: Any, names: list[str]) -> dict[str, Quota | None]:
    """The quota of each name (None when no quota carries it): applied values first, then AWS's defaults."""
    applied = _listing(client, "list_service_quotas")
    result: dict[str, Quota | None] = {n: applied.get(_key(n)) for n in names}
    if any(q is None for q in result.values()):
        defaults = _listing(client, "list_aws_default_service_quotas")
        result = {n: q or defaults.get(_key(n)) for n, q in result.items()}
    return result


def cluster_quotas(client: Any, instance_types: list[str]) -> dict[str, Quota | None]:
    """The "<type> for cluster usage" quota of each instance type (None when no quota carries the name)."""
    found = find_quotas(client, [quota_name(t) for t in instance_types])
    return {t: found[quota_name(t)] for t in instance_types}


# -- the other clusters of the account -----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ClusterUsage:
    """Instances the account's other HyperPod clusters in the Region hold."""

    clusters: tuple[str, ...] = ()
    by_type: dict[str, int] = field(default_factory=dict)  # instances of a known type
    unsure: dict[str, int] = field(default_factory=dict)  # instances that may become the type (ANY_TYPE: any)
    total: int = 0  # every instance, whatever its type
    holders: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> the clusters holding it

    def of(self, instance_type: str) -> int:
        return self.by_type.get(instance_type, 0)

    def unsure_of(self, instance_type: str) -> int:
        return self.unsure.get(instance_type, 0) + self.unsure.get(ANY_TYPE, 0)

    def describe(self, instance_type: str | None = None) -> str:
        """Who holds the instances counted: ``a, b`` (of ``instance_type``, or any)."""
        names = self.holders.get(instance_type, ()) if instance_type else self.clusters
        return ", ".join(names)


def other_clusters_usage(sagemaker: Any, own_cluster: str) -> ClusterUsage:
    """The instances every HyperPod cluster of the account in this Region but ``own_cluster`` holds."""
    names: list[str] = []
    for page in sagemaker.get_paginator("list_clusters").paginate():
        names.extend(str(s.get("ClusterName") or "") for s in page.get("ClusterSummaries", []))
    by_type: dict[str, int] = defaultdict(int)
    unsure: dict[str, int] = defaultdict(int)
    holders: dict[str, list[str]] = defaultdict(list)
    total, read = 0, []
    for name in names:
        if not name or name == own_cluster:
            continue
        try:
            cluster = sagemaker.describe_cluster(ClusterName=name)
        except Exception as exc:
            if is_not_found(exc):  # deleted between the listing and now: it holds nothing
                continue
            raise
        read.append(name)
        for group in [*(cluster.get("InstanceGroups") or []), *(cluster.get("RestrictedInstanceGroups") or [])]:
            held = max(int(group.get("CurrentCount") or 0), int(group.get("TargetCount") or 0))
            total += held
            for instance_type, count, maybe in _group_types(group, held):
                if count:
                    by_type[instance_type] += count
                if maybe:
                    unsure[instance_type] += maybe
                if (count or maybe) and name not in holders[instance_type]:
                    holders[instance_type].append(name)
    return ClusterUsage(clusters=tuple(read), by_type=dict(by_type), unsure=dict(unsure), total=total,
                        holders={t: tuple(n) for t, n in holders.items()})


def _group_types(group: dict[str, Any], held: int) -> list[tuple[str, int, int]]:
    """(instance type, instances of it, instances that may become it) of one group of another cluster."""
    if group.get("InstanceType"):
        return [(str(group["InstanceType"]), held, 0)]
    details = [d for d in group.get("InstanceTypeDetails") or [] if d.get("InstanceType")]
    rows = [(str(d["InstanceType"]), int(d.get("CurrentCount") or 0), 0) for d in details]
    pending = held - sum(count for _, count, _ in rows)
    if pending > 0:
        requirements = group.get("InstanceRequirements") or {}
        desired = requirements.get("DesiredInstanceTypes") or requirements.get("CurrentInstanceTypes") or [ANY_TYPE]
        rows += [(str(t), 0, pending) for t in desired]
    return rows
