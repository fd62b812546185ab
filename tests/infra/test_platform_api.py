"""The construct API consumers wire: public attributes (``cluster_arn``, model buckets by name), ``grant_*`` methods
that acknowledge their own cdk-nag findings, and ``connections``; one small stack per construct, synthesized once
for the module, asserted with ``Template`` and ``Capture`` and with cdk-nag's real report."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Capture, Match, Template

from hyperpod_dpd.config import CreateVpc, InstanceGroup, parse_environment
from hyperpod_dpd.config.eks_existing import ExistingEksCluster
from hyperpod_dpd.config.operator import ModelBucket
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.inference_operator import InferenceOperator
from hyperpod_dpd.infra.nag import acknowledge_grant
from tests.paths import FIXTURE_CONFIG_DIR
from tests.validators import validation_report

# EKS's access policy ARN, as aws_eks_v2's AccessPolicy.from_access_policy_name writes it
ADMIN_POLICY = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                  ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"]]}
ENV = cdk.Environment(account="111111111111", region="us-west-2")
CREATED, IMPORTED = "weights-created-111111111111", "weights-imported-111111111111"
OPS_ROLE = "arn:aws:iam::111111111111:role/Operations"
EXISTING = ExistingEksCluster(
    cluster_name="shared", version="1.34",
    oidc_provider_arn="arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
    kubectl_role_arn="arn:aws:iam::111111111111:role/eks-kubectl", cluster_security_group_id="sg-0123456789abcdef0")


def _account_role(scope: cdk.Stack, id: str) -> iam.Role:
    return iam.Role(scope, id, assumed_by=iam.AccountPrincipal("111111111111"))


@dataclass
class Built:
    operator: InferenceOperator
    eks: HyperPodEksCluster
    platform: HyperPodDpdPlatform
    templates: dict[str, Template]
    findings: dict[str, set[tuple[str, str]]]  # construct path -> (plugin, rule) of every finding
    acknowledged: dict[str, list[str]]  # role -> the finding ids its grant acknowledged


def _operator_stack(app: cdk.App, acknowledged: dict[str, list[str]]) -> tuple[InferenceOperator, HyperPodEksCluster]:
    """An adopted EKS cluster, a HyperPod cluster and the operator with a created and an imported model bucket; roles
    granted read by the operator, and one granted with the bucket's plain grant_read (nothing acknowledged)."""
    stack = cdk.Stack(app, "Operator", env=ENV)
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"],
                                      private_subnet_ids=["subnet-0123456789abcdef0"],
                                      private_subnet_route_table_ids=["rtb-0123456789abcdef0"])
    eks_cluster = HyperPodEksCluster(
        stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="shared", version="1.34",
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "Efa", "sg-0123456789abcdef9"),
        existing=EXISTING)
    hyperpod = HyperPodCluster(
        stack, "HyperPod", cluster_name="hp", region="us-west-2", eks_cluster_arn=eks_cluster.cluster_arn,
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=[eks_cluster.cluster.cluster_security_group_id],
        instance_groups=[InstanceGroup(name="system", role="system", instance_type="ml.m7i.2xlarge", count=1)],
        lifecycle_bucket_name="sagemaker-hp-111111111111-us-west-2", removal_policy=cdk.RemovalPolicy.RETAIN)
    cdk.CfnOutput(stack, "HyperPodArn", value=hyperpod.cluster_arn)
    operator = InferenceOperator(
        stack, "InferenceOperator", eks_cluster=eks_cluster, hyperpod_cluster=hyperpod, operator_version="3.4",
        execution_role_name="SageMakerHyperPodInference-hp", tls_bucket_name="hyperpod-tls-111111111111-us-west-2",
        model_buckets=[ModelBucket(name=CREATED, create=True), ModelBucket(name=IMPORTED)],
        removal_policy=cdk.RemovalPolicy.RETAIN)
    one, every, plain = (_account_role(stack, n) for n in ("OneReader", "EveryReader", "PlainReader"))
    operator.grant_model_read(one, bucket=CREATED)
    operator.grant_model_read(every)
    # what the grant acknowledges, computed again on a fourth role for comparison with the plain role's findings
    probe = _account_role(stack, "ProbeReader")
    acknowledged["ProbeReader"] = acknowledge_grant(probe, operator.model_bucket(CREATED).grant_read(probe), "probe")
    operator.model_bucket(CREATED).grant_read(plain)
    eks_cluster.grant_cluster_admin(one.role_arn)
    eks_cluster.connections.allow_from(ec2.Peer.ipv4("10.9.0.0/16"), ec2.Port.tcp(443), "consumer's API clients")
    return operator, eks_cluster


