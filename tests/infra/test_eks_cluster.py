"""HyperPodEksCluster: API auth, no Auto Mode, pinned core add-ons, KMS secrets, logging, OIDC and admin entries."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template
from hyperpod_dpd.catalogue.versions import CORE_ADDONS
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster, _principal_id


@pytest.fixture(scope="module")
def dev(synthesized) -> dict[str, Any]:
    return synthesized.template("dev", "platform")


@pytest.fixture(scope="module")
def prod(synthesized) -> dict[str, Any]:
    return synthesized.template("prod", "platform")


def _cluster(template: dict[str, Any]) -> dict[str, Any]:
    (props,) = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "AWS::EKS::Cluster"]
    return props


def test_cluster_uses_api_auth_without_auto_mode_or_self_managed_addons(dev: dict[str, Any]) -> None:
    cluster = _cluster(dev)
    assert cluster["Name"] == "hpdpd-dev"
    assert cluster["Version"] == "1.35"
    assert cluster["AccessConfig"]["AuthenticationMode"] == "API"
    assert cluster["ComputeConfig"] == {"Enabled": False}
    assert cluster["BootstrapSelfManagedAddons"] is False
    assert not [v for v in dev["Resources"].values() if v["Type"] == "AWS::EKS::Nodegroup"]


def test_secrets_are_encrypted_with_a_rotating_customer_key(dev: dict[str, Any]) -> None:
    cluster = _cluster(dev)
    (encryption,) = cluster["EncryptionConfig"]
    assert encryption["Resources"] == ["secrets"]
    key_id = encryption["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    assert dev["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True


def test_every_control_plane_log_type_is_on(dev: dict[str, Any]) -> None:
    types = [t["Type"] for t in _cluster(dev)["Logging"]["ClusterLogging"]["EnabledTypes"]]
    assert types == ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def test_endpoint_access_follows_the_config(dev: dict[str, Any], prod: dict[str, Any], synthesized) -> None:
    # dev: public and private, open; staging: restricted CIDRs; prod: private only
    assert _cluster(dev)["ResourcesVpcConfig"]["EndpointPublicAccess"] is True
    staging = _cluster(synthesized.template("staging", "platform"))["ResourcesVpcConfig"]
    assert staging["PublicAccessCidrs"] == ["203.0.113.0/24"]
    assert _cluster(prod)["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert _cluster(prod)["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_kubectl_handler_runs_inside_the_vpc_so_a_private_endpoint_stays_reachable(synthesized, env: str) -> None:
    template = synthesized.template(env, "platform")
    configs = [v["Properties"].get("VpcConfig") for k, v in template["Resources"].items()
               if v["Type"] == "AWS::Lambda::Function" and "Kubectl" in k and "Handler" in k]
    assert configs and all(c and len(c["SubnetIds"]) >= 2 for c in configs)


@pytest.mark.parametrize("addon", [a.name for a in CORE_ADDONS])
def test_core_addon_is_pinned_and_overwrites_self_managed_copies(dev: dict[str, Any], addon: str) -> None:
    Template.from_json(dev).has_resource_properties("AWS::EKS::Addon", {
        "AddonName": addon,
        "AddonVersion": next(a for a in CORE_ADDONS if a.name == addon).version_for("1.35"),
        "ResolveConflicts": "OVERWRITE",
    })


def test_coredns_waits_for_the_cni(dev: dict[str, Any]) -> None:
    addons = {v["Properties"]["AddonName"]: (k, v) for k, v in dev["Resources"].items() if v["Type"] == "AWS::EKS::Addon"}
    assert addons["vpc-cni"][0] in addons["coredns"][1]["DependsOn"]


def test_oidc_provider_exists_for_irsa(dev: dict[str, Any]) -> None:
    Template.from_json(dev).has_resource_properties("AWS::IAM::OIDCProvider", {"ClientIdList": ["sts.amazonaws.com"]})


def test_admin_principals_get_cluster_admin_access_entries(prod: dict[str, Any]) -> None:
    entries = [v["Properties"] for v in prod["Resources"].values() if v["Type"] == "AWS::EKS::AccessEntry"]
    principals = {e["PrincipalArn"] for e in entries if isinstance(e["PrincipalArn"], str)}
    assert principals == {"arn:aws:iam::333333333333:role/PlatformAdmin", "arn:aws:iam::333333333333:role/BreakGlass"}
    for entry in entries:
        (policy,) = entry["AccessPolicies"]
        assert policy["AccessScope"] == {"Type": "cluster"}
        assert policy["PolicyArn"]["Fn::Join"][1][-1].endswith("AmazonEKSClusterAdminPolicy")


def test_admin_entry_ids_do_not_depend_on_list_order() -> None:
    arn = "arn:aws:iam::111111111111:role/PlatformAdmin"
    assert _principal_id(arn) == _principal_id(arn)
    assert _principal_id(arn).startswith("AdminPlatformAdmin")
    assert _principal_id(arn) != _principal_id("arn:aws:iam::222222222222:role/PlatformAdmin")


@pytest.fixture(scope="module")
def scratch() -> tuple[cdk.Stack, ec2.Vpc, ec2.SecurityGroup]:
    stack = cdk.Stack(cdk.App(), "Scratch", env=cdk.Environment(account="111111111111", region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"], nat_gateways=1)
    return stack, vpc, ec2.SecurityGroup(stack, "Sg", vpc=vpc)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"version": "1.29"}, r"HyperPodEksCluster.version: '1.29': must be one of 1.30"),
    ({"addon_versions": {"vpc-cni": "v1.18.2-eksbuild.1"}}, r"addon_versions.vpc-cni: 'v1.18.2-eksbuild.1': is below the minimum HyperPod needs \(v1.18.3"),
    ({"logging": ["api", "everything"]}, r"HyperPodEksCluster.logging: \['everything'\]: allowed: api"),
    ({"endpoint_access": "public"}, r"endpoint_access: 'public': must be 'public_and_private' or 'private'"),
])
def test_bad_props_fail_before_any_resource_is_made(scratch, kwargs: dict[str, Any], message: str) -> None:
    stack, vpc, sg = scratch
    props: dict[str, Any] = {"vpc": vpc, "subnets": vpc.private_subnets, "cluster_name": "c", "version": "1.35",
                             "security_group": sg, **kwargs}
    with pytest.raises(ConfigError, match=message):
        HyperPodEksCluster(stack, "Eks", **props)
    assert stack.node.try_find_child("Eks") is None


def test_optional_system_node_group_is_small_labelled_and_after_the_addons(write_config) -> None:
    # GIVEN dev with a system node group
    def add(data: dict[str, Any]) -> None:
        data["eks"]["system_node_group"] = {"instance_type": "m7i.large", "min_size": 1, "desired_size": 2, "max_size": 3}
    env = load_environment("dev", write_config(add))
    stack = cdk.Stack(cdk.App(), "WithNodes", env=cdk.Environment(account=env.account, region=env.region))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"], nat_gateways=1)
    # WHEN the cluster is built
    HyperPodEksCluster(stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="c", version="1.35",
                       security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc), system_node_group=env.eks.system_node_group)
    template = Template.from_stack(stack)
    # THEN one managed node group with the role label, sized as configured, created after the core add-ons
    template.has_resource_properties("AWS::EKS::Nodegroup", {
        "InstanceTypes": ["m7i.large"], "Labels": {"hyperpod-dpd/role": "system"},
        "ScalingConfig": {"MinSize": 1, "DesiredSize": 2, "MaxSize": 3}})
    (nodegroup,) = template.find_resources("AWS::EKS::Nodegroup").values()
    assert len([d for d in nodegroup["DependsOn"] if d.startswith("EksAddon")]) == 4
    template.has_resource_properties("AWS::EKS::Nodegroup", {"Subnets": Match.any_value()})
