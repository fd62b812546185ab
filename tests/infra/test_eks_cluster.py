"""HyperPodEksCluster: API auth, no Auto Mode, pinned core add-ons, KMS secrets, logging, OIDC and admin entries;
an adopted cluster (``existing``) imported with its OIDC provider and kubectl role, its add-ons left alone unless opted in."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Capture, Match, Template

from hyperpod_dpd.catalogue.operator import OBSERVABILITY_ADDON_VERSION
from hyperpod_dpd.catalogue.versions import CORE_ADDONS
from hyperpod_dpd.config import InstanceGroup, SystemNodeGroup, load_environment
from hyperpod_dpd.config.eks_existing import ExistingEksCluster
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster, principal_id
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.hyperpod_dependencies import HyperPodDependencies
from hyperpod_dpd.infra.inference_operator import InferenceOperator, ObservabilityOptions


@pytest.fixture(scope="module")
def dev_platform(synthesized) -> dict[str, Any]:
    return synthesized.template("dev", "platform")


@pytest.fixture(scope="module")
def prod_platform(synthesized) -> dict[str, Any]:
    return synthesized.template("prod", "platform")


def _cluster(template: dict[str, Any]) -> dict[str, Any]:
    (props,) = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "AWS::EKS::Cluster"]
    return props


def test_cluster_uses_api_auth_without_auto_mode_or_self_managed_addons(dev_platform: dict[str, Any]) -> None:
    cluster = _cluster(dev_platform)
    assert cluster["Name"] == "hpdpd-dev"
    assert cluster["Version"] == "1.35"
    assert cluster["AccessConfig"]["AuthenticationMode"] == "API"
    assert cluster["ComputeConfig"] == {"Enabled": False}
    assert cluster["BootstrapSelfManagedAddons"] is False
    assert not [v for v in dev_platform["Resources"].values() if v["Type"] == "AWS::EKS::Nodegroup"]


def test_secrets_are_encrypted_with_a_rotating_customer_key(dev_platform: dict[str, Any]) -> None:
    cluster = _cluster(dev_platform)
    (encryption,) = cluster["EncryptionConfig"]
    assert encryption["Resources"] == ["secrets"]
    key_id = encryption["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    assert dev_platform["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True


def test_every_control_plane_log_type_is_on(dev_platform: dict[str, Any]) -> None:
    types = [t["Type"] for t in _cluster(dev_platform)["Logging"]["ClusterLogging"]["EnabledTypes"]]
    assert types == ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def test_endpoint_access_follows_the_config(dev_platform: dict[str, Any], prod_platform: dict[str, Any], synthesized) -> None:
    # dev: public and private, open; staging: restricted CIDRs; prod: private only
    assert _cluster(dev_platform)["ResourcesVpcConfig"]["EndpointPublicAccess"] is True
    staging = _cluster(synthesized.template("staging", "platform"))["ResourcesVpcConfig"]
    assert staging["PublicAccessCidrs"] == ["203.0.113.0/24"]
    assert _cluster(prod_platform)["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert _cluster(prod_platform)["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_kubectl_handler_runs_inside_the_vpc_so_a_private_endpoint_stays_reachable(synthesized, env: str) -> None:
    template = synthesized.template(env, "platform")
    configs = [v["Properties"].get("VpcConfig") for k, v in template["Resources"].items()
               if v["Type"] == "AWS::Lambda::Function" and "Kube" in k and "Handler" in k]
    assert configs and all(c and len(c["SubnetIds"]) >= 2 for c in configs)


@pytest.mark.parametrize("addon", [a.name for a in CORE_ADDONS])
def test_core_addon_is_pinned_and_overwrites_self_managed_copies(dev_platform: dict[str, Any], addon: str) -> None:
    Template.from_json(dev_platform).has_resource_properties("AWS::EKS::Addon", {
        "AddonName": addon,
        "AddonVersion": next(a for a in CORE_ADDONS if a.name == addon).version_for("1.35"),
        "ResolveConflicts": "OVERWRITE",
    })


def test_coredns_waits_for_the_cni(dev_platform: dict[str, Any]) -> None:
    addons = {v["Properties"]["AddonName"]: (k, v) for k, v in dev_platform["Resources"].items() if v["Type"] == "AWS::EKS::Addon"}
    assert addons["vpc-cni"][0] in addons["coredns"][1]["DependsOn"]


def test_oidc_provider_exists_for_irsa(dev_platform: dict[str, Any]) -> None:
    Template.from_json(dev_platform).has_resource_properties("AWS::IAM::OIDCProvider", {"ClientIdList": ["sts.amazonaws.com"]})


def test_admin_principals_get_cluster_admin_access_entries(prod_platform: dict[str, Any]) -> None:
    entries = [v["Properties"] for v in prod_platform["Resources"].values() if v["Type"] == "AWS::EKS::AccessEntry"]
    principals = {e["PrincipalArn"] for e in entries if isinstance(e["PrincipalArn"], str)}
    assert principals == {"arn:aws:iam::333333333333:role/PlatformAdmin", "arn:aws:iam::333333333333:role/BreakGlass"}
    for entry in entries:
        (policy,) = entry["AccessPolicies"]
        assert policy["AccessScope"] == {"Type": "cluster"}
        assert policy["PolicyArn"]["Fn::Join"][1][-1].endswith("AmazonEKSClusterAdminPolicy")


def test_admin_entry_ids_do_not_depend_on_list_order() -> None:
    arn = "arn:aws:iam::111111111111:role/PlatformAdmin"
    assert principal_id(arn) == principal_id(arn)
    assert principal_id(arn).startswith("AdminPlatformAdmin")
    assert principal_id(arn) != principal_id("arn:aws:iam::222222222222:role/PlatformAdmin")


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
    ({"public_access_cidrs": ()}, r"HyperPodEksCluster.public_access_cidrs: missing: is required with a public endpoint"),
])
def test_bad_props_fail_before_any_resource_is_made(scratch, kwargs: dict[str, Any], message: str) -> None:
    stack, vpc, sg = scratch
    props: dict[str, Any] = {"vpc": vpc, "subnets": vpc.private_subnets, "cluster_name": "c", "version": "1.35",
                             "security_group": sg, "public_access_cidrs": ["198.51.100.0/24"], **kwargs}
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
                       security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc), system_node_group=env.eks.system_node_group,
                       public_access_cidrs=env.eks.public_access_cidrs)
    template = Template.from_stack(stack)
    # THEN one managed node group with the role label, sized as configured, created after the core add-ons
    template.has_resource_properties("AWS::EKS::Nodegroup", {
        "InstanceTypes": ["m7i.large"], "Labels": {"hyperpod-dpd/role": "system"},
        "ScalingConfig": {"MinSize": 1, "DesiredSize": 2, "MaxSize": 3}})
    (nodegroup,) = template.find_resources("AWS::EKS::Nodegroup").values()
    assert len([d for d in nodegroup["DependsOn"] if d.startswith("EksAddon")]) == 4
    template.has_resource_properties("AWS::EKS::Nodegroup", {"Subnets": Match.any_value()})


# -- an adopted cluster (eks.existing) -------------------------------------------------------------------------------

OIDC_ARN = "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
KUBECTL_ROLE_ARN = "arn:aws:iam::111111111111:role/platform/eks-kubectl"
EXISTING: dict[str, Any] = {
    "cluster_name": "shared", "version": "1.34", "oidc_provider_arn": OIDC_ARN, "kubectl_role_arn": KUBECTL_ROLE_ARN,
    "cluster_security_group_id": "sg-0123456789abcdef0", "manage_addons": ["eks-pod-identity-agent"]}


@pytest.fixture(scope="module")
def adopted(cdk_context: dict[str, Any]) -> tuple[HyperPodEksCluster, dict[str, Any], list[Any]]:
    """GIVEN a cluster adopted with one opted-in core add-on, the HyperPod dependencies chart, a manifest, a HyperPod
    cluster and the inference operator (with observability) on it, in one small stack, synthesized once."""
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Adopted", env=cdk.Environment(account="111111111111", region="us-west-2"))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a", "us-west-2b"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        private_subnet_route_table_ids=["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"])
    eks_cluster = HyperPodEksCluster(
        stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="shared", version="1.34",
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "Efa", "sg-0123456789abcdef9"),
        existing=ExistingEksCluster(**EXISTING))
    HyperPodDependencies(stack, "HyperPodDependencies", cluster=eks_cluster.cluster, region="us-west-2",
                         gpu_instance_types=["ml.p5.48xlarge"], repository="oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/hp",
                         digest="sha256:" + "0" * 64)
    eks.KubernetesManifest(stack, "Namespace", cluster=eks_cluster.cluster,
                           manifest=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}}])
    hyperpod = HyperPodCluster(
        stack, "HyperPod", cluster_name="hp", region="us-west-2", eks_cluster_arn=eks_cluster.cluster_arn,
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=[eks_cluster.cluster.cluster_security_group_id],
        instance_groups=[InstanceGroup(name="prefill", role="prefill", instance_type="ml.p5.48xlarge", count=1)],
        lifecycle_bucket_name="sagemaker-hp-111111111111-us-west-2", depends_on=list(eks_cluster.addons.values()))
    InferenceOperator(stack, "InferenceOperator", eks_cluster=eks_cluster, hyperpod_cluster=hyperpod,
                      operator_version="3.4", execution_role_name="SageMakerHyperPodInference-hp",
                      tls_bucket_name="hyperpod-tls-111111111111-us-west-2",
                      observability=ObservabilityOptions(addon_version=OBSERVABILITY_ADDON_VERSION))
    assembly = app.synth()
    artifact = assembly.get_stack_by_name("Adopted")
    return eks_cluster, artifact.template, artifact.messages


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def test_an_adopted_cluster_is_imported_not_created(adopted) -> None:
    eks_cluster, template, _ = adopted
    # THEN no cluster, OIDC provider or node group is created, and no secrets key
    for type_ in ("AWS::EKS::Cluster", "AWS::IAM::OIDCProvider", "AWS::EKS::Nodegroup"):
        assert _of_type(template, type_) == {}, type_
    assert [k for k in _of_type(template, "AWS::KMS::Key") if k.startswith("Eks")] == []
    assert (eks_cluster.cluster_name, eks_cluster.secrets_key, eks_cluster.system_nodegroup) == ("shared", None, None)
    # AND HyperPod orchestrates it by a partition-aware ARN, in its cluster security group
    (hyperpod,) = _of_type(template, "AWS::SageMaker::Cluster").values()
    assert hyperpod["Properties"]["Orchestrator"]["Eks"]["ClusterArn"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":eks:us-west-2:111111111111:cluster/shared"]]}
    assert hyperpod["Properties"]["VpcConfig"]["SecurityGroupIds"] == ["sg-0123456789abcdef0"]


def test_only_the_opted_in_core_addons_are_created(adopted) -> None:
    _, template, _ = adopted
    addons = {v["Properties"]["AddonName"]: (k, v) for k, v in _of_type(template, "AWS::EKS::Addon").items()}
    # THEN of the core add-ons only eks-pod-identity-agent, pinned for the adopted version, on the adopted cluster,
    # and left running if the stack is deleted
    assert [a.name for a in CORE_ADDONS if a.name in addons] == ["eks-pod-identity-agent"]
    agent_id, agent = addons["eks-pod-identity-agent"]
    assert agent["Properties"] == {"AddonName": "eks-pod-identity-agent", "ClusterName": "shared",
                                   "AddonVersion": next(a for a in CORE_ADDONS if a.name == "eks-pod-identity-agent")
                                   .version_for("1.34"), "ResolveConflicts": "OVERWRITE", "PreserveOnDelete": True}
    # AND the observability add-on waits for it
    assert agent_id in addons["amazon-sagemaker-hyperpod-observability"][1]["DependsOn"]


def test_helm_charts_and_manifests_run_as_the_given_kubectl_role(adopted) -> None:
    _, template, _ = adopted
    resources = template["Resources"]
    custom = [*_of_type(template, "Custom::AWSCDK-EKS-HelmChart").values(),
              *_of_type(template, "Custom::AWSCDK-EKS-KubernetesResource").values()]
    assert len(custom) == 2 and all(c["Properties"]["ClusterName"] == "shared" for c in custom)
    # THEN both go through the one provider framework, whose handler runs as the kubectl role, outside the VPC
    (framework,) = {c["Properties"]["ServiceToken"]["Fn::GetAtt"][0] for c in custom}
    handler = resources[resources[framework]["Properties"]["Environment"]["Variables"]["USER_ON_EVENT_FUNCTION_ARN"]["Fn::GetAtt"][0]]
    assert handler["Properties"]["Role"] == KUBECTL_ROLE_ARN
    assert "VpcConfig" not in handler["Properties"]
    assert any(layer["Ref"].startswith("EksKubectlLayer") for layer in handler["Properties"]["Layers"])  # kubectl 1.34
    # AND the role itself is not created; it only gets eks:DescribeCluster on the adopted cluster
    (policy,) = [p["Properties"] for p in _of_type(template, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == ["eks-kubectl"]]
    assert [s["Action"] for s in policy["PolicyDocument"]["Statement"]] == ["eks:DescribeCluster"]
    assert "Conditions" not in template  # the provider's ECR Public condition is for a role it creates


def test_operator_roles_trust_the_given_oidc_provider(adopted) -> None:
    _, template, _ = adopted
    resources = template["Resources"]
    roles = {k: v for k, v in _of_type(template, "AWS::IAM::Role").items() if k.startswith("InferenceOperator")}
    web = {k: s for k, r in roles.items() for s in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
           if s["Action"] == "sts:AssumeRoleWithWebIdentity"}
    # THEN every IRSA role federates with the given provider, and its conditions name the provider's issuer
    assert {k[len("InferenceOperator"):-8] for k in web} >= {
        "ExecutionRole", "LoadBalancerControllerRole", "KedaRole", "S3CsiRole", "FsxCsiRole"}
    issuer = OIDC_ARN.split(":oidc-provider/")[1]
    for statement in web.values():
        assert statement["Principal"] == {"Federated": OIDC_ARN}
        conditions = "".join(resources[ref["Fn::GetAtt"][0]]["Properties"]["Value"] for ref in statement["Condition"].values())
        assert f'"{issuer}:aud":"sts.amazonaws.com"' in conditions and f'"{issuer}:sub":"system:serviceaccount:' in conditions


def test_adoption_leaves_no_warning_behind(adopted) -> None:
    _, _, messages = adopted
    assert [m.entry.data for m in messages if "Eks" in m.id] == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cluster_name": "other"}, r"^HyperPodEksCluster.cluster_name: 'other': must equal existing.cluster_name \('shared'\)$"),
    ({"version": "1.35"}, r"^HyperPodEksCluster.version: '1.35': must equal existing.version \('1.34'\)$"),
    ({"system_node_group": SystemNodeGroup()}, r"^HyperPodEksCluster.system_node_group: .*: conflicts with existing"),
    ({"addon_versions": {"coredns": "v1.12.3-eksbuild.1"}},
     r"^HyperPodEksCluster.addon_versions.coredns: 'v1.12.3-eksbuild.1': applies only to add-ons listed in existing.manage_addons$"),
    ({"existing": {"kubectl_role_arn": "arn:aws:iam::222222222222:role/eks-kubectl"}},
     r"^HyperPodEksCluster.existing.kubectl_role_arn: '.*': must be in the stack's account 111111111111$"),
])
def test_bad_adoption_props_fail_before_any_resource_is_made(scratch, kwargs: dict[str, Any], message: str) -> None:
    stack, vpc, sg = scratch
    existing = ExistingEksCluster(**{**EXISTING, **kwargs.pop("existing", {})})
    props: dict[str, Any] = {"vpc": vpc, "subnets": vpc.private_subnets, "cluster_name": "shared", "version": "1.34",
                             "security_group": sg, "existing": existing, **kwargs}
    with pytest.raises(ConfigError, match=message):
        HyperPodEksCluster(stack, "Adopt", **props)
    assert stack.node.try_find_child("Adopt") is None


# -- the construct API: grant_cluster_admin, connections, the kubectl layer's refusal ---------------------------------

ADMIN = "arn:aws:iam::111111111111:role/PlatformAdmin"
CONSUMER = "arn:aws:iam::111111111111:role/Consumer"


@pytest.fixture(scope="module")
def granted(cdk_context: dict[str, Any]) -> tuple[HyperPodEksCluster, Template, list[eks.AccessEntry]]:
    """GIVEN a created cluster with one configured admin, cluster admin granted to a second principal and again to the
    first, and its connections opened to a client group, in one small stack."""
    stack = cdk.Stack(cdk.App(context=cdk_context), "Granted", env=cdk.Environment(account="111111111111",
                                                                                    region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"], nat_gateways=1)
    efa = ec2.SecurityGroup(stack, "Efa", vpc=vpc)
    cluster = HyperPodEksCluster(stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="c", version="1.35",
                                 security_group=efa, public_access_cidrs=["198.51.100.0/24"], admin_principals=[ADMIN])
    entries = [cluster.grant_cluster_admin(CONSUMER), cluster.grant_cluster_admin(ADMIN)]
    cluster.connections.allow_from(ec2.SecurityGroup(stack, "Client", vpc=vpc), ec2.Port.tcp(443), "API clients")
    return cluster, Template.from_stack(stack), entries


def test_grant_cluster_admin_makes_the_entry_admin_principals_make(granted) -> None:
    cluster, template, (consumer, admin_again) = granted
    # THEN each principal has one cluster-admin entry with the same policy, named as admin_principals names them
    entries = template.find_resources("AWS::EKS::AccessEntry", {"Properties": {"PrincipalArn": Match.any_value()}})
    by_principal = {r["Properties"]["PrincipalArn"]: (k, r["Properties"]["AccessPolicies"]) for k, r in entries.items()
                    if isinstance(r["Properties"]["PrincipalArn"], str)}
    assert set(by_principal) == {ADMIN, CONSUMER}
    assert by_principal[ADMIN][1] == by_principal[CONSUMER][1]
    assert [p["PolicyArn"]["Fn::Join"][1][-1] for p in by_principal[CONSUMER][1]] == [
        ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"]
    assert by_principal[CONSUMER][0].startswith("Eks" + principal_id(CONSUMER))
    # AND granting a principal again returns its first entry instead of a second one (EKS allows one per principal)
    assert admin_again is cluster.admin_entries[ADMIN] and consumer is cluster.admin_entries[CONSUMER]


def test_bad_cluster_admin_principal_is_one_line(granted) -> None:
    cluster, _, _ = granted
    with pytest.raises(ConfigError) as raised:
        cluster.grant_cluster_admin("PlatformAdmin")
    (line,) = str(raised.value).splitlines()
    assert line.startswith("HyperPodEksCluster.grant_cluster_admin.principal_arn: 'PlatformAdmin': must be an IAM role or user ARN")


def test_connections_open_the_cluster_security_group_not_the_efa_group(granted) -> None:
    cluster, template, _ = granted
    group, client = Capture(), Capture()
    # THEN the rule is on the EKS-made cluster security group, on 443, from the client's group
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": {"Fn::GetAtt": [group, "ClusterSecurityGroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [client, "GroupId"]}, "FromPort": 443, "ToPort": 443})
    assert template.to_json()["Resources"][group.as_string()]["Type"] == "AWS::EKS::Cluster"
    assert client.as_string().startswith("Client")
    # AND aws_eks_v2's own connections would also have opened the EFA group given as security_group; these do not
    assert len(cluster.connections.security_groups) == 1
    template.resource_properties_count_is("AWS::EC2::SecurityGroupIngress", {
        "GroupId": {"Fn::GetAtt": [Match.string_like_regexp("^Efa"), "GroupId"]}}, 0)


def test_a_missing_kubectl_layer_names_the_prop_given(scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.catalogue.versions import KUBECTL_LAYERS

    # GIVEN props built in Python (no configuration) for an adopted 1.34 cluster, and a Python that cannot import the
    # 1.34 layer (None in sys.modules blocks the import, as a missing package does)
    monkeypatch.setitem(__import__("sys").modules, KUBECTL_LAYERS["1.34"][0], None)
    stack, vpc, sg = scratch
    with pytest.raises(ConfigError) as raised:
        HyperPodEksCluster(stack, "NoLayer", vpc=vpc, subnets=vpc.private_subnets, cluster_name="shared",
                           version="1.34", security_group=sg, existing=ExistingEksCluster(**EXISTING))
    # THEN the one line names the construct's prop, existing.version, and what to install
    (line,) = str(raised.value).splitlines()
    assert line.startswith("HyperPodEksCluster.existing.version: '1.34': needs the kubectl layer package "
                           "aws-cdk.lambda-layer-kubectl-v34"), line
    # AND nothing joined the tree
    assert stack.node.try_find_child("NoLayer") is None
