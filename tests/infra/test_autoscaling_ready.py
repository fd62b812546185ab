"""AutoScalingReady in a small stack: the Karpenter manifests wait for it, it may only describe its own cluster, and
its Provider framework gives up before CloudFormation's one-hour limit. One synthesis, under the project's guardrails
(cdk-nag and the toolkit's rules fail synthesis on any unacknowledged finding)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template

from hyperpod_dpd.config import InstanceGroup
from hyperpod_dpd.config.hyperpod import ClusterAutoScaling
from hyperpod_dpd.infra.autoscaling_ready import CLUSTER_PROPERTY, RESOURCE_TYPE, SERVICE_TIMEOUT, AutoScalingReady
from hyperpod_dpd.infra.buckets import access_logs_bucket
from hyperpod_dpd.infra.guardrails import apply_guardrails
from hyperpod_dpd.infra.handlers.autoscaling_ready import index
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


@pytest.fixture(scope="module")
def synthesized(cdk_context: dict[str, Any]) -> tuple[HyperPodCluster, Template]:
    # GIVEN a cluster whose prefill and decode groups Karpenter sizes (0-2 nodes each), a fixed system group, its
    # Karpenter resources on an imported EKS cluster, and the project's guardrails
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Waits", env=cdk.Environment(account="111111111111", region="us-west-2"))
    kubectl = eks.KubectlProvider.from_kubectl_provider_attributes(
        stack, "Kube", service_token="arn:aws:lambda:us-west-2:111111111111:function:kubectl")
    kubernetes = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="c", kubectl_provider=kubectl)
    groups = [InstanceGroup(name="system", role="system", instance_type="ml.m7i.2xlarge", count=1)] + [
        InstanceGroup(name=role, role=role, instance_type="ml.p5.48xlarge", count=0,
                      autoscaling={"min_nodes": 0, "max_nodes": 2}) for role in ("prefill", "decode")]
    cluster = HyperPodCluster(
        stack, "HyperPod", cluster_name="c", region="us-west-2",
        eks_cluster_arn=f"arn:{cdk.Aws.PARTITION}:eks:us-west-2:111111111111:cluster/c",
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"], instance_groups=groups,
        lifecycle_bucket_name="sagemaker-c-111111111111-us-west-2", autoscaling=ClusterAutoScaling(),
        access_logs_bucket=access_logs_bucket(stack, "AccessLogs", removal_policy=cdk.RemovalPolicy.DESTROY))
    cluster.add_karpenter_resources(kubernetes)
    apply_guardrails(app)
    # WHEN it is synthesized (the guardrails pass, or synthesis fails)
    template = app.synth().get_stack_by_name("Waits").template
    return cluster, Template.from_json(template)


def _ids(template: Template, type_: str) -> list[str]:
    return sorted(template.find_resources(type_))


def test_every_karpenter_manifest_depends_on_the_waiter(synthesized: tuple[HyperPodCluster, Template]) -> None:
    _, template = synthesized
    (waiter,) = _ids(template, RESOURCE_TYPE)
    manifests = template.find_resources(MANIFEST)
    # THEN both groups' NodeClass/NodePool manifests, and nothing else of Karpenter, wait for the waiter
    assert len(manifests) == 2
    for manifest in manifests.values():
        assert waiter in manifest["DependsOn"]
        kinds = {o["kind"] for o in json.loads(manifest["Properties"]["Manifest"])}
        assert kinds == {"HyperpodNodeClass", "NodePool"}


def test_the_waiter_reads_this_cluster_and_reruns_when_its_autoscaling_changes(
        synthesized: tuple[HyperPodCluster, Template]) -> None:
    cluster, template = synthesized
    stack = cdk.Stack.of(cluster)
    cluster_id, role_id = stack.get_logical_id(cluster.resource), stack.get_logical_id(
        cluster.cluster_role.node.default_child)  # type: ignore[union-attr, arg-type]
    # THEN it names the cluster by its ARN and carries what the autoscaling is made of: switching it on again,
    # another cluster role or other autoscaled groups change the properties, so CloudFormation sends an Update
    template.has_resource(RESOURCE_TYPE, {"Properties": {
        CLUSTER_PROPERTY: {"Fn::GetAtt": [cluster_id, "ClusterArn"]},
        "AutoScaling": {"Mode": "Enable", "AutoScalerType": "Karpenter"},
        "ClusterRole": {"Fn::GetAtt": [role_id, "Arn"]},
        "AutoscaledGroups": ["decode", "prefill"],
        "ServiceTimeout": str(SERVICE_TIMEOUT.to_seconds()),
    }})
    # AND the property the handler reads is the one the construct writes
    assert index.CLUSTER_PROPERTY == CLUSTER_PROPERTY


def test_the_handler_may_describe_only_its_own_cluster(synthesized: tuple[HyperPodCluster, Template]) -> None:
    cluster, template = synthesized
    stack = cdk.Stack.of(cluster)
    ready = cluster.autoscaling_ready
    assert ready is not None
    role_id = stack.get_logical_id(ready.node.find_child("HandlerRole").node.default_child)  # type: ignore[arg-type]
    log_group_id = stack.get_logical_id(ready.log_group.node.default_child)  # type: ignore[arg-type]
    policies = {k: v["Properties"]["PolicyDocument"]["Statement"] for k, v in template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}}).items()}
    statements = [s for group in policies.values() for s in group]
    # THEN exactly one statement grants SageMaker, and it is DescribeCluster on this cluster's ARN
    sagemaker = [s for s in statements if json.dumps(s["Action"]).count("sagemaker:")]
    assert sagemaker == [{"Sid": "DescribeThisCluster", "Effect": "Allow", "Action": "sagemaker:DescribeCluster",
                          "Resource": {"Fn::GetAtt": [stack.get_logical_id(cluster.resource), "ClusterArn"]}}]
    # AND everything else it may do is write its own log group
    others = [s for s in statements if s not in sagemaker]
    assert others == [{"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                       "Resource": {"Fn::GetAtt": [log_group_id, "Arn"]}}]
    # AND the role has no managed policy (no AWSLambdaBasicExecutionRole: the log grant above is all it needs)
    template.has_resource_properties("AWS::IAM::Role", {
        "AssumeRolePolicyDocument": {"Statement": [Match.object_like(
            {"Principal": {"Service": "lambda.amazonaws.com"}})]},
        "ManagedPolicyArns": Match.absent(),
        "Description": Match.string_like_regexp("^Waits for HyperPod autoscaling")})


def test_the_framework_gives_up_before_cloudformation_does(synthesized: tuple[HyperPodCluster, Template]) -> None:
    _, template = synthesized
    (machine,) = template.find_resources("AWS::StepFunctions::StateMachine").values()
    # the definition with the functions' ARNs (Fn::GetAtt) written as "arn"
    definition = json.loads("".join(p if isinstance(p, str) else "arn"
                                    for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1]))
    (retry,) = definition["States"]["framework-isComplete-task"]["Retry"]
    # THEN it polls once a minute for at most 55 minutes, inside the custom resource's 3,600-second ServiceTimeout
    assert (retry["IntervalSeconds"], retry["MaxAttempts"], retry["BackoffRate"]) == (60, 55, 1)
    assert retry["IntervalSeconds"] * retry["MaxAttempts"] < SERVICE_TIMEOUT.to_seconds()
    # AND every execution is logged (a failed wait can be read afterwards)
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"


def _waiter_functions(cluster: HyperPodCluster, template: Template) -> dict[str, dict[str, Any]]:
    """The synthesized Lambda functions of the cluster's autoscaling waiter, by logical ID."""
    ready = cluster.autoscaling_ready
    assert ready is not None
    stack = cdk.Stack.of(cluster)
    functions = template.find_resources("AWS::Lambda::Function")
    return {k: functions[k] for k in (stack.get_logical_id(f.node.default_child)  # type: ignore[arg-type]
                                      for f in ready.functions.values())}


