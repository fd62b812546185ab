"""GlobalInferenceGateway: a SageMaker Global Inference Gateway as a custom resource (SageMaker has no CloudFormation
type for it in the registry schemas cfn-lint 1.58 ships), with its execution role.

The handler (``handlers/global_gateway/index.py``) runs in aws-cdk-lib's Provider framework, which polls
``is_complete`` until the gateway is ``ACTIVE`` and its members are what the configuration says; its permissions are
the exact SageMaker actions it calls (botocore 1.44.8, ``sagemaker`` service-2) on this account's global inference
gateways in the home Region, ``DescribeCluster`` on the members' Regions, and ``iam:PassRole`` on the execution role
alone, only to SageMaker.

Tags: a custom resource is not tagged by CloudFormation (neither its stack's tags nor a template ``Tags`` reach what
the handler creates), so the construct is taggable itself (``ITaggableV2``: ``cdk.Tags.of(scope).add`` reaches it, as
it does the L1 resources) and passes its tags, over its stack's own (``Stack(tags=...)``), as the resource's ``Tags``,
which the handler sends with ``CreateGlobalInferenceGateway`` (``Tags``, a TagList of at most 50). At create only: a
tag changed later is not applied to the existing gateway.

Not confirmed by any page read (so kept minimal, and said so in docs/global.md):

* the resource types each action authorizes: the gateway's ARN ends in a random 12-character id
  (GlobalInferenceGatewayArn), so the gateway actions are scoped to ``global-inference-gateway/*`` of the home Region
  and account; ``CreateGlobalInferenceGateway``, ``AddInferenceGateway`` and ``RemoveInferenceGateway`` name
  clusters, so they are also allowed on the member Regions' ``cluster/*`` (the clusters' ids are HyperPod's);
* that a create with ``Tags`` is also authorized as ``sagemaker:AddTags`` on the new gateway: SageMaker says so of
  the resources Studio creates ("Custom IAM policies that allow [...] to create Amazon SageMaker resources must also
  grant permissions to add tags to those resources",
  https://docs.amazonaws.cn/en_us/sagemaker/latest/dg/canvas-set-up-cv-nlp.html), not of this one; the handler may
  ``AddTags`` on the same ``global-inference-gateway/*``, so a create with tags is not refused for the lack of it;
* the execution role's trust and permissions: the model says only that it is "the IAM role that the global inference
  gateway assumes to access your SageMaker HyperPod clusters", "in your account and partition". The role trusts
  ``sagemaker.amazonaws.com`` bound to this account's SageMaker resources (:func:`source_conditions.sagemaker`) and may
  only ``DescribeCluster`` in the members' Regions; a synthesis warning says so, and ``execution_role_arn`` in
  ``global.yaml`` brings a role of one's own instead.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import botocore
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from hyperpod_dpd.infra import checkov, nag, source_conditions
from hyperpod_dpd.infra.arns import arn, iam_arn
from hyperpod_dpd.infra.autoscaling_ready import LOG_GROUP_SKIPS, acknowledge_framework

HANDLER_DIR = Path(__file__).parent / "handlers" / "global_gateway"
# The Global Inference Gateway API is newer than the boto3 a Lambda runtime may bundle (the runtimes' SDK versions lag
# the SDK: https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html, "Runtime-included SDK versions"), so the
# asset carries the SageMaker service model of the pinned botocore and points the runtime's botocore at it:
# AWS_DATA_PATH paths are searched before botocore's own data (botocore/loaders.py, create_loader and
# Loader.__init__: extra_search_paths first), so the runtime's client has these operations whatever its version.
MODEL_FILE = Path("sagemaker") / "2017-07-24" / "service-2.json.gz"
MODELS_DIR = "models"  # inside the asset; /var/task is where Lambda puts a zip function's code (LAMBDA_TASK_ROOT)
DATA_PATH = f"/var/task/{MODELS_DIR}"
RESOURCE_TYPE = "Custom::GlobalInferenceGateway"
SAGEMAKER = "sagemaker.amazonaws.com"
# The calls of the handler (botocore 1.44.8, sagemaker service-2, operations of the same names).
GATEWAY_ACTIONS = tuple(f"sagemaker:{a}" for a in (
    "CreateGlobalInferenceGateway", "DescribeGlobalInferenceGateway", "UpdateGlobalInferenceGateway",
    "DeleteGlobalInferenceGateway", "AddInferenceGateway", "RemoveInferenceGateway", "ListInferenceGateways"))
CLUSTER_ACTIONS = tuple(f"sagemaker:{a}" for a in (
    "CreateGlobalInferenceGateway", "AddInferenceGateway", "RemoveInferenceGateway"))
DESCRIBE_CLUSTER = "sagemaker:DescribeCluster"
# A create with Tags (CreateGlobalInferenceGatewayRequest.Tags) is authorized as AddTags too, as for SageMaker's other
# creates (unconfirmed for this resource type: docs/global.md).
ADD_TAGS = "sagemaker:AddTags"
PASS_ROLE = "iam:PassRole"  # noqa: S105 - an IAM action, not a secret
RUNTIME = lambda_.Runtime.PYTHON_3_14  # the newest Python runtime aws-cdk-lib 2.275 knows (cdk-nag AwsSolutions-L1)
HANDLER_TIMEOUT = cdk.Duration.minutes(2)  # up to 10 DescribeCluster calls and one change per poll
# CloudFormation waits at most one hour (ServiceTimeout 1-3600 s); the framework gives up five minutes earlier, so the
# failure it reports is its own. A gateway's create, each member's addition and the routing update share the hour.
SERVICE_TIMEOUT = cdk.Duration.hours(1)
TOTAL_TIMEOUT = cdk.Duration.minutes(55)
QUERY_INTERVAL = cdk.Duration.seconds(30)
FRAMEWORK = "aws-cdk-lib's custom-resource Provider framework, which runs the global gateway's handler"
FUNCTION_SKIPS = {
    "CKV_AWS_115": "deployment-time handler invoked by CloudFormation (through the Provider framework) only; reserved "
                   "concurrency would only add a failure mode in accounts with a low concurrency quota",
    "CKV_AWS_116": "called synchronously by the Provider framework; a failure fails the CloudFormation request with "
                   "its message, a dead-letter queue would never receive it",
    "CKV_AWS_117": "calls only SageMaker's API; nothing in a VPC",
}
ROLE_UNCONFIRMED = "hpdpd:global-gateway-execution-role"


@dataclass(frozen=True, kw_only=True)
class Member:
    """One in-cluster gateway: the HyperPod cluster (by name, in its Region) and its InferenceGatewayConfig."""

    environment: str
    region: str
    cluster_name: str
    namespace: str
    name: str

    def properties(self) -> dict[str, str]:
        return {"Environment": self.environment, "Region": self.region, "ClusterName": self.cluster_name,
                "Namespace": self.namespace, "Name": self.name}


@jsii.implements(cdk.IStableAnyProducer)
class _Tags:
    """The gateway's ``Tags`` at synthesis (after the Tags aspects ran): its stack's, then its own, by key."""

    def __init__(self, construct: GlobalInferenceGateway) -> None:
        self.construct = construct

    def produce(self) -> Any:
        tags = {**cdk.Stack.of(self.construct).tags.tag_values(), **self.construct.cdk_tag_manager.tag_values()}
        return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


@jsii.implements(cdk.ITaggableV2)
class GlobalInferenceGateway(Construct):
    """The gateway ``name`` in this stack's account and Region with ``members`` and ``weights``.

    Attributes: ``resource`` (the custom resource: ``Arn``, ``Id``, ``EndpointUrl`` as attributes), ``execution_role``
    (None with ``execution_role_arn``), ``execution_role_arn``, ``handler_role``, ``policy`` (the handler's),
    ``cdk_tag_manager`` (the tags ``cdk.Tags`` gives the gateway, sent at its create with its stack's).

    Args:
        name: the gateway's name (GlobalInferenceGatewayName). No default.
        members: 1-10 members (GlobalInferenceGatewayMembers). No default.
        weights: ``Routing.Weights`` by their API names; empty: SageMaker's defaults. Default: none.
        execution_role_arn: a role of one's own in this account; None creates one. Default: None.
        removal_policy: of the handler's log groups. Default: DESTROY.
        log_retention: of the handler's log groups. Default: one year.
    """

    def __init__(self, scope: Construct, id: str, *, name: str, members: Sequence[Member],
                 weights: Mapping[str, float] | None = None, execution_role_arn: str | None = None,
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR) -> None:
        if not 1 <= len(members) <= 10:
            raise ValueError(f"a global inference gateway has 1-10 members, not {len(members)}")
        bad = sorted(set(weights or {}) - {"KVHeadroom", "QueueDepth", "RegionProximity", "ErrorRate"})
        if bad or any(not 0.0 <= float(w) <= 1.0 for w in (weights or {}).values()):
            raise ValueError(f"weights must be KVHeadroom, QueueDepth, RegionProximity, ErrorRate in [0, 1]: {weights}")
        super().__init__(scope, id)
        self._tag_manager = cdk.TagManager(cdk.TagType.KEY_VALUE, RESOURCE_TYPE)
        regions = sorted({m.region for m in members})
        clusters = [arn(self, "sagemaker", "cluster/*", region=r) for r in regions]
        self.execution_role: iam.Role | None = None
        # A role of one's own is granted (iam:PassRole) by an ARN with ${AWS::Partition} (HPDPD-IAM1), in this account
        if execution_role_arn is not None:
            pass_role = iam_arn(self, execution_role_arn.split(":", 5)[5])
        else:
            self.execution_role = iam.Role(
                self, "ExecutionRole", assumed_by=source_conditions.service_principal(
                    SAGEMAKER, source_conditions.sagemaker(self)),
                description=f"Assumed by the global inference gateway {name} to reach its HyperPod clusters")
            statement = iam.PolicyStatement(sid="DescribeMemberClusters", actions=[DESCRIBE_CLUSTER], resources=clusters)
            policy = iam.Policy(self, "ExecutionPolicy", statements=[statement])
            policy.attach_to_role(self.execution_role)
            nag.acknowledge_wildcards(policy, [statement], {"DescribeMemberClusters": (
                "HyperPod cluster ARNs end in an id HyperPod assigns (cluster/<12 characters>); scoped to this "
                "account and the members' Regions")})
            cdk.Annotations.of(self.execution_role).add_warning_v2(ROLE_UNCONFIRMED, (
                f"the execution role of global gateway {name}: no AWS page read states its trust or permissions; it "
                "trusts sagemaker.amazonaws.com for this account's SageMaker resources and may only DescribeCluster. "
                "If the gateway fails to reach its clusters, set execution_role_arn in global.yaml (docs/global.md)"))
            execution_role_arn = pass_role = self.execution_role.role_arn
        self.execution_role_arn = execution_role_arn
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.handler_role = iam.Role(self, "HandlerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                                     description=f"Creates, reconciles and deletes the global inference gateway {name}")
        self.log_group.grant_write(self.handler_role)
        statements = [
            iam.PolicyStatement(sid="ManageTheGateway", actions=[*GATEWAY_ACTIONS, ADD_TAGS],
                                resources=[arn(self, "sagemaker", "global-inference-gateway/*")]),
            iam.PolicyStatement(sid="NameMemberClusters", actions=[DESCRIBE_CLUSTER, *CLUSTER_ACTIONS],
                                resources=clusters),
            iam.PolicyStatement(sid="PassTheExecutionRole", actions=[PASS_ROLE], resources=[pass_role],
                                conditions={"StringEquals": {"iam:PassedToService": SAGEMAKER}}),
        ]
        self.policy = iam.Policy(self, "HandlerPolicy", statements=statements)
        self.policy.attach_to_role(self.handler_role)
        nag.acknowledge_wildcards(self.policy, statements, {
            "ManageTheGateway": "a global inference gateway's ARN ends in an id SageMaker assigns at creation "
                                "(global-inference-gateway/<12 characters>); scoped to this account and Region",
            "NameMemberClusters": "HyperPod cluster ARNs end in an id HyperPod assigns; scoped to this account and the "
                                  "members' Regions"})
        code = lambda_.Code.from_asset(str(staged_handler()), exclude=["__pycache__", "*.pyc"])
        self.functions = {key: lambda_.Function(
            self, key, runtime=RUNTIME, code=code, handler=f"index.{entry}", role=self.handler_role,
            timeout=HANDLER_TIMEOUT, log_group=self.log_group, memory_size=256,
            environment={"AWS_DATA_PATH": DATA_PATH},
            description=f"{RESOURCE_TYPE} {entry} ({name})")
            for key, entry in (("OnEvent", "on_event"), ("IsComplete", "is_complete"))}
        for function in self.functions.values():
            function.node.add_dependency(self.policy)
        waiter_logs = logs.LogGroup(self, "WaiterLogs", retention=log_retention, removal_policy=removal_policy)
        self.provider = cr.Provider(
            self, "Provider", on_event_handler=self.functions["OnEvent"],
            is_complete_handler=self.functions["IsComplete"], query_interval=QUERY_INTERVAL,
            total_timeout=TOTAL_TIMEOUT, log_group=self.log_group, disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(destination=waiter_logs, level=sfn.LogLevel.ALL,
                                                            include_execution_data=True))
        properties: dict[str, Any] = {
            "Name": name, "Region": cdk.Stack.of(self).region, "ExecutionRoleArn": execution_role_arn,
            "Members": [m.properties() for m in members]}
        if weights:
            properties["Routing"] = {"Weights": {k: str(float(v)) for k, v in weights.items()}}
        properties["Tags"] = cdk.Lazy.any(_Tags(self), omit_empty_array=True)
        self.resource = cdk.CustomResource(self, "Resource", service_token=self.provider.service_token,
                                           resource_type=RESOURCE_TYPE, service_timeout=SERVICE_TIMEOUT,
                                           properties=properties)
        self._acknowledge(waiter_logs)

    @property
    def cdk_tag_manager(self) -> cdk.TagManager:
        return self._tag_manager

    def _acknowledge(self, waiter_logs: logs.LogGroup) -> None:
        """cdk-nag and checkov findings on the handler and on the framework aws-cdk-lib builds for it."""
        for function in self.functions.values():
            checkov.skip_all(_cfn(function), FUNCTION_SKIPS)
        for group in (self.log_group, waiter_logs):
            checkov.skip_all(_cfn(group), LOG_GROUP_SKIPS)
        acknowledge_framework(self, self.provider, framework=FRAMEWORK, handlers="the handler's functions")


def _cfn(construct: IConstruct) -> cdk.CfnResource:
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnResource), construct.node.path
    return resource


@functools.cache
def staged_handler() -> Path:
    """The handler's asset: ``index.py`` and, under ``models/``, the installed botocore's SageMaker model (once per
    process; the asset's hash follows the model, so a botocore upgrade redeploys the handler)."""
    staged = Path(tempfile.mkdtemp(prefix="hpdpd-global-gateway-"))
    atexit.register(shutil.rmtree, staged, ignore_errors=True)  # synthesis copied it into the assembly by then
    shutil.copy2(HANDLER_DIR / "index.py", staged / "index.py")
    model = staged / MODELS_DIR / MODEL_FILE
    model.parent.mkdir(parents=True)
    shutil.copy2(Path(botocore.__file__).parent / "data" / MODEL_FILE, model)
    return staged
