"""HyperPodCluster: groups, labels, health checks, placement, execution role, lifecycle bucket, E3644 handling."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from hyperpod_dpd.config import InstanceGroup
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.guardrails.rules import RULES, Settings
from hyperpod_dpd.infra.guardrails.templates import StageTemplates
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster


@pytest.fixture(scope="module")
def dev(synthesized) -> tuple[str, dict[str, Any], dict[str, Any]]:
    template = synthesized.template("dev", "platform")
    logical_id, cluster = synthesized.only("dev", "platform", "AWS::SageMaker::Cluster")
    return logical_id, cluster, template


def _groups(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}


def test_one_instance_group_per_configured_group(dev) -> None:
    _, cluster, _ = dev
    groups = _groups(cluster)
    assert list(groups) == ["system", "prefill", "decode"]
    assert {n: (g["InstanceType"], g["InstanceCount"]) for n, g in groups.items()} == {
        "system": ("ml.m7i.2xlarge", 2), "prefill": ("ml.p5.48xlarge", 1), "decode": ("ml.p5.48xlarge", 1)}
    assert groups["prefill"]["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]


def test_nodes_carry_role_labels_for_endpoint_node_selectors(dev) -> None:
    _, cluster, _ = dev
    for name, group in _groups(cluster).items():
        assert group["KubernetesConfig"]["Labels"] == {"hyperpod-dpd/role": name, "hyperpod-dpd/instance-group": name}


def test_deep_health_checks_run_on_gpu_groups_only_and_recovery_is_automatic(dev) -> None:
    _, cluster, _ = dev
    groups = _groups(cluster)
    assert groups["prefill"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert groups["decode"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in groups["system"]
    assert cluster["Properties"]["NodeRecovery"] == "Automatic"
    assert cluster["Properties"]["NodeProvisioningMode"] == "Continuous"


def test_cluster_is_orchestrated_by_the_eks_cluster_in_the_gpu_subnet_with_the_efa_group(dev) -> None:
    _, cluster, template = dev
    props = cluster["Properties"]
    eks_id = next(k for k, v in template["Resources"].items() if v["Type"] == "AWS::EKS::Cluster")
    assert props["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_id, "Arn"]}}}
    (subnet,) = props["VpcConfig"]["Subnets"]
    assert "GpuSubnet" in subnet["Fn::GetStackOutput"]["OutputName"]
    efa, cluster_sg = props["VpcConfig"]["SecurityGroupIds"]
    assert "EfaSecurityGroup" in efa["Fn::GetStackOutput"]["OutputName"]
    assert cluster_sg == {"Fn::GetAtt": [eks_id, "ClusterSecurityGroupId"]}


def test_cluster_is_created_after_the_dependencies_chart_and_core_addons(dev) -> None:
    _, cluster, template = dev
    chart_id = next(k for k, v in template["Resources"].items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart")
    addon_ids = {k for k, v in template["Resources"].items() if v["Type"] == "AWS::EKS::Addon" and k.startswith("EksAddon")}
    assert chart_id in cluster["DependsOn"]
    assert addon_ids <= set(cluster["DependsOn"])


def test_lifecycle_scripts_are_read_without_wildcard_actions(dev) -> None:
    _, _, template = dev
    node_policy = next(v for k, v in template["Resources"].items() if k.startswith("HyperPodNodePolicy"))
    statements = {s["Sid"]: s for s in node_policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["ReadLifecycleScripts"]["Action"] == "s3:GetObject"
    assert statements["ListLifecycleScripts"]["Action"] == "s3:ListBucket"
    assert statements["ReadLifecycleScripts"]["Resource"]["Fn::Join"][1][-1] == "/lifecycle/*"


def test_lifecycle_script_comes_from_an_encrypted_tls_only_sagemaker_bucket(dev) -> None:
    _, cluster, template = dev
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
    for policy in t.find_resources("AWS::S3::BucketPolicy").values():
        deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert deny and deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_execution_role_is_least_privilege_and_partition_aware(dev) -> None:
    _, _, template = dev
    resources = template["Resources"]
    role_id = next(k for k in resources if k.startswith("HyperPodExecutionRole") and resources[k]["Type"] == "AWS::IAM::Role")
    role = resources[role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}]
    assert role["ManagedPolicyArns"] == [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                             ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]]}]
    node_policy = next(v for k, v in resources.items() if k.startswith("HyperPodNodePolicy"))
    statements = {s["Sid"]: s for s in node_policy["Properties"]["PolicyDocument"]["Statement"]}
    text = json.dumps(statements)
    assert '"arn:aws:' not in text  # partition comes from AWS::Partition
    for statement in statements.values():
        assert statement["Action"] != "*" and not (isinstance(statement["Action"], list) and "*" in statement["Action"])
    assert all(a.startswith("ec2:Describe") for a in statements["DescribeNetworking"]["Action"])
    eni_resources = json.dumps(statements["VpcCniEniManagement"]["Resource"])
    assert "network-interface/*" in eni_resources and '"*"' not in eni_resources


def test_prod_retains_the_lifecycle_bucket_and_dev_cleans_it_up(synthesized) -> None:
    (prod_bucket,) = [v for k, v in synthesized.resources("prod", "platform", "AWS::S3::Bucket").items()
                      if k.startswith("HyperPodLifecycleBucket")]
    (dev_bucket,) = [v for k, v in synthesized.resources("dev", "platform", "AWS::S3::Bucket").items()
                     if k.startswith("HyperPodLifecycleBucket")]
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