def test_its_functions_log_to_a_retained_log_group_on_the_newest_python(
        synthesized: tuple[HyperPodCluster, Template]) -> None:
    cluster, template = synthesized
    ready = cluster.autoscaling_ready
    assert ready is not None
    stack = cdk.Stack.of(cluster)
    log_group_id = stack.get_logical_id(ready.log_group.node.default_child)  # type: ignore[arg-type]
    own = _waiter_functions(cluster, template)
    # THEN both handlers run the packaged index.py on Python with a bounded timeout and log to the waiter's group,
    # which keeps its events for a year
    assert sorted(f["Properties"]["Handler"] for f in own.values()) == ["index.is_complete", "index.on_event"]
    for function in own.values():
        props = function["Properties"]
        assert props["Runtime"].startswith("python3.") and props["Timeout"] == 60
        assert props["LoggingConfig"]["LogGroup"] == {"Ref": log_group_id}
    template.has_resource("AWS::Logs::LogGroup", {"Properties": {"RetentionInDays": 365}})


def test_the_handler_gives_up_with_its_own_message_before_the_framework_times_out(
        synthesized: tuple[HyperPodCluster, Template]) -> None:
    cluster, template = synthesized
    ready = cluster.autoscaling_ready
    assert ready is not None
    (machine,) = template.find_resources("AWS::StepFunctions::StateMachine").values()
    definition = json.loads("".join(p if isinstance(p, str) else "arn"
                                    for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1]))
    (retry,) = definition["States"]["framework-isComplete-task"]["Retry"]
    # THEN the waiter's functions know when to give up: at least one poll before the framework's last attempt, so
    # CloudFormation gets the handler's message (the last DescribeCluster state), not "Operation timed out"
    for function in _waiter_functions(cluster, template).values():
        variables = function["Properties"]["Environment"]["Variables"]
        give_up = int(variables[index.GIVE_UP_ENV])
        assert 0 < give_up <= retry["IntervalSeconds"] * (retry["MaxAttempts"] - 1)


