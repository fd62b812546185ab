"""ChecksRole: the role the promotion pipeline's check steps assume in one environment, with exactly the read-only
calls of ``hpdpd preflight``, ``wait`` and ``status``, and (with the checks runner) the calls that start the runner.

The pipeline's steps (stacks/pipeline_stack.py) run in CodeBuild in the pipeline account. Every one of them assumes
this role, never the CDK bootstrap lookup role (which carries ``ReadOnlyAccess`` on the whole account).

* **Where**: the environment's network stack (:func:`hyperpod_dpd.infra.platform.build_network`), which the pipeline
  deploys before its ``Preflight`` step; the platform stack does not exist yet on a first deploy, and preflight must
  run before the platform creates the HyperPod cluster. :class:`ChecksRoleGrants` (in the platform stack) adds what
  needs the platform's resources: starting the checks runner (infra/checks_runner.py) and reading the platform stack's
  outputs.
* **Name**: explicit (``hpdpd-<env>-checks``, :data:`hyperpod_dpd.config.environment.CHECKS_ROLE_NAME`), so the
  pipeline account can name it before it exists.
* **Trust**: one role ARN, the pipeline's CodeBuild role of this environment's checks. The trust policy names the
  pipeline *account* as principal with an ``aws:PrincipalArn`` condition on that role: IAM refuses a trust policy whose
  principal is a role that does not exist yet, and turns a role principal into the role's unique id, so a recreated
  pipeline role would lose the trust; the condition key holds "the ARN of the role, not the ARN of the user that
  assumed the role" for role sessions (IAM User Guide, "AWS global condition context keys", ``aws:PrincipalArn``).
* **Read permissions**: one action per AWS call the three commands make (:data:`READ_CALLS`), on this environment's
  resources where the action takes a resource (Service Authorization Reference: Amazon EKS, SageMaker AI, Amazon S3,
  AWS CloudFormation list the resource types used below; Service Quotas' list actions and EC2's ``Describe*`` take
  none, ``*``); with training plans, ``sagemaker:DescribeTrainingPlan`` on those plans (:data:`PLAN_CALLS`).
* **Runner permissions** (:class:`ChecksRoleGrants`): ``codebuild:BatchGetProjects``, ``StartBuild``,
  ``BatchGetBuilds`` and ``StopBuild`` on the one project (CodeBuild authorizes each on the project ARN: Service
  Authorization Reference, AWS CodeBuild, resource type ``project``), ``s3:PutObject`` under the runner bucket's
  ``sources/``, and ``logs:GetLogEvents`` on the runner's log group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_dpd.catalogue.pipeline_contract import SOURCE_PREFIX
from hyperpod_dpd.config.environment import IAM_ROLE_NAME, TRUSTED_ROLE_ARN
from hyperpod_dpd.config.identity import MANIFEST_STACK_PARTS, owned_names, stack_name
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import nag
from hyperpod_dpd.infra.arns import arn, iam_arn
from hyperpod_dpd.infra.checks_runner import ChecksRunner, endpoint_resources

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

# Every AWS call of `hpdpd preflight`, `wait` (cluster, add-ons, endpoint) and `status` without a kubeconfig, and the
# pipeline step's one AWS CLI call, as (boto3 service, operation) -> the IAM action it needs (None: none needed).
READ_CALLS: Mapping[tuple[str, str], str | None] = {
    ("sts", "GetCallerIdentity"): None,  # "No permissions are required" (STS API reference, GetCallerIdentity)
    ("service-quotas", "ListServiceQuotas"): "servicequotas:ListServiceQuotas",  # hyperpod_dpd/ops/quotas.py
    ("service-quotas", "ListAWSDefaultServiceQuotas"): "servicequotas:ListAWSDefaultServiceQuotas",
    ("ec2", "DescribeInstanceTypeOfferings"): "ec2:DescribeInstanceTypeOfferings",  # hyperpod_dpd/ops/capacity.py
    ("ec2", "DescribeInstanceTypes"): "ec2:DescribeInstanceTypes",
    ("ec2", "DescribeSubnets"): "ec2:DescribeSubnets",
    ("ec2", "DescribeAvailabilityZones"): "ec2:DescribeAvailabilityZones",  # hyperpod_dpd/ops/zones.py
    ("eks", "DescribeCluster"): "eks:DescribeCluster",  # hyperpod_dpd/ops/clusters.py
    ("eks", "ListAddons"): "eks:ListAddons",  # hyperpod_dpd/ops/addons.py
    ("eks", "DescribeAddon"): "eks:DescribeAddon",
    ("eks", "DescribeAddonVersions"): "eks:DescribeAddonVersions",  # hyperpod_dpd/ops/eks_checks.py
    # HeadBucket and ListObjectsV2 are both authorized as s3:ListBucket (S3 API reference, "HeadBucket":
    # "you must have permissions to perform the s3:ListBucket action"; "ListObjectsV2": same) (hyperpod_dpd/ops/model_checks.py)
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("sagemaker", "DescribeCluster"): "sagemaker:DescribeCluster",  # hyperpod_dpd/ops/clusters.py, quotas.py
    ("sagemaker", "ListClusters"): "sagemaker:ListClusters",  # the account's other clusters (hyperpod_dpd/ops/quotas.py)
    ("sagemaker", "ListClusterNodes"): "sagemaker:ListClusterNodes",
    ("sagemaker", "DescribeEndpoint"): "sagemaker:DescribeEndpoint",  # hyperpod_dpd/ops/endpoints.py
    ("cloudformation", "DescribeStacks"): "cloudformation:DescribeStacks",  # the KvFabric step's Prometheus URL
    # Who holds the names the stacks create (hyperpod_dpd/ops/ownership.py; the EKS cluster's tags come with DescribeCluster):
    # each action on the one resource type it authorizes (Service Authorization Reference, Amazon SageMaker AI
    # ListTags, Amazon S3 GetBucketTagging "bucket", IAM ListRoleTags "role").
    ("sagemaker", "ListTags"): "sagemaker:ListTags",
    ("s3", "GetBucketTagging"): "s3:GetBucketTagging",
    ("iam", "ListRoleTags"): "iam:ListRoleTags",
}
# Calls preflight makes only for instance groups with a training plan (hyperpod_dpd/ops/zones.py), granted on those plans only.
# sagemaker:DescribeTrainingPlan takes the training-plan resource: AWS's managed policy
# AmazonSageMakerTrainingPlanCreateAccess grants it on arn:aws:sagemaker:*:*:training-plan/* (SageMaker Developer
# Guide, "AWS managed policies for SageMaker training plans").
PLAN_CALLS: Mapping[tuple[str, str], str] = {
    ("sagemaker", "DescribeTrainingPlan"): "sagemaker:DescribeTrainingPlan",
}
# Calls preflight makes only for an environment with delivery.endpoints: gitops (hyperpod_dpd/ops/handover.py), granted
# on that environment's platform and endpoints stacks only: cloudformation:GetTemplate takes the stack resource
# (Service Authorization Reference, AWS CloudFormation: GetTemplate, resource type "stack").
HANDOVER_CALLS: Mapping[tuple[str, str], str] = {
    ("cloudformation", "GetTemplate"): "cloudformation:GetTemplate",
}
# Calls preflight makes for an environment that is a member of a global inference gateway (global.yaml, read by
# hyperpod_dpd/cli/preflight.py; hyperpod_dpd/ops/global_preflight.py): granted to every checks role, since the
# environment's own configuration does not say which gateways it belongs to. EC2 DescribeRegions supports no
# resource-level permissions. The quota check's sagemaker:ListGlobalInferenceGateways is not granted: the action is
# botocore's operation name, absent from the IAM action list cfn-lint ships (W3037) and unconfirmed in the Service
# Authorization Reference, so every environment's template would carry an unconfirmed action for a check that, denied,
# WARNs with the reason instead of passing (docs/pipeline.md).
GLOBAL_CALLS: Mapping[tuple[str, str], str] = {
    ("ec2", "DescribeRegions"): "ec2:DescribeRegions",  # global-region: the member's Region is not opt-in
}
RUNNER_ACTIONS = (
    "codebuild:BatchGetProjects",  # RemoteChecks.describe: the project's S3 source bucket
    "codebuild:StartBuild",  # RemoteChecks.start
    "codebuild:BatchGetBuilds",  # RemoteChecks.follow: status, log stream, exported exit code
    "codebuild:StopBuild",  # timeout, Ctrl-C, SIGTERM
)
UPLOAD = "s3:PutObject"  # RemoteChecks.upload
READ_LOG = "logs:GetLogEvents"  # RemoteChecks.follow
WILDCARD_REASONS = {
    "ReadQuotas": "Service Quotas' list actions take no resource (Service Authorization Reference, Service Quotas)",
    "DescribeEc2": "EC2 Describe* actions support no resource-level permissions",
    "ListAddonVersions": "eks:DescribeAddonVersions takes no resource (Service Authorization Reference, Amazon EKS)",
    "ReadGlobalGateways": "ec2:DescribeRegions supports no resource-level permissions (Service Authorization "
                          "Reference, Amazon EC2)",
    "ReadEksAddons": "This cluster's add-ons; an add-on ARN ends in an id EKS assigns",
    "ReadHyperPod": "A HyperPod cluster's ARN ends in an id assigned at creation; clusters of this account and Region",
    "ListHyperPodClusters": "sagemaker:ListClusters takes no resource (Service Authorization Reference, Amazon "
                            "SageMaker AI); the quotas are account-wide, so preflight counts the other clusters",
    "ReadEndpoints": "Each configured SageMaker endpoint and its IEC generations (<name>-<six hex characters>)",
    "ReadPlatformStack": "This platform stack; a stack ARN ends in an id CloudFormation assigns",
    "ReadDeployedTemplates": "This environment's platform and endpoints stacks; a stack ARN ends in an id "
                             "CloudFormation assigns",
    "UploadSource": "Each run uploads one new zip under sources/ of the runner's own bucket; the key is new per run",
    "ReadRunnerLog": "The runner's own log group; CodeBuild names a new log stream per build",
}


def _actions(*calls: tuple[str, str]) -> list[str]:
    return sorted({a for c in calls if (a := READ_CALLS[c]) is not None})


@dataclass(frozen=True, kw_only=True)
class CheckTargets:
    """The resources the read-only checks look at: the EKS cluster, the model buckets, the SageMaker endpoints and
    the training plans (by name: the last part of their ARN). :meth:`of` derives them from a configuration.

    Args:
        eks_cluster_name: the EKS cluster. No default.
        model_buckets: the model buckets preflight lists. Default: none.
        owned_buckets: the buckets the stacks create, whose owner tag preflight reads. Default: none.
        owned_roles: the roles the stacks create, whose owner tag preflight reads. Default: none.
        sagemaker_endpoint_names: the endpoints' SageMaker endpoint names. Default: none.
        training_plans: the groups' training plan names. Default: none.
        handover_stacks: with GitOps delivery, the stacks whose deployed templates preflight reads. Default: none.
    """

    eks_cluster_name: str
    model_buckets: tuple[str, ...] = ()
    owned_buckets: tuple[str, ...] = ()  # the buckets and roles the stacks create, whose owner preflight reads
    owned_roles: tuple[str, ...] = ()
    sagemaker_endpoint_names: tuple[str, ...] = ()
    training_plans: tuple[str, ...] = ()
    handover_stacks: tuple[str, ...] = ()  # gitops: the stacks whose deployed templates preflight reads

    @classmethod
    def of(cls, config: EnvironmentConfig) -> CheckTargets:
        """What preflight, wait and status read for ``config``: its EKS cluster, every model bucket (the operator's and
        the endpoints'), each endpoint's configured SageMaker endpoint name, and the groups' training plans."""
        owned = owned_names(config)
        return cls(eks_cluster_name=config.eks.cluster_name, model_buckets=tuple(b.name for b in config.model_buckets),
                   owned_buckets=tuple(n.name for n in owned if n.kind == "S3 bucket"),
                   owned_roles=tuple(n.name for n in owned if n.kind == "IAM role"),
                   sagemaker_endpoint_names=tuple(e.sagemaker_endpoint_name for e in config.endpoints
                                                  if e.sagemaker_endpoint_name),
                   training_plans=tuple(dict.fromkeys(g.training_plan_arn.rsplit("/", 1)[-1]
                                                      for g in config.hyperpod.instance_groups if g.training_plan_arn)),
                   handover_stacks=tuple(stack_name(config, p) for p in MANIFEST_STACK_PARTS)
                   if config.delivery.gitops else ())


class ChecksRole(Construct):
    """The pipeline's checks role of one environment, with the read-only checks (see the module docstring).

    Args:
        role_name: the role's explicit name (``hpdpd-<env>-checks``). No default.
        trusted_role_arn: the one role that may assume it (the pipeline's CodeBuild role of this environment's
            checks, ``arn:<partition>:iam::<pipeline account>:role/<pipeline>-checks-<env>``). No default.
        targets: what the checks read (:class:`CheckTargets`). No default.

    Attributes: ``role`` (the ``iam.Role``), ``policy`` (its read-only policy), ``trusted_role_arn`` and ``role_arn``
    (partition-aware, built from the name: another stack may use it without an export), ``role_name``.
    """

    def __init__(self, scope: Construct, id: str, *, role_name: str, trusted_role_arn: str,
                 targets: CheckTargets) -> None:
        where = "ChecksRole"
        if not IAM_ROLE_NAME.fullmatch(role_name):
            raise ConfigError.single(None, f"{where}.role_name", role_name,
                                     "must be an IAM role name: 1-64 of letters, digits and +=,.@_-")
        trusted = TRUSTED_ROLE_ARN.fullmatch(trusted_role_arn)
        if trusted is None:
            raise ConfigError.single(None, f"{where}.trusted_role_arn", trusted_role_arn,
                                     "must be an IAM role ARN such as "
                                     "'arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev'")
        super().__init__(scope, id)
        account = trusted["account"]
        stack = cdk.Stack.of(self)
        self.role_name = role_name
        self.role_arn = f"arn:{cdk.Aws.PARTITION}:iam::{stack.account}:role/{role_name}"
        self.trusted_role_arn = f"arn:{cdk.Aws.PARTITION}:iam::{account}:role/{trusted['name']}"
        self.role = iam.Role(
            self, "Role", role_name=role_name,
            # the account as ARN, so the partition stays ${AWS::Partition} (AccountPrincipal folds it into a literal)
            assumed_by=iam.ArnPrincipal(f"arn:{cdk.Aws.PARTITION}:iam::{account}:root").with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": self.trusted_role_arn}}),
            description="hyperpod-dpd: the promotion pipeline's checks (preflight, wait, status; the checks runner)")
        statements = self._statements(targets)
        self.policy = iam.Policy(self, "Policy", statements=statements)
        self.policy.attach_to_role(self.role)
        nag.acknowledge_wildcards(self.policy, statements, WILDCARD_REASONS)

    def _statements(self, targets: CheckTargets) -> list[iam.PolicyStatement]:
        cluster = arn(self, "eks", f"cluster/{targets.eks_cluster_name}")
        statements = [
            iam.PolicyStatement(sid="ReadQuotas", resources=["*"], actions=_actions(
                ("service-quotas", "ListServiceQuotas"), ("service-quotas", "ListAWSDefaultServiceQuotas"))),
            iam.PolicyStatement(sid="DescribeEc2", resources=["*"], actions=_actions(
                ("ec2", "DescribeInstanceTypeOfferings"), ("ec2", "DescribeInstanceTypes"), ("ec2", "DescribeSubnets"),
                ("ec2", "DescribeAvailabilityZones"))),
            iam.PolicyStatement(sid="ReadEksCluster", resources=[cluster],
                                actions=_actions(("eks", "DescribeCluster"), ("eks", "ListAddons"))),
            # arn:${Partition}:eks:${Region}:${Account}:addon/${ClusterName}/${AddonName}/${UUID}
            iam.PolicyStatement(sid="ReadEksAddons", actions=_actions(("eks", "DescribeAddon")),
                                resources=[arn(self, "eks", f"addon/{targets.eks_cluster_name}/*")]),
            iam.PolicyStatement(sid="ListAddonVersions", resources=["*"],
                                actions=_actions(("eks", "DescribeAddonVersions"))),
            iam.PolicyStatement(sid="ReadGlobalGateways", resources=["*"], actions=sorted(GLOBAL_CALLS.values())),
            iam.PolicyStatement(sid="ReadHyperPod", resources=[arn(self, "sagemaker", "cluster/*")], actions=_actions(
                ("sagemaker", "DescribeCluster"), ("sagemaker", "ListClusterNodes"), ("sagemaker", "ListTags"))),
            iam.PolicyStatement(sid="ListHyperPodClusters", resources=["*"],
                                actions=_actions(("sagemaker", "ListClusters"))),
        ]
        if targets.owned_buckets:
            statements.append(iam.PolicyStatement(
                sid="ReadBucketOwners", actions=_actions(("s3", "GetBucketTagging")),
                resources=[f"arn:{cdk.Aws.PARTITION}:s3:::{b}" for b in dict.fromkeys(targets.owned_buckets)]))
        if targets.owned_roles:
            statements.append(iam.PolicyStatement(
                sid="ReadRoleOwners", actions=_actions(("iam", "ListRoleTags")),
                resources=[iam_arn(self, f"role/{r}") for r in dict.fromkeys(targets.owned_roles)]))
        if targets.model_buckets:
            statements.append(iam.PolicyStatement(
                sid="ListModelBuckets", actions=_actions(("s3", "HeadBucket"), ("s3", "ListObjectsV2")),
                resources=[f"arn:{cdk.Aws.PARTITION}:s3:::{b}" for b in dict.fromkeys(targets.model_buckets)]))
        if targets.training_plans:  # arn:${Partition}:sagemaker:${Region}:${Account}:training-plan/${Name}
            statements.append(iam.PolicyStatement(
                sid="ReadTrainingPlans", actions=sorted(PLAN_CALLS.values()),
                resources=[arn(self, "sagemaker", f"training-plan/{name}") for name in targets.training_plans]))
        if targets.handover_stacks:  # arn:${Partition}:cloudformation:${Region}:${Account}:stack/${StackName}/${Id}
            statements.append(iam.PolicyStatement(
                sid="ReadDeployedTemplates", actions=sorted(HANDOVER_CALLS.values()),
                resources=[arn(self, "cloudformation", f"stack/{name}/*") for name in targets.handover_stacks]))
        if targets.sagemaker_endpoint_names:
            statements.append(iam.PolicyStatement(
                sid="ReadEndpoints", actions=_actions(("sagemaker", "DescribeEndpoint")),
                resources=endpoint_resources(self, targets.sagemaker_endpoint_names)))
        return statements


class ChecksRoleGrants(Construct):
    """What the checks role may do with the platform's resources, from the platform's scope: start and follow the
    checks runner (``runner``), and read this platform stack's outputs (``read_outputs``: the KvFabric step reads the
    Prometheus query URL). Attached to the role by name when the role lives in another stack (no export).

    Args:
        checks_role: the checks role (:class:`ChecksRole`). No default.
        runner: the checks runner it may start and follow, or None. No default.
        read_outputs: it may read this stack's outputs (``cloudformation:DescribeStacks``). No default.

    Attributes: ``policy`` (None when there is nothing to grant).
    """

    def __init__(self, scope: Construct, id: str, *, checks_role: ChecksRole, runner: ChecksRunner | None,
                 read_outputs: bool) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        statements: list[iam.PolicyStatement] = []
        if read_outputs:
            statements.append(iam.PolicyStatement(
                sid="ReadPlatformStack", actions=_actions(("cloudformation", "DescribeStacks")),
                resources=[arn(self, "cloudformation", f"stack/{stack.stack_name}/*")]))
        if runner is not None:
            statements += [
                iam.PolicyStatement(sid="StartRunner", actions=list(RUNNER_ACTIONS),
                                    resources=[arn(self, "codebuild", f"project/{runner.project_name}")]),
                iam.PolicyStatement(sid="UploadSource", actions=[UPLOAD],
                                    resources=[runner.bucket.arn_for_objects(f"{SOURCE_PREFIX}*")]),
                iam.PolicyStatement(sid="ReadRunnerLog", actions=[READ_LOG],
                                    resources=[runner.log_group.log_group_arn]),
            ]
        self.policy: iam.Policy | None = None
        if not statements:
            return
        self.policy = iam.Policy(self, "Policy", statements=statements)
        same_stack = cdk.Stack.of(checks_role) is stack
        self.policy.attach_to_role(checks_role.role if same_stack else
                                   iam.Role.from_role_name(self, "Role", checks_role.role_name))
        self.policy.node.add_dependency(checks_role)  # another stack: a stack dependency, no export
        nag.acknowledge_wildcards(self.policy, statements, WILDCARD_REASONS)

