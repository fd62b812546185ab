"""HyperPodCluster: groups, labels, health checks, placement, execution role, lifecycle bucket, E3644 handling, and\nKarpenter autoscaling (AutoScaling, the cluster role, a NodeClass and NodePool per autoscaled group)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsonschema
import pytest
import yaml
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Capture, Match, Template

from hyperpod_dpd.catalogue.versions import CORE_ADDONS
from hyperpod_dpd.config import InstanceGroup
from hyperpod_dpd.config.hyperpod import ClusterAutoScaling
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.buckets import access_logs_bucket
from hyperpod_dpd.infra.guardrails import apply_guardrails
from hyperpod_dpd.infra.guardrails.rules import RULES, Settings
from hyperpod_dpd.infra.guardrails.templates import StageTemplates
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.k8s.validation import unknown_fields

CORE_ADDON_NAMES = [a.name for a in CORE_ADDONS]


@pytest.fixture(scope="module")
def dev_cluster(synthesized) -> tuple[str, dict[str, Any], dict[str, Any]]:
    template = synthesized.template("dev", "platform")
    logical_id, cluster = synthesized.only("dev", "platform", "AWS::SageMaker::Cluster")
    return logical_id, cluster, template


def _groups(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}


def test_one_instance_group_per_configured_group(dev_cluster) -> None:
    _, cluster, _ = dev_cluster
    groups = _groups(cluster)
    assert list(groups) == ["system", "prefill", "decode"]
    assert {n: (g["InstanceType"], g["InstanceCount"]) for n, g in groups.items()} == {
        "system": ("ml.m7i.2xlarge", 2), "prefill": ("ml.p5.48xlarge", 1), "decode": ("ml.p5.48xlarge", 1)}
    assert groups["prefill"]["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]


def test_nodes_carry_role_labels_for_endpoint_node_selectors(dev_cluster) -> None:
    _, cluster, _ = dev_cluster
    for name, group in _groups(cluster).items():
        assert group["KubernetesConfig"]["Labels"] == {"hyperpod-dpd/role": name, "hyperpod-dpd/instance-group": name}


def test_deep_health_checks_run_on_gpu_groups_only_and_recovery_is_automatic(dev_cluster) -> None:
    _, cluster, _ = dev_cluster
    groups = _groups(cluster)
    assert groups["prefill"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert groups["decode"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in groups["system"]
    assert cluster["Properties"]["NodeRecovery"] == "Automatic"
    assert cluster["Properties"]["NodeProvisioningMode"] == "Continuous"


def test_cluster_is_orchestrated_by_the_eks_cluster_in_the_gpu_subnet_with_the_efa_group(dev_cluster) -> None:
    _, cluster, template = dev_cluster
    props = cluster["Properties"]
    eks_id = next(k for k, v in template["Resources"].items() if v["Type"] == "AWS::EKS::Cluster")
    assert props["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_id, "Arn"]}}}
    (subnet,) = props["VpcConfig"]["Subnets"]
    assert "GpuSubnet" in subnet["Fn::GetStackOutput"]["OutputName"]
    efa, cluster_sg = props["VpcConfig"]["SecurityGroupIds"]
    assert "EfaSecurityGroup" in efa["Fn::GetStackOutput"]["OutputName"]
    assert cluster_sg == {"Fn::GetAtt": [eks_id, "ClusterSecurityGroupId"]}


def test_cluster_is_created_after_the_dependencies_chart_and_core_addons(dev_cluster) -> None:
    _, cluster, template = dev_cluster
    t = Template.from_json(template)
    (chart_id,) = t.find_resources("Custom::AWSCDK-EKS-HelmChart")
    # the core add-ons of the catalogue, by the name EKS knows them by (every one of them is in the stack)
    addon_ids = {k for name in CORE_ADDON_NAMES for k in t.find_resources("AWS::EKS::Addon", {"Properties": {
        "AddonName": name}})}
    assert len(addon_ids) == len(CORE_ADDON_NAMES)
    assert chart_id in cluster["DependsOn"]
    assert addon_ids <= set(cluster["DependsOn"])


def _node_policy_statements(template: Template) -> dict[str, dict[str, Any]]:
    """The statements of the nodes' policy (the one policy that reads the lifecycle scripts), by Sid."""
    (policy,) = template.find_resources("AWS::IAM::Policy", {"Properties": {"PolicyDocument": {
        "Statement": Match.array_with([Match.object_like({"Sid": "ReadLifecycleScripts"})])}}}).values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_lifecycle_scripts_are_read_without_wildcard_actions(dev_cluster) -> None:
    _, _, template = dev_cluster
    # GIVEN dev's platform WHEN it synthesizes THEN the nodes read objects under lifecycle/ and list the bucket only
    read = Capture()
    # (arrayWith keeps the order of the statements: the policy lists the bucket, then reads under lifecycle/)
    Template.from_json(template).has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Sid": "ListLifecycleScripts", "Action": "s3:ListBucket"}),
        Match.object_like({"Sid": "ReadLifecycleScripts", "Action": "s3:GetObject", "Resource": {"Fn::Join": ["", read]}})])}})
    assert read.as_array()[-1] == "/lifecycle/*"