def test_no_autoscaled_group_no_waiter(cdk_context: dict[str, Any]) -> None:
    # GIVEN autoscaling enabled on the cluster but no group that autoscales (construct only: nothing is synthesized)
    stack = cdk.Stack(cdk.App(context=cdk_context), "Fixed", env=cdk.Environment(account="111111111111",
                                                                                  region="us-west-2"))
    kubectl = eks.KubectlProvider.from_kubectl_provider_attributes(stack, "Kube", service_token="arn:token")
    kubernetes = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="c", kubectl_provider=kubectl)
    cluster = HyperPodCluster(
        stack, "HyperPod", cluster_name="c", region="us-west-2", eks_cluster_arn="arn:eks",
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"],
        instance_groups=[InstanceGroup(name="decode", role="decode", instance_type="ml.p5.48xlarge", count=1)],
        lifecycle_bucket_name="sagemaker-c", autoscaling=ClusterAutoScaling())
    # WHEN the Karpenter resources are added
    # THEN there are none, and no waiter
    assert cluster.add_karpenter_resources(kubernetes) == {}
    assert cluster.autoscaling_ready is None and cluster.node.try_find_child("AutoScalingReady") is None


def test_the_waiter_owns_its_cluster_property() -> None:
    # GIVEN a configuration that tries to set the property naming the cluster
    stack = cdk.Stack(cdk.App(), "Bad")
    # THEN the construct refuses before anything is made
    with pytest.raises(ValueError, match="ClusterArn is the waiter's own property"):
        AutoScalingReady(stack, "Ready", cluster_arn="arn", cluster_name="c", configuration={CLUSTER_PROPERTY: "x"})
    assert stack.node.try_find_child("Ready") is None
