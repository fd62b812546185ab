"""AutoScalingReady: a CloudFormation wait that holds the Karpenter manifests until HyperPod's autoscaling is InService.

AWS: "The HyperPod cluster must have AutoScaling enabled and the AutoScaling status must change to ``InService``
before the ``HyperpodNodeClass`` can be applied" (SageMaker developer guide, "Create a NodeClass"), and its
walkthrough ("Create and configure a HyperPod cluster with Karpenter autoscaling") polls ``DescribeCluster`` until
both ``ClusterStatus`` and ``AutoScaling.Status`` are ``InService``. ``AWS::SageMaker::Cluster`` completes on the
cluster's status alone: its schema has no autoscaling status among its read-only properties (cfn-lint 1.58).

So a custom resource of aws-cdk-lib's Provider framework polls ``sagemaker:DescribeCluster`` (the handlers are in
``handlers/autoscaling_ready/index.py``) and every Karpenter manifest depends on it. Its properties carry the cluster's
autoscaling configuration and the autoscaled groups, so switching autoscaling on again, changing the cluster role or
the groups sends an Update, and the waiter checks again (one call when nothing changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from hyperpod_dpd.infra import checkov, nag, source_conditions

HANDLER_DIR = Path(__file__).parent / "handlers" / "autoscaling_ready"
RESOURCE_TYPE = "Custom::HyperPodAutoScalingReady"
CLUSTER_PROPERTY = "ClusterArn"  # read by the handler (handlers/autoscaling_ready/index.py, CLUSTER_PROPERTY)
DESCRIBE_CLUSTER = "sagemaker:DescribeCluster"
# CloudFormation waits at most one hour for a custom resource's answer (ServiceTimeout: 1-3600 s, aws-cdk-lib 2.275
# CustomResource; aws_cdk.custom_resources.Provider: "The maximum timeout is 1 hour"). The framework gives up five
# minutes earlier, so the failure it reports is its own and not CloudFormation's bare timeout. Autoscaling starts
# once the cluster is InService, which CloudFormation waited for already, so the wait covers only Karpenter's start.
SERVICE_TIMEOUT = cdk.Duration.hours(1)
TOTAL_TIMEOUT = cdk.Duration.minutes(55)
QUERY_INTERVAL = cdk.Duration.minutes(1)  # 55 DescribeCluster calls at most; the first right after the request
HANDLER_TIMEOUT = cdk.Duration.seconds(60)
# The handler fails the request itself two polls before the framework would, naming the last DescribeCluster state
# (the framework's own timeout answers CloudFormation "Operation timed out" and nothing more).
GIVE_UP = cdk.Duration.minutes(TOTAL_TIMEOUT.to_minutes() - 2 * QUERY_INTERVAL.to_minutes())
GIVE_UP_ENV = "GIVE_UP_AFTER_SECONDS"  # read by the handler (handlers/autoscaling_ready/index.py, GIVE_UP_ENV)
# The newest Python runtime aws-cdk-lib 2.275 knows (cdk-nag AwsSolutions-L1 wants the newest of the family); its
# boto3 must know DescribeCluster's AutoScaling field, which the handler checks before it waits.
RUNTIME = lambda_.Runtime.PYTHON_3_14

FRAMEWORK = "aws-cdk-lib's custom-resource Provider framework, which runs the autoscaling waiter"
# checkov findings that do not apply to the waiter's functions (its own and the framework's), with the reason.
FUNCTION_SKIPS = {
    "CKV_AWS_115": "deployment-time handler invoked by CloudFormation (through the Provider framework) only; reserved "
                   "concurrency would only add a failure mode in accounts with a low concurrency quota",
    "CKV_AWS_116": "called synchronously by the Provider framework; a failure fails the CloudFormation request with "
                   "its message, a dead-letter queue would never receive it",
    "CKV_AWS_117": "calls only AWS APIs (SageMaker DescribeCluster, Lambda, Step Functions, the CloudFormation "
                   "response URL); nothing in the VPC",
}
# The waiter's own functions have one environment variable, the number of seconds it gives up after.
HANDLER_FUNCTION_SKIPS = {
    **FUNCTION_SKIPS,
    "CKV_AWS_173": "its environment holds one number (the seconds the waiter gives up after), no secret; encrypted "
                   "at rest with the AWS managed key",
}
# The framework's functions have an environment (the handlers' and the state machine's ARNs).
FRAMEWORK_FUNCTION_SKIPS = {
    **FUNCTION_SKIPS,
    "CKV_AWS_173": "its environment holds function and state-machine ARNs only, no secrets; encrypted at rest with "
                   "the AWS managed key",
}
LOG_GROUP_SKIPS = {
    "CKV_AWS_158": "logs of a deployment-time waiter: request events and cluster status only, no model or request "
                   "data; encrypted at rest by CloudWatch Logs",
}
# Step Functions delivers logs through CloudWatch Logs' vended-log actions (CreateLogDelivery, PutResourcePolicy, ...),
# which support no resource-level permissions (Step Functions developer guide, "IAM policies for logging to CloudWatch
# Logs"); aws-cdk-lib grants them on "*" to the waiter's state machine.
STATE_MACHINE_POLICY_SKIPS = {
    "CKV_AWS_111": f"{FRAMEWORK}: its state machine's log delivery uses CloudWatch Logs actions that support no "
                   "resource-level permissions; its only other grant is invoking the framework's two functions",
}
STATE_MACHINE_SKIPS = {
    "CKV_AWS_284": f"{FRAMEWORK}: its state machine is built by aws-cdk-lib, which offers no tracing setting; its "
                   "executions are logged in full instead",
}


class AutoScalingReady(Construct):
    """Completes once ``DescribeCluster`` shows the cluster and its autoscaling ``InService``; fails with HyperPod's
    ``FailureMessage`` when either is ``Failed``, and after :data:`TOTAL_TIMEOUT` when it never gets there.

    The handler may call ``sagemaker:DescribeCluster`` on this one cluster's ARN and write to its own log group,
    nothing else. ``resource`` is the ``CustomResource`` to depend on.

    Args:
        cluster_arn: the HyperPod cluster's ARN (``HyperPodCluster.cluster_arn``). No default.
        cluster_name: its name (descriptions). No default.
        configuration: what the cluster's autoscaling is made of (mode, autoscaler, cluster role, autoscaled groups);
            it becomes properties of the resource, so a change to it re-runs the wait on update. No default.
        removal_policy: of the handler's log group. Default: DESTROY.
        log_retention: of the handler's log group. Default: one year.
    """

    def __init__(self, scope: Construct, id: str, *, cluster_arn: str, cluster_name: str,
                 configuration: Mapping[str, Any], removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR) -> None:
        if CLUSTER_PROPERTY in configuration:
            raise ValueError(f"{CLUSTER_PROPERTY} is the waiter's own property")
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        role = iam.Role(self, "HandlerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"Waits for HyperPod autoscaling of {cluster_name} to be InService")
        self.log_group.grant_write(role)
        # DescribeCluster on the cluster's own ARN (from CloudFormation, so in the stack's partition), nothing else
        self.read_policy = iam.Policy(self, "ReadClusterPolicy", statements=[iam.PolicyStatement(
            sid="DescribeThisCluster", actions=[DESCRIBE_CLUSTER], resources=[cluster_arn])])
        self.read_policy.attach_to_role(role)
        code = lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"])
        functions = {name: lambda_.Function(self, name, runtime=RUNTIME, code=code, handler=f"index.{entry}", role=role,
                                            timeout=HANDLER_TIMEOUT, log_group=self.log_group, memory_size=256,
                                            environment={GIVE_UP_ENV: str(int(GIVE_UP.to_seconds()))},
                                            description=f"{RESOURCE_TYPE} {entry} ({cluster_name})")
                     for name, entry in (("OnEvent", "on_event"), ("IsComplete", "is_complete"))}
        for function in functions.values():
            function.node.add_dependency(self.read_policy)
        state_machine_logs = logs.LogGroup(self, "WaiterLogs", retention=log_retention, removal_policy=removal_policy)
        self.provider = cr.Provider(
            self, "Provider", on_event_handler=functions["OnEvent"], is_complete_handler=functions["IsComplete"],
            query_interval=QUERY_INTERVAL, total_timeout=TOTAL_TIMEOUT, log_group=self.log_group,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(destination=state_machine_logs, level=sfn.LogLevel.ALL,
                                                            include_execution_data=True))
        self.resource = cdk.CustomResource(
            self, "Resource", service_token=self.provider.service_token, resource_type=RESOURCE_TYPE,
            service_timeout=SERVICE_TIMEOUT,
            properties={CLUSTER_PROPERTY: cluster_arn, **configuration})
        self.functions = functions
        self._acknowledge()

    def _acknowledge(self) -> None:
        """cdk-nag and checkov findings on the waiter and on the framework aws-cdk-lib builds for it."""
        for function in self.functions.values():
            checkov.skip_all(_cfn(function), HANDLER_FUNCTION_SKIPS)
        for group in (self.log_group, self.node.find_child("WaiterLogs")):
            checkov.skip_all(_cfn(group), LOG_GROUP_SKIPS)
        acknowledge_framework(self, self.provider, framework=FRAMEWORK, handlers="the waiter's handlers")


def acknowledge_framework(scope: Construct, provider: cr.Provider, *, framework: str, handlers: str) -> None:
    """The cdk-nag and checkov findings on what aws-cdk-lib's Provider framework builds around ``provider``'s handlers
    (its three functions, their roles, the waiter state machine and its role), acknowledged with ``framework`` (what
    the framework runs, for the reasons) and ``handlers`` (what its functions invoke); the state machine's trust is
    bound to ``scope``'s account."""
    for name in ("framework-onEvent", "framework-isComplete", "framework-onTimeout"):
        framework_function = provider.node.find_child(name)
        nag.acknowledge_generated_function(framework_function,
                                           f"{framework}; its Node.js runtime is chosen by aws-cdk-lib")
        checkov.skip_all(_cfn(framework_function), FRAMEWORK_FUNCTION_SKIPS)
        role = framework_function.node.find_child("ServiceRole")
        nag.acknowledge_managed_policies(role, {
            "service-role/AWSLambdaBasicExecutionRole": f"{framework}; aws-cdk-lib gives its functions this "
                                                        "policy to write their logs"})
        nag.acknowledge_generated_policy(role.node.try_find_child("DefaultPolicy"),
                                         f"{framework}; it invokes every version of {handlers}")
    waiter = provider.node.find_child("waiter-state-machine")
    waiter_policy = waiter.node.find_child("Role").node.try_find_child("DefaultPolicy")
    nag.acknowledge_generated_policy(waiter_policy, f"{framework}; its state machine invokes every version of the "
                                     "framework functions and delivers its execution logs, which supports no "
                                     "resource scope")
    assert waiter_policy is not None  # acknowledge_generated_policy raised otherwise
    checkov.skip_all(_cfn(waiter_policy), STATE_MACHINE_POLICY_SKIPS)
    nag.acknowledge(waiter, "AwsSolutions-SF2", f"{framework}: aws-cdk-lib builds the state machine and offers "
                                                "no tracing setting; every execution is logged in full instead")
    checkov.skip_all(_cfn(waiter), STATE_MACHINE_SKIPS)
    # The state machine's role (aws-cdk-lib's), bound to this account's state machines in place.
    source_conditions.bind_trust(cast(iam.IRole, waiter.node.find_child("Role")), "states.amazonaws.com",
                                 source_conditions.step_functions(scope))


def _cfn(construct: IConstruct) -> cdk.CfnResource:
    """The CloudFormation resource behind an L2 construct."""
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnResource), construct.node.path
    return resource