def test_lifecycle_script_comes_from_an_encrypted_tls_only_sagemaker_bucket(dev_cluster) -> None:
    _, cluster, template = dev_cluster
    uri = _groups(cluster)["prefill"]["LifeCycleConfig"]
    assert uri == {"SourceS3Uri": "s3://sagemaker-hpdpd-dev-111111111111-us-west-2/lifecycle/", "OnCreate": "on_create.sh"}
    t = Template.from_json(template)
    t.has_resource_properties("AWS::S3::Bucket", {
        "BucketName": "sagemaker-hpdpd-dev-111111111111-us-west-2",
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
                                           "RestrictPublicBuckets": True},
        "VersioningConfiguration": {"Status": "Enabled"},
        "LoggingConfiguration": {"LogFilePrefix": "s3-access-logs/LifecycleBucket/"}})
    (bucket_id,) = t.find_resources("AWS::S3::Bucket", {"Properties": {
        "BucketName": "sagemaker-hpdpd-dev-111111111111-us-west-2"}})
    # AND the lifecycle bucket's policy, like every bucket policy of the stack, refuses requests without TLS
    t.has_resource_properties("AWS::S3::BucketPolicy", {"Bucket": {"Ref": bucket_id}, "PolicyDocument": {
        "Statement": Match.array_with([Match.object_like({"Effect": "Deny",
                                                          "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})
    policies = t.find_resources("AWS::S3::BucketPolicy")
    assert policies  # the loop below checks something
    for policy in policies.values():
        deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert deny and deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_execution_role_is_least_privilege_and_partition_aware(dev_cluster) -> None:
    _, _, template = dev_cluster
    t = Template.from_json(template)
    # GIVEN the role the prefill group of dev's cluster runs as
    role = Capture()
    t.has_resource_properties("AWS::SageMaker::Cluster", {"InstanceGroups": Match.array_with([Match.object_like({
        "InstanceGroupName": "prefill", "ExecutionRole": {"Fn::GetAtt": [role, "Arn"]}})])})
    # THEN only SageMaker assumes it, with the managed instance policy from the template's partition
    trusted = t.find_resources("AWS::IAM::Role", {"Properties": {
        "AssumeRolePolicyDocument": {"Statement": [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}]},
        "ManagedPolicyArns": [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                 ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]]}]}})
    assert role.as_string() in trusted
    # AND the nodes' own policy is attached to that role and grants no wildcard action
    t.has_resource_properties("AWS::IAM::Policy", {"Roles": Match.array_with([{"Ref": role.as_string()}]),
                                                   "PolicyDocument": {"Statement": Match.array_with([
                                                       Match.object_like({"Sid": "ReadLifecycleScripts"})])}})
    statements = _node_policy_statements(t)
    text = json.dumps(statements)
    assert '"arn:aws:' not in text  # partition comes from AWS::Partition
    for statement in statements.values():
        assert statement["Action"] != "*" and not (isinstance(statement["Action"], list) and "*" in statement["Action"])
    assert all(a.startswith("ec2:Describe") for a in statements["DescribeNetworking"]["Action"])
    eni_resources = json.dumps(statements["VpcCniEniManagement"]["Resource"])
    assert "network-interface/*" in eni_resources and '"*"' not in eni_resources


def _lifecycle_bucket(template: dict[str, Any]) -> dict[str, Any]:
    """The bucket the cluster's instance groups read their lifecycle scripts from (by the name in their S3 URI)."""
    t = Template.from_json(template)
    uri = Capture()
    t.has_resource_properties("AWS::SageMaker::Cluster", {"InstanceGroups": Match.array_with([Match.object_like({
        "LifeCycleConfig": {"SourceS3Uri": uri, "OnCreate": Match.any_value()}})])})
    (bucket,) = t.find_resources("AWS::S3::Bucket", {"Properties": {
        "BucketName": uri.as_string().removeprefix("s3://").split("/", 1)[0]}}).values()
    return bucket


def test_prod_retains_the_lifecycle_bucket_and_dev_cleans_it_up(synthesized) -> None:
    prod_bucket = _lifecycle_bucket(synthesized.template("prod", "platform"))
    dev_bucket = _lifecycle_bucket(synthesized.template("dev", "platform"))
    assert (prod_bucket["DeletionPolicy"], prod_bucket["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert dev_bucket["DeletionPolicy"] == "Delete"
    assert synthesized.resources("dev", "platform", "Custom::S3AutoDeleteObjects")
    assert not synthesized.resources("prod", "platform", "Custom::S3AutoDeleteObjects")


def test_prod_retains_the_cluster_and_its_gpu_capacity_and_dev_does_not(synthesized) -> None:
    # GIVEN prod (removal_policy: retain) and dev (destroy)
    _, prod = synthesized.only("prod", "platform", "AWS::SageMaker::Cluster")
    _, dev = synthesized.only("dev", "platform", "AWS::SageMaker::Cluster")
    # THEN a deletion or a replacement of prod's stack leaves its HyperPod cluster (and its reservation) in place
    assert (prod["DeletionPolicy"], prod["UpdateReplacePolicy"]) == ("Retain", "Retain")
    # AND dev's cluster goes with its stack (CloudFormation's default: no policy, deleted)
    assert "DeletionPolicy" not in dev and "UpdateReplacePolicy" not in dev


def _group(**overrides: Any) -> InstanceGroup:
    base: dict[str, Any] = {"name": "prefill", "role": "prefill", "instance_type": "ml.p5.48xlarge", "count": 1}
    return InstanceGroup(**{**base, **overrides})


def _cluster_stack(region: str, groups: list[InstanceGroup], cdk_context: dict[str, Any]) -> tuple[cdk.App, HyperPodCluster]:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Hp", env=cdk.Environment(account="111111111111", region=region))
    cluster = HyperPodCluster(
        stack, "HyperPod", cluster_name="c", region=region,
        eks_cluster_arn=f"arn:{cdk.Aws.PARTITION}:eks:{region}:111111111111:cluster/c",
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"], instance_groups=groups,
        lifecycle_bucket_name=f"sagemaker-c-111111111111-{region}")
    return app, cluster


def test_capacity_block_type_is_acknowledged_on_this_resource_only(cdk_context: dict[str, Any], tmp_path) -> None:
    # GIVEN a p5e group (capacity blocks only) with a training plan, and the CDK validation switched on
    plan = "arn:aws:sagemaker:us-west-2:111111111111:training-plan/p5e-plan"
    app, cluster = _cluster_stack("us-west-2", [_group(instance_type="ml.p5e.48xlarge", training_plan_arn=plan)], cdk_context)
    # WHEN it is synthesized THEN the validation passes, cfn-lint is told to skip E3644 on this resource only
    assembly = app.synth()
    template = assembly.get_stack_by_name("Hp").template
    resource = template["Resources"][cdk.Stack.of(cluster).get_logical_id(cluster.resource)]
    assert resource["Metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["E3644"]}}
    assert resource["Properties"]["InstanceGroups"][0]["TrainingPlanArn"] == plan
    acks = [m.data for m in cluster.resource.node.metadata if "acknowledged" in m.type.lower() or "E3644" in json.dumps(m.data)]
    assert acks and "capacity blocks/training plans" in json.dumps(acks)


def test_type_priced_in_region_needs_no_acknowledgment(cdk_context: dict[str, Any]) -> None:
    app, cluster = _cluster_stack("us-west-2", [_group()], cdk_context)
    template = app.synth().get_stack_by_name("Hp").template
    assert "Metadata" not in template["Resources"][cdk.Stack.of(cluster).get_logical_id(cluster.resource)]
    assert not [m for m in cluster.resource.node.metadata if "E3644" in json.dumps(m.data)]


def test_a_parked_gpu_group_synthesizes_with_instance_count_zero_and_passes_the_guardrails(
        cdk_context: dict[str, Any]) -> None:
    # GIVEN a parked prefill group (count 0, min_count 0) next to an active decode group, CDK validation switched on
    parked = _group(count=0, min_count=0)
    app, cluster = _cluster_stack("us-west-2", [parked, _group(name="decode", role="decode")], cdk_context)
    # WHEN it is synthesized (construct checks, CloudFormation schema validation)
    template = app.synth().get_stack_by_name("Hp").template
    # THEN the parked group is in the cluster with InstanceCount 0, its labels and health checks kept for later
    props = template["Resources"][cdk.Stack.of(cluster).get_logical_id(cluster.resource)]["Properties"]
    groups = {g["InstanceGroupName"]: g for g in props["InstanceGroups"]}
    assert (groups["prefill"]["InstanceCount"], groups["prefill"]["MinInstanceCount"]) == (0, 0)
    assert groups["prefill"]["KubernetesConfig"]["Labels"]["hyperpod-dpd/role"] == "prefill"
    assert groups["prefill"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert groups["decode"]["InstanceCount"] == 1
    # AND none of the toolkit's HyperPod guardrail rules objects to a group without instances
    stage = StageTemplates.from_dicts({"scratch/hp": template})
    assert [f for rule in RULES if rule.id.startswith("HPDPD-HP") for f in rule.check(stage, Settings())] == []


def test_cdk_validation_rejects_an_unacknowledged_unknown_type(cdk_context: dict[str, Any]) -> None:
    """Pins the behaviour the toolkit relies on: with the flag on, an E3644 error fails synthesis."""
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Raw", env=cdk.Environment(account="111111111111", region="us-west-2"))
    from aws_cdk import aws_sagemaker as sagemaker
    sagemaker.CfnCluster(stack, "C", cluster_name="c", instance_groups=[sagemaker.CfnCluster.ClusterInstanceGroupProperty(
        instance_group_name="g", instance_type="ml.p5e.48xlarge", instance_count=1, execution_role="arn:aws:iam::111111111111:role/r")])
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()


@pytest.mark.parametrize(("groups", "message"), [
    ([], "instance_groups: \\[\\]: needs at least one instance group"),
    ([_group(), _group()], "instance group names must be unique"),
])
def test_bad_props_are_rejected_before_anything_is_made(cdk_context: dict[str, Any], groups, message: str) -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    with pytest.raises(ConfigError, match=message):
        HyperPodCluster(stack, "HyperPod", cluster_name="c", region="us-west-2", eks_cluster_arn="arn", subnet_ids=["s"],
                        security_group_ids=["sg"], instance_groups=groups, lifecycle_bucket_name="sagemaker-x")
    assert stack.node.try_find_child("HyperPod") is None


def test_the_building_block_alone_retains_the_cluster_when_asked() -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_dpd.config import InstanceGroup
    from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster

    # GIVEN the HyperPodCluster construct used on its own (no stage, no platform construct) with RETAIN
    stack = cdk.Stack(cdk.App(), "Alone", env=cdk.Environment(account="111111111111", region="us-west-2"))
    HyperPodCluster(stack, "HyperPod", cluster_name="alone", region="us-west-2",
                    eks_cluster_arn="arn:aws:eks:us-west-2:111111111111:cluster/alone",
                    subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"],
                    instance_groups=[InstanceGroup(name="decode", role="decode", instance_type="ml.p5.48xlarge", count=1)],
                    lifecycle_bucket_name="sagemaker-alone-111111111111-us-west-2",
                    removal_policy=cdk.RemovalPolicy.RETAIN)
    # THEN the GPU capacity survives a stack deletion or replacement
    Template.from_stack(stack).has_resource("AWS::SageMaker::Cluster", {
        "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"})


# -- capacity-aware scaling: HyperPod autoscaling (Karpenter), its cluster role and the per-group NodePools ---------------

NODEPOOL_CRD = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "karpenter.sh_nodepools.yaml"


def _scaled_stack(cdk_context: dict[str, Any], groups: list[InstanceGroup], autoscaling: ClusterAutoScaling,
                  *, guardrails: bool = False) -> tuple[HyperPodCluster, dict[str, Any]]:
    """A HyperPodCluster with autoscaling, its Karpenter resources on an imported EKS cluster, synthesized."""
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Scaled", env=cdk.Environment(account="111111111111", region="us-west-2"))
    provider = eks.KubectlProvider.from_kubectl_provider_attributes(
        stack, "Kube", service_token="arn:aws:lambda:us-west-2:111111111111:function:kubectl")
    kubernetes = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="c", kubectl_provider=provider)
    cluster = HyperPodCluster(
        stack, "HyperPod", cluster_name="c", region="us-west-2",
        eks_cluster_arn=f"arn:{cdk.Aws.PARTITION}:eks:us-west-2:111111111111:cluster/c",
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"], instance_groups=groups,
        lifecycle_bucket_name="sagemaker-c-111111111111-us-west-2", autoscaling=autoscaling,
        access_logs_bucket=access_logs_bucket(stack, "AccessLogs", removal_policy=cdk.RemovalPolicy.DESTROY))
    cluster.add_karpenter_resources(kubernetes)
    if guardrails:
        apply_guardrails(app)
    return cluster, app.synth().get_stack_by_name("Scaled").template


@pytest.fixture(scope="module")
def scaled(cdk_context: dict[str, Any]) -> tuple[HyperPodCluster, dict[str, Any]]:
    # GIVEN a fixed system group, a prefill group Karpenter sizes 0-4 nodes (with a taint and a label) and a fixed
    # decode group, cluster autoscaling on with a 15-minute consolidation window, under the project's guardrails
    groups = [
        _group(name="system", role="system", instance_type="ml.m7i.2xlarge", count=1),
        _group(count=0, autoscaling={"min_nodes": 0, "max_nodes": 4}, labels={"tier": "burst"},
               taints=[{"key": "example.com/gpu", "value": "prefill", "effect": "NoSchedule"}]),
        _group(name="decode", role="decode"),
    ]
    return _scaled_stack(cdk_context, groups, ClusterAutoScaling(consolidate_after_minutes=15), guardrails=True)


def _resource(template: dict[str, Any], type_: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
    (found,) = [(k, v) for k, v in template["Resources"].items() if v["Type"] == type_ and k.startswith(prefix)]
    return found


def _karpenter(template: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """Karpenter manifests by kind: (logical id, resource, objects)."""
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and "Karpenter" in logical_id:
            objects = json.loads(resource["Properties"]["Manifest"])
            found[logical_id] = (logical_id, resource, objects)
    return found


def _cluster_role_policy(t: Template) -> tuple[str, dict[str, Any]]:
    """The policy attached to the role the cluster names as its ClusterRole: (logical id, resource)."""
    role = Capture()
    t.has_resource_properties("AWS::SageMaker::Cluster", {"ClusterRole": {"Fn::GetAtt": [role, "Arn"]}})
    ((policy_id, policy),) = t.find_resources("AWS::IAM::Policy", {"Properties": {
        "Roles": [{"Ref": role.as_string()}]}}).items()
    return policy_id, policy


def test_autoscaling_is_karpenter_enabled_with_its_own_cluster_role(scaled) -> None:
    _, template = scaled
    t = Template.from_json(template)
    # WHEN it is synthesized (the guardrails and CloudFormation's schema validation pass)
    # THEN the cluster carries AutoScaling (Karpenter, Enable) with continuous provisioning and automatic recovery
    role = Capture()
    t.has_resource_properties("AWS::SageMaker::Cluster", {
        "AutoScaling": {"Mode": "Enable", "AutoScalerType": "Karpenter"}, "NodeProvisioningMode": "Continuous",
        "NodeRecovery": "Automatic", "ClusterRole": {"Fn::GetAtt": [role, "Arn"]}})
    # AND its ClusterRole is a role only HyperPod can assume, its policy attached before the cluster is created
    assert role.as_string() in t.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"},
                                         "Action": "sts:AssumeRole"})]}}})
    policy_id, _ = _cluster_role_policy(t)
    t.has_resource("AWS::SageMaker::Cluster", {"DependsOn": Match.array_with([policy_id])})


def test_the_cluster_role_may_only_add_and_remove_nodes_here(scaled) -> None:
    _, template = scaled
    _, policy = _cluster_role_policy(Template.from_json(template))
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    # THEN the documented actions only, on clusters and keys of this account and Region, partition from the template
    nodes = statements["ScaleClusterNodes"]
    assert nodes["Action"] == ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"]
    assert nodes["Resource"] == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                   ":sagemaker:us-west-2:111111111111:cluster/*"]]}
    keys = statements["NodeVolumeKeyGrants"]
    assert keys["Action"] == ["kms:CreateGrant", "kms:DescribeKey"]
    assert keys["Condition"]["Bool"] == {"kms:GrantIsForAWSResource": "true"}
    assert keys["Condition"]["StringLike"]["kms:ViaService"] == {
        "Fn::Join": ["", ["sagemaker.us-west-2.", {"Ref": "AWS::URLSuffix"}]]}
    assert "RetireGrant" in keys["Condition"]["ForAllValues:StringEquals"]["kms:GrantOperations"]
    assert "arn:aws:" not in json.dumps(policy)