def _platform_stack(app: cdk.App, base_configs: dict[str, dict[str, Any]]) -> HyperPodDpdPlatform:
    data = copy.deepcopy(base_configs["dev"])
    data["eks"]["operations_principals"] = [OPS_ROLE]
    config = parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(account=config.account, region=config.region))
    platform = HyperPodDpdPlatform(stack, "Dpd", config=config, endpoints=False)
    reader = _account_role(stack, "Reader")
    platform.grant_model_read(reader)
    platform.grant_cluster_admin("arn:aws:iam::111111111111:role/Consumer")
    client = ec2.SecurityGroup(stack, "Client", vpc=platform.network.vpc, description="a consumer's client")
    platform.connections.allow_from(client, ec2.Port.tcp(8080), "consumer's client to the nodes")
    platform.network.connections.allow_from(ec2.Peer.ipv4("10.7.0.0/16"), ec2.Port.tcp(22), "not allowed: HP3")
    return platform


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any],
          base_configs: dict[str, dict[str, Any]]) -> Built:
    outdir = tmp_path_factory.mktemp("api")
    # GIVEN one app with a small stack per construct, guarded by cdk-nag (findings written to the report, not raised)
    app = cdk.App(outdir=str(outdir), context={**cdk_context, "@aws-cdk/core:failSynthOnValidationErrors": False})
    apply_guardrails(app)
    acknowledged: dict[str, list[str]] = {}
    operator, eks_cluster = _operator_stack(app, acknowledged)
    network_stack = cdk.Stack(app, "Network", env=ENV)
    network = EfaNetwork(network_stack, "Network", gpu_availability_zone="us-west-2a",
                         create=CreateVpc(availability_zones=("us-west-2a", "us-west-2b")))
    network.connections.allow_from(ec2.Peer.ipv4("10.8.0.0/16"), ec2.Port.tcp(988), "a consumer's Lustre client")
    platform = _platform_stack(app, base_configs)
    assembly = app.synth()
    templates = {s.stack_name: Template.from_json(s.template) for s in assembly.stacks}
    findings: dict[str, set[tuple[str, str]]] = {}
    for plugin in validation_report(Path(outdir))["pluginReports"]:
        for violation in plugin["violations"]:
            for construct in violation["violatingConstructs"]:
                findings.setdefault(construct["constructPath"], set()).add((plugin["pluginName"], violation["ruleName"]))
    return Built(operator, eks_cluster, platform, templates, findings, acknowledged)


def _findings_under(built: Built, prefix: str) -> set[str]:
    """The cdk-nag AwsSolutions findings on ``prefix`` and below."""
    return {rule for path, found in built.findings.items() if path.startswith(prefix)
            for plugin, rule in found if plugin == "AwsSolutions"}


# -- HyperPodCluster -------------------------------------------------------------------------------------------------

def test_hyperpod_cluster_arn_is_the_clusters_arn_attribute(built: Built) -> None:
    template = built.templates["Operator"]
    cluster = Capture()
    # THEN the output names the ClusterArn attribute of the one AWS::SageMaker::Cluster
    template.has_output("HyperPodArn", {"Value": {"Fn::GetAtt": [cluster, "ClusterArn"]}})
    assert list(template.find_resources("AWS::SageMaker::Cluster")) == [cluster.as_string()]


# -- InferenceOperator: model buckets by name and grant_model_read ---------------------------------------------------

def test_model_buckets_are_a_read_only_mapping_by_name(built: Built) -> None:
    buckets = built.operator.model_buckets
    assert list(buckets) == [CREATED, IMPORTED]
    assert built.operator.model_bucket(IMPORTED) is buckets[IMPORTED]
    with pytest.raises(TypeError):
        buckets["other"] = buckets[CREATED]  # type: ignore[index]


def test_an_unknown_model_bucket_is_one_line_naming_the_configured_ones(built: Built) -> None:
    with pytest.raises(ConfigError) as raised:
        built.operator.model_bucket("weights")
    assert str(raised.value) == (f"InferenceOperator.model_bucket: 'weights': is not a model bucket of this operator: "
                                 f"{CREATED}, {IMPORTED}")


