"""``hpdpd preflight`` for an environment that is a member of a global inference gateway (``global.yaml``).

Checks, per gateway the environment belongs to:

* ``global-region:<gateway>``: the member's Region is not an opt-in Region ("It can be in a different Region, but not
  in an opt-in Region": botocore 1.44.8, sagemaker ``GlobalInferenceGatewayMember.ClusterArn``), from EC2
  ``DescribeRegions`` (``OptInStatus``: ``opt-in-not-required`` passes);
* ``global-lb-subnets:<gateway>``: an adopted VPC's private subnets tagged ``kubernetes.io/role/internal-elb`` span two
  AZs or more (``GlobalRoutingInsufficientAZs``); a created VPC's are tagged by the network stack;
* ``global-quota:<gateway>``: the gateways of the home Region against a Service Quotas quota whose name mentions
  "global inference gateway", when one is listed; none listed is a WARN (the limit could not be confirmed).

A check that cannot run is a WARN naming the permission it needs (``hyperpod_dpd.ops.checks.guarded``).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from hyperpod_dpd.ops.checks import Check, failed, guarded, passed, warned

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig
    from hyperpod_dpd.config.global_gateway import GlobalConfig, GlobalGatewayConfig

INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"  # the tag infra/efa_network.py puts on created private subnets
OPT_IN_NOT_REQUIRED = "opt-in-not-required"
QUOTA_WORDS = "global inference gateway"
REGION_PERMISSION = "ec2:DescribeRegions"
SUBNET_PERMISSION = "ec2:DescribeSubnets"
QUOTA_PERMISSION = "servicequotas:ListServiceQuotas and sagemaker:ListGlobalInferenceGateways"


class RegionalClients(Protocol):
    """Clients of the environment's Region and of another (the gateway's home): :class:`hyperpod_dpd.aws.ClientFactory`."""

    def client(self, service: str) -> Any: ...

    def new_client(self, service: str, *, region: str | None = None) -> Any: ...


def region_check(gateway: GlobalGatewayConfig, env: EnvironmentConfig, ec2: Any) -> Iterator[Check]:
    name = f"global-region:{gateway.name}"
    (region,) = ec2.describe_regions(RegionNames=[env.region], AllRegions=True)["Regions"]
    status = region.get("OptInStatus", "")
    if status == OPT_IN_NOT_REQUIRED:
        yield passed(name, f"{env.region} is not an opt-in Region")
    else:
        yield failed(name, f"{env.region} is an opt-in Region ({status}); a global inference gateway cannot have "
                           "members there", fix=f"remove {env.name} from gateway {gateway.name} in global.yaml")


def subnet_check(gateway: GlobalGatewayConfig, env: EnvironmentConfig, ec2: Any) -> Iterator[Check]:
    name = f"global-lb-subnets:{gateway.name}"
    if env.network.existing is None:
        yield passed(name, f"the network stack tags its private subnets {INTERNAL_ELB_TAG}")
        return
    ids = [s.subnet_id for s in env.network.existing.private_subnets]
    subnets = [s for page in ec2.get_paginator("describe_subnets").paginate(SubnetIds=ids) for s in page["Subnets"]]
    zones = sorted({s["AvailabilityZone"] for s in subnets
                    if any(t.get("Key") == INTERNAL_ELB_TAG and t.get("Value") == "1" for t in s.get("Tags", []))})
    if len(zones) >= 2:
        yield passed(name, f"{INTERNAL_ELB_TAG}=1 subnets in {', '.join(zones)}")
    else:
        yield failed(name, f"{INTERNAL_ELB_TAG}=1 subnets in {len(zones)} AZ ({', '.join(zones) or 'none'}); the "
                           "in-cluster load balancer needs two or more (GlobalRoutingInsufficientAZs)",
                     fix=f"tag private subnets of a second AZ {INTERNAL_ELB_TAG}=1")


def quota_check(gateway: GlobalGatewayConfig, home_sagemaker: Any, home_quotas: Any) -> Iterator[Check]:
    name = f"global-quota:{gateway.name}"
    quotas = [q for page in home_quotas.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker")
              for q in page.get("Quotas", []) if QUOTA_WORDS in " ".join(str(q.get("QuotaName", "")).split()).lower()]
    existing = [g for page in home_sagemaker.get_paginator("list_global_inference_gateways").paginate()
                for g in page["GlobalInferenceGatewaySummaries"]]
    ours = any(g["Name"] == gateway.name for g in existing)
    if not quotas:
        yield warned(name, f"{len(existing)} global inference gateways in {gateway.region}; Service Quotas lists no "
                           "quota for them, so the limit could not be confirmed")
        return
    limit = min(float(q.get("Value", 0.0)) for q in quotas)
    needed = len(existing) + (0 if ours else 1)
    if needed > limit:
        yield failed(name, f"{needed} global inference gateways needed in {gateway.region}, quota {limit:g}",
                     fix="request a quota increase in Service Quotas (sagemaker)")
    else:
        yield passed(name, f"{needed} of {limit:g} global inference gateways in {gateway.region}")


def global_checks(env: EnvironmentConfig, config: GlobalConfig, clients: RegionalClients) -> list[Check]:
    """The checks of every gateway ``env`` is a member of (none when it is in none)."""
    checks: list[Check] = []
    for gateway in config.gateways:
        if env.name not in gateway.member_environments:
            continue
        ec2 = clients.client("ec2")
        checks += guarded(partial(region_check, gateway, env, ec2), names=[f"global-region:{gateway.name}"],
                          permission=REGION_PERMISSION)
        checks += guarded(partial(subnet_check, gateway, env, ec2), names=[f"global-lb-subnets:{gateway.name}"],
                          permission=SUBNET_PERMISSION)
        # the quota and the gateways counted are the home Region's, not the member's
        sagemaker = clients.new_client("sagemaker", region=gateway.region)
        quotas = clients.new_client("service-quotas", region=gateway.region)
        checks += guarded(partial(quota_check, gateway, sagemaker, quotas), names=[f"global-quota:{gateway.name}"],
                          permission=QUOTA_PERMISSION)
    return checks