def test_an_autoscaled_group_starts_empty_without_deep_health_checks(scaled) -> None:
    _, template = scaled
    _, cluster = _resource(template, "AWS::SageMaker::Cluster")
    groups = _groups(cluster)
    # THEN Karpenter's group starts at 0 nodes and skips the health checks; the fixed groups are as before
    assert groups["prefill"]["InstanceCount"] == 0 and "OnStartDeepHealthChecks" not in groups["prefill"]
    assert groups["decode"]["InstanceCount"] == 1
    assert groups["decode"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]


def test_each_autoscaled_group_gets_a_node_class_and_a_node_pool_with_its_bounds(scaled) -> None:
    _, template = scaled
    cluster_id, _ = _resource(template, "AWS::SageMaker::Cluster")
    waiter_id, _ = _resource(template, "Custom::HyperPodAutoScalingReady")
    # THEN one manifest, for the autoscaled group only, applied after the HyperPod cluster and after the waiter that
    # sees its autoscaling InService (HyperPod installs the Karpenter CRDs then)
    ((_, resource, (node_class, node_pool)),) = _karpenter(template).values()
    assert {cluster_id, waiter_id} <= set(resource["DependsOn"])
    assert (node_class["apiVersion"], node_class["kind"]) == ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass")
    assert node_class["metadata"]["name"] == node_pool["metadata"]["name"] == "hpdpd-prefill"
    assert node_class["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "hyperpod-dpd"
    assert node_class["spec"] == {"instanceGroups": ["prefill"]}
    spec = node_pool["spec"]
    # AND the NodePool caps the group at max_nodes (and their GPUs), on its instance type, removing empty nodes only
    assert spec["limits"] == {"nodes": 4, "nvidia.com/gpu": 32}
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass", "name": "hpdpd-prefill"}
    assert spec["template"]["spec"]["requirements"] == [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["ml.p5.48xlarge"]}]
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "15m", "budgets": [{"nodes": "1"}]}
    # AND Karpenter knows the labels endpoints select and the taints they must tolerate
    assert spec["template"]["metadata"]["labels"] == {
        "hyperpod-dpd/instance-group": "prefill", "hyperpod-dpd/role": "prefill", "tier": "burst"}
    assert spec["template"]["spec"]["taints"] == [{"key": "example.com/gpu", "value": "prefill", "effect": "NoSchedule"}]


