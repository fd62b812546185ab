"""The vpc-cni add-on the platform installs enforces NetworkPolicies (off by default in the add-on), so the router
chart's policies take effect; one small stack per case instead of the whole platform, for speed."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from hyperpod_dpd.catalogue.versions import CORE_ADDONS, VPC_CNI_MINIMUM, parse_addon_version
from hyperpod_dpd.config.eks_existing import ExistingEksCluster
from hyperpod_dpd.infra.eks_cluster import VPC_CNI_NETWORK_POLICY, HyperPodEksCluster

# EKS user guide, "Limit Pod traffic with Kubernetes network policies": VPC CNI 1.14 or later.
NETWORK_POLICY_MINIMUM = parse_addon_version("v1.14.0")
EXISTING: dict[str, Any] = {
    "cluster_name": "shared", "version": "1.34",
    "oidc_provider_arn": "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
    "kubectl_role_arn": "arn:aws:iam::111111111111:role/platform/eks-kubectl",
    "cluster_security_group_id": "sg-0123456789abcdef0"}


def _addons(**props: Any) -> dict[str, dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "Scratch", env=cdk.Environment(account="111111111111", region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"], nat_gateways=1)
    existing = props.get("existing")
    HyperPodEksCluster(stack, "Eks", vpc=vpc, subnets=vpc.private_subnets,
                       cluster_name=existing.cluster_name if existing else "c",
                       version=existing.version if existing else "1.35",
                       security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc), public_access_cidrs=["198.51.100.0/24"],
                       **props)
    resources = Template.from_stack(stack).find_resources("AWS::EKS::Addon")
    return {r["Properties"]["AddonName"]: r["Properties"] for r in resources.values()}


@pytest.fixture(scope="module")
def created() -> dict[str, dict[str, Any]]:
    return _addons()


def test_the_vpc_cni_addon_of_a_created_cluster_enforces_network_policies(created: dict[str, dict[str, Any]]) -> None:
    # GIVEN the platform's EKS cluster WHEN it synthesizes
    # THEN its vpc-cni add-on carries the documented configuration value, as the JSON string CloudFormation takes
    assert json.loads(created["vpc-cni"]["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert VPC_CNI_NETWORK_POLICY == {"enableNetworkPolicy": "true"}
    # AND no other core add-on gets configuration values
    assert [name for name, props in created.items() if "ConfigurationValues" in props] == ["vpc-cni"]


def test_every_pinned_vpc_cni_version_supports_network_policies() -> None:
    (vpc_cni,) = [a for a in CORE_ADDONS if a.name == "vpc-cni"]
    assert VPC_CNI_MINIMUM >= NETWORK_POLICY_MINIMUM  # overrides below the minimum are refused already
    assert all(parse_addon_version(v) >= NETWORK_POLICY_MINIMUM for v in vpc_cni.versions.values())


def test_enforcement_can_be_left_off() -> None:
    assert "ConfigurationValues" not in _addons(network_policy=False)["vpc-cni"]


def test_an_adopted_cluster_gets_enforcement_only_on_a_vpc_cni_it_manages() -> None:
    managed = _addons(existing=ExistingEksCluster(**EXISTING, manage_addons=("vpc-cni",)))
    assert json.loads(managed["vpc-cni"]["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert managed["vpc-cni"]["PreserveOnDelete"] is True
    assert "vpc-cni" not in _addons(existing=ExistingEksCluster(**EXISTING, network_policy_enforced=True))