def _read_statement(bucket_arn: Any) -> dict[str, Any]:
    # sorted: the project's feature flags (cdk.json, @aws-cdk/aws-iam:minimizePolicies) order the actions
    return {"Action": ["s3:GetBucket*", "s3:GetObject*", "s3:List*"], "Effect": "Allow",
            "Resource": [bucket_arn, {"Fn::Join": ["", [bucket_arn, "/*"]]}]}


def test_grant_model_read_of_one_bucket_is_the_buckets_own_grant_read(built: Built) -> None:
    template = built.templates["Operator"]
    bucket = Capture()
    # THEN the reader's policy holds the bucket's read statement on the created bucket only
    template.has_resource_properties("AWS::IAM::Policy", {
        "Roles": [{"Ref": Match.string_like_regexp("^OneReader")}],
        "PolicyDocument": {"Statement": [_read_statement({"Fn::GetAtt": [bucket, "Arn"]})]}})
    created = template.find_resources("AWS::S3::Bucket", {"Properties": {"BucketName": CREATED}})
    assert list(created) == [bucket.as_string()]


def test_grant_model_read_without_a_name_reads_every_model_bucket(built: Built) -> None:
    template = built.templates["Operator"]
    resources = Capture()
    # THEN one statement (the flags minimize the policy) reads both buckets and their objects, nothing else
    template.has_resource_properties("AWS::IAM::Policy", {
        "Roles": [{"Ref": Match.string_like_regexp("^EveryReader")}],
        "PolicyDocument": {"Statement": [{"Action": ["s3:GetBucket*", "s3:GetObject*", "s3:List*"], "Effect": "Allow",
                                          "Resource": resources}]}})
    (created,) = template.find_resources("AWS::S3::Bucket", {"Properties": {"BucketName": CREATED}})
    imported = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{IMPORTED}"]]}
    expected = [{"Fn::GetAtt": [created, "Arn"]}, {"Fn::Join": ["", [{"Fn::GetAtt": [created, "Arn"]}, "/*"]]},
                imported, {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{IMPORTED}/*"]]}]
    assert sorted(map(repr, resources.as_array())) == sorted(map(repr, expected))


def test_the_grant_acknowledges_exactly_its_own_iam5_findings(built: Built) -> None:
    # GIVEN the plain grant_read, which acknowledges nothing: cdk-nag finds its wildcards
    plain = _findings_under(built, "Operator/PlainReader")
    assert plain, "the plain grant must have IAM5 findings, or this test proves nothing"
    # THEN they are exactly the ids the grant computes for the same bucket (so the ids are cdk-nag's own) ...
    assert {f"AwsSolutions-{rule.split('-', 1)[1]}" for rule in plain} == set(built.acknowledged["ProbeReader"])
    assert all(rule.startswith("AwsSolutions-IAM5[") for rule in plain)
    assert any(rule.endswith("/*]") for rule in plain) and "AwsSolutions-IAM5[Action::s3:List*]" in plain
    # ... and the roles granted by grant_model_read carry none: the consumer acknowledges nothing by logical id
    for role in ("OneReader", "EveryReader", "ProbeReader"):
        assert _findings_under(built, f"Operator/{role}") == set(), role


def test_grant_model_read_of_nothing_is_refused(built: Built) -> None:
    with pytest.raises(ConfigError, match=r"model_bucket: 'weights': is not a model bucket of this operator"):
        built.operator.grant_model_read(iam.AnyPrincipal(), bucket="weights")


# -- HyperPodEksCluster (adopted here; created in test_eks_cluster.py) -------------------------------------------------

def test_grant_cluster_admin_on_an_adopted_cluster_is_an_access_entry_the_kubectl_provider_waits_for(built: Built) -> None:
    template = built.templates["Operator"]
    role = Capture()
    template.has_resource_properties("AWS::EKS::AccessEntry", {
        "ClusterName": "shared", "PrincipalArn": {"Fn::GetAtt": [role, "Arn"]},
        "AccessPolicies": [{"AccessScope": {"Type": "cluster"}, "PolicyArn": ADMIN_POLICY}]})
    assert role.as_string().startswith("OneReader")
    # AND the kubectl provider's handler, which applies charts and manifests, waits for the entry
    (entry_id,) = template.find_resources("AWS::EKS::AccessEntry")
    handlers = template.find_resources("AWS::Lambda::Function", {"DependsOn": Match.array_with([entry_id])})
    assert any(logical.startswith("EksKubectlProviderHandler") for logical in handlers)


def test_eks_connections_open_the_cluster_security_group(built: Built) -> None:
    built.templates["Operator"].has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": "sg-0123456789abcdef0", "CidrIp": "10.9.0.0/16", "FromPort": 443, "ToPort": 443})


# -- EfaNetwork ------------------------------------------------------------------------------------------------------

def test_efa_network_connections_open_the_efa_security_group(built: Built) -> None:
    template = built.templates["Network"]
    # THEN the rule is on the EFA group (inline: the group is in the same stack)
    groups = template.find_resources("AWS::EC2::SecurityGroup", {"Properties": {"SecurityGroupIngress": [{
        "CidrIp": "10.8.0.0/16", "FromPort": 988, "ToPort": 988, "IpProtocol": "tcp",
        "Description": "a consumer's Lustre client"}]}})
    assert [logical for logical in groups if logical.startswith("NetworkEfaSecurityGroup")] == list(groups)
    assert len(groups) == 1


def test_ingress_from_outside_into_the_efa_group_of_a_hyperpod_cluster_is_refused(built: Built) -> None:
    # GIVEN the platform's EFA group opened through network.connections; THEN the project's rule reports it
    assert ("HyperPodDpd", "HPDPD-HP3") in built.findings.get("Platform/Dpd/Network/EfaSecurityGroup/Resource", set())


# -- HyperPodDpdPlatform: the consumer's entry point -----------------------------------------------------------------

def test_platform_grants_read_of_its_model_buckets_with_nothing_left_to_acknowledge(built: Built) -> None:
    template = built.templates["Platform"]
    bucket = Capture()
    template.has_resource_properties("AWS::IAM::Policy", {
        "Roles": [{"Ref": Match.string_like_regexp("^Reader")}],
        "PolicyDocument": {"Statement": [_read_statement({"Fn::GetAtt": [bucket, "Arn"]})]}})
    assert bucket.as_string().startswith("DpdInferenceOperatorModelBucket0")
    assert list(built.platform.model_buckets) == ["hpdpd-models-111111111111-us-west-2"]
    assert _findings_under(built, "Platform/Reader") == set()


def test_platform_grant_cluster_admin_takes_the_admin_principals_path(built: Built) -> None:
    template = built.templates["Platform"]
    entries = template.find_resources("AWS::EKS::AccessEntry", {"Properties": {"AccessPolicies": [
        {"AccessScope": {"Type": "cluster"}, "PolicyArn": ADMIN_POLICY}]}})
    admins = {r["Properties"]["PrincipalArn"]: (logical, r["Properties"]["AccessPolicies"])
              for logical, r in entries.items() if isinstance(r["Properties"]["PrincipalArn"], str)}
    # THEN the consumer's principal has the same kind of entry as the configured admin, named by the same rule
    configured, consumer = admins["arn:aws:iam::111111111111:role/PlatformAdmin"], admins[
        "arn:aws:iam::111111111111:role/Consumer"]
    assert configured[1] == consumer[1]
    assert configured[0].startswith("DpdEksAdminPlatformAdmin") and consumer[0].startswith("DpdEksAdminConsumer")


def test_platform_refuses_cluster_admin_for_an_operations_role(built: Built) -> None:
    with pytest.raises(ConfigError) as raised:
        built.platform.grant_cluster_admin(OPS_ROLE)
    assert str(raised.value) == (f"dev.yaml: grant_cluster_admin.principal_arn: '{OPS_ROLE}': is an operations role "
                                 "(eks.operations_principals or the checks runner's role), which has its own access "
                                 "entry; an IAM principal has one")


def test_platform_connections_open_the_cluster_security_group_and_leave_the_efa_group_closed(built: Built) -> None:
    template = built.templates["Platform"]
    client, cluster = Capture(), Capture()
    # THEN the client reaches the EKS cluster security group (the nodes' and the API's) on 8080 ...
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": {"Fn::GetAtt": [cluster, "ClusterSecurityGroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [client, "GroupId"]}, "FromPort": 8080, "ToPort": 8080})
    assert client.as_string().startswith("Client")
    assert template.to_json()["Resources"][cluster.as_string()]["Type"] == "AWS::EKS::Cluster"
    # ... and nothing the platform's connections added reaches the EFA group
    assert not template.find_resources("AWS::EC2::SecurityGroupIngress", {"Properties": {"FromPort": 8080, "GroupId": {
        "Fn::GetAtt": [Match.string_like_regexp("^DpdNetworkEfaSecurityGroup"), "GroupId"]}}})