def test_the_node_pool_is_valid_against_the_karpenter_v1_crd(scaled) -> None:
    _, template = scaled
    ((_, _, (_, node_pool)),) = _karpenter(template).values()
    crd = yaml.safe_load(NODEPOOL_CRD.read_text())
    (schema,) = [v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1"]
    # THEN the upstream karpenter.sh/v1 schema accepts it and it sets no field the schema lacks
    assert [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(node_pool)] == []
    assert list(unknown_fields(node_pool, schema, ())) == []


def test_switching_autoscaling_off_keeps_the_cluster_role(cdk_context: dict[str, Any]) -> None:
    # GIVEN autoscaling switched off (enabled: false) once no group autoscales any more
    _, template = _scaled_stack(cdk_context, [_group(name="decode", role="decode")], ClusterAutoScaling(enabled=False))
    _, cluster = _resource(template, "AWS::SageMaker::Cluster")
    # THEN the mode is Disable and the role stays (HyperPod does not let it change while autoscaling is on)
    assert cluster["Properties"]["AutoScaling"] == {"Mode": "Disable", "AutoScalerType": "Karpenter"}
    assert "ClusterRole" in cluster["Properties"] and not _karpenter(template)
    # AND nothing waits for an autoscaling that is off (enabling it again creates the waiter anew, which waits)
    assert not [r for r in template["Resources"].values() if r["Type"] == "Custom::HyperPodAutoScalingReady"]


def test_without_autoscaling_the_cluster_has_neither_autoscaling_nor_a_cluster_role(dev_cluster) -> None:
    _, cluster, template = dev_cluster
    assert "AutoScaling" not in cluster["Properties"] and "ClusterRole" not in cluster["Properties"]
    # AND no role HyperPod itself could assume exists
    Template.from_json(template).resource_properties_count_is("AWS::IAM::Role", {"AssumeRolePolicyDocument": {
        "Statement": Match.array_with([Match.object_like({
            "Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"}})])}}, 0)


@pytest.mark.parametrize(("groups", "autoscaling", "message"), [
    ([_group(count=0, autoscaling={"max_nodes": 2})], None, "autoscaling: null: groups prefill autoscale"),
    ([_group(count=1, autoscaling={"max_nodes": 2})], ClusterAutoScaling(), "an autoscaled group must be a prefill or "
                                                                            "decode group with count 0"),
])
def test_bad_autoscaling_props_are_rejected_before_anything_is_made(groups, autoscaling, message: str) -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    with pytest.raises(ConfigError, match=message):
        HyperPodCluster(stack, "HyperPod", cluster_name="c", region="us-west-2", eks_cluster_arn="arn", subnet_ids=["s"],
                        security_group_ids=["sg"], instance_groups=groups, lifecycle_bucket_name="sagemaker-x",
                        autoscaling=autoscaling)
    assert stack.node.try_find_child("HyperPod") is None
