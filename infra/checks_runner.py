"""ChecksRunner: a CodeBuild project inside an environment's VPC that runs the promotion pipeline's cluster checks.

The pipeline's steps run in CodeBuild in the pipeline account, outside every VPC, while a private EKS API endpoint "can
only receive requests from within the cluster VPC" (EKS API reference, ``VpcConfigRequest.endpointPublicAccess``). So
the steps only trigger (``hpdpd checks run``, hyperpod_dpd/ops/remote_checks.py): the check command runs here, in the
environment's private subnets, as the runner's role, which holds the cluster access.

* **Project** ``hpdpd-<env>-checks`` (explicit name, :data:`hyperpod_dpd.config.environment.CHECKS_PROJECT_NAME`) on
  the pipeline's image and runtimes (infra/build_environment.py), in the EKS subnets (private, with a route to NAT: a
  build needs the Kubernetes API on 443, the STS, EKS, S3, AMP and SageMaker runtime endpoints, and PyPI and npm for
  ``make setup``), with a security group of its own that the cluster security group admits on TCP 443. A VPC project
  runs in private subnets and reaches the internet only through a NAT gateway (CodeBuild user guide, "Use CodeBuild
  with Amazon Virtual Private Cloud", best practices).
* **Buildspec** in the project, never from the uploaded checkout: ``make setup``, then ``hpdpd checks exec``, which runs
  the one command of ``HPDPD_ARGS`` and refuses anything but a check command of this environment (in Python,
  hyperpod_dpd/cli/checks.py). The command's exit code is exported (buildspec ``env: exported-variables``, read back through
  ``BatchGetBuilds`` ``exportedEnvironmentVariables``); the build itself succeeds whenever the command ran.
* **Source**: a bucket of its own (TLS-only, encrypted, public access blocked, access-logged); each run uploads one zip
  under ``sources/``, and objects expire after :data:`SOURCE_EXPIRATION_DAYS` days.
* **Runner role** ``hpdpd-<env>-checks-runner`` (CodeBuild's service role; an operations role with the access entry):
  exactly the statements below, written here; CDK adds nothing to it (the project gets it without policy updates).
  CodeBuild may assume it for this one project of this account only (infra/source_conditions.py, ``codebuild``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_dpd.catalogue.pipeline_contract import (
    DEFAULT_SOURCE_KEY,
    ENVIRONMENT_VARIABLE,
    EXIT_CODE_VARIABLE,
    SOURCE_PREFIX,
)
from hyperpod_dpd.config.endpoint_checks import GENERATION_LENGTH
from hyperpod_dpd.config.environment import CODEBUILD_PROJECT_NAME, IAM_ROLE_NAME
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import checkov, nag, source_conditions
from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.buckets import secure_bucket
from hyperpod_dpd.infra.build_environment import BUILD_IMAGE, HPDPD, RUNTIMES, SETUP

# The actions of the check commands, each with the call that needs it.
EKS_AUTHENTICATION = "eks:DescribeCluster"  # hyperpod_dpd/ops/eks_auth.py: endpoint and CA; the token is a presigned
# sts:GetCallerIdentity, which needs no permission
QUERY_METRICS = "aps:QueryMetrics"  # verify's Prometheus queries (hyperpod_dpd/ops/metrics.py AMP_PERMISSION)
INVOKE_STREAM = "sagemaker:InvokeEndpointWithResponseStream"  # smoke through SageMaker (hyperpod_dpd/ops/smoke.py)
# SageMaker authorizes invocations against the endpoint's ARN with the name in lower case, whatever its case in
# CreateEndpoint (an AccessDenied for endpoint "...--LaBSE" names resource "endpoint/endpoint-setu4993--labse":
# philschmid/cdk-samples issue #2; prometheus-community/yet-another-cloudwatch-exporter PR #1178, "Resource ARN is
# only in lower case").
SAGEMAKER_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # EndpointName (SageMaker API reference)
# What CodeBuild itself does as the service role of a VPC project: the network interface of each build (CodeBuild
# user guide, "Allow CodeBuild to interact with other AWS services", the VPC statements of the service-role policy;
# CodeBuild authorizes CreateNetworkInterfacePermission with the ec2:Subnet and ec2:AuthorizedService conditions).
# The guide grants them all on "*"; only the describe calls take no resource type (Service Authorization Reference,
# Amazon EC2: CreateNetworkInterface takes "network-interface", "subnet" and "security-group", DeleteNetworkInterface
# "network-interface", whose ec2:Subnet condition key is the interface's subnet), so the other two are scoped to the
# runner's subnets and security group.
VPC_DESCRIBE_ACTIONS = ("ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
                        "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs")
CREATE_INTERFACE = "ec2:CreateNetworkInterface"
DELETE_INTERFACE = "ec2:DeleteNetworkInterface"
# Reading an S3 source: the object, and the bucket's identity (the service-role policy's S3 statements, same page).
SOURCE_OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
SOURCE_BUCKET_ACTIONS = ("s3:GetBucketAcl", "s3:GetBucketLocation")
WRITE_LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
# The project's encryption key, as aws-cdk-lib grants it to a project's role (Project encryptionKey).
KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*")
API_SERVER_PORT = 443
SOURCE_EXPIRATION_DAYS = 3
LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
BUILD_TIMEOUT = cdk.Duration.hours(8)  # a ceiling; each run sets its own (StartBuild timeoutInMinutesOverride)

WILDCARD_REASONS = {
    "ReadSource": "The runner reads the one zip each run uploads under sources/ of its own bucket; the key is new per run",
    "WriteLogs": "The runner writes its build's log stream in its own log group; CodeBuild names each stream per build",
    "UseKey": "The project's own key, as aws-cdk-lib grants it to a CodeBuild project's role (ReEncrypt* and "
              "GenerateDataKey* are action families of that one key)",
    "BuildNetwork": "CodeBuild's describe calls for the build's network interface take no resource type (Service "
                    "Authorization Reference, Amazon EC2)",
    "BuildInterfaces": "CodeBuild creates one network interface per build, in the runner's subnets and security group; "
                       "its id is not known before the build",
    "DeleteBuildInterfaces": "Limited by the ec2:Subnet condition to interfaces in the runner's subnets; their ids are "
                             "not known before the build",
    "BuildNetworkPermission": "Scoped by the ec2:Subnet and ec2:AuthorizedService conditions to CodeBuild's interfaces "
                              "in the runner's subnets; the interfaces do not exist before the build",
}


def endpoint_resources(scope: Construct, names: Sequence[str]) -> list[str]:
    """The endpoint ARNs smoke may invoke for each configured SageMaker endpoint name: the name itself, and the name
    of each IEC generation, ``<name>-<generation>`` (a generation is GENERATION_LENGTH hex characters; one ``?``
    matches exactly one character in IAM ARN matching, so no other endpoint is covered)."""
    resources = []
    for name in dict.fromkeys(n.lower() for n in names):
        resources += [arn(scope, "sagemaker", f"endpoint/{name}"),
                      arn(scope, "sagemaker", f"endpoint/{name}-{'?' * GENERATION_LENGTH}")]
    return resources


# This repository's checkout sets itself up with its Makefile's ``setup`` target; the checkout of another app that uses
# hyperpod-dpd as a library (docs/library.md) has no such target, so it gets ``.venv/`` from its own requirements.txt,
# which installs hyperpod-dpd and with it ``.venv/bin/hpdpd``, hash-locked like every install of the pipeline (pip's
# --require-hashes refuses a requirement without a pinned version and hash). ``make -n`` (GNU make, --just-print) runs nothing: it
# only fails when the target does not exist.
CHECKS_SETUP = (f"if make -n setup >/dev/null 2>&1; then {SETUP}; "
                "else python -m venv .venv && .venv/bin/pip install --require-hashes -r requirements.txt; fi")


def buildspec() -> dict[str, Any]:
    """Set up the checkout, then run the one check command; its exit code is exported, the build succeeds."""
    run = (f"export {EXIT_CODE_VARIABLE}=0; {HPDPD} checks exec || export {EXIT_CODE_VARIABLE}=$?")
    return {
        "version": "0.2",
        "env": {"exported-variables": [EXIT_CODE_VARIABLE]},
        "phases": {
            "install": {"runtime-versions": dict(RUNTIMES), "commands": [CHECKS_SETUP]},
            "build": {"commands": [run]},
        },
    }


class ChecksRunner(Construct):
    """The checks runner of one environment (see the module docstring).

    Args:
        project_name: ``hpdpd-<env>-checks``. No default.
        role_name: ``hpdpd-<env>-checks-runner``. No default.
        environment_name: the environment the runner checks (``hpdpd checks exec`` refuses any other ``--env``).
            No default.
        vpc, subnets: the environment's VPC and its private subnets with a route to NAT (the EKS subnets). No default.
        cluster_security_group_id: the EKS cluster security group (created: ``cluster.cluster_security_group_id``;
            adopted: ``eks.existing.cluster_security_group_id``), which gets an ingress rule from the runner on 443.
            No default.
        eks_cluster_name: the cluster the checks authenticate to. No default.
        prometheus_workspace_arn: the observability workspace verify queries. Default: None (no query grant).
        sagemaker_endpoint_names: the endpoints' configured SageMaker endpoint names, which smoke invokes. Default:
            none.
        removal_policy: of the bucket, the log group and the key. No default (a decision, not an accident).
        access_logs: the bucket that receives the source bucket's server access logs. Default: none.

    Attributes: ``project``, ``role``, ``policy``, ``security_group``, ``api_ingress`` (the rule on the cluster
    security group), ``bucket``, ``log_group``, ``key``, ``project_name``.
    """

    def __init__(self, scope: Construct, id: str, *, project_name: str, role_name: str, environment_name: str,
                 vpc: ec2.IVpc, subnets: Sequence[ec2.ISubnet], cluster_security_group_id: str,
                 eks_cluster_name: str, prometheus_workspace_arn: str | None = None,
                 sagemaker_endpoint_names: Sequence[str] = (), removal_policy: cdk.RemovalPolicy,
                 access_logs: s3.IBucket | None = None) -> None:
        where = "ChecksRunner"
        problems: list[tuple[str, Any, str] | None] = [
            (f"{where}.project_name", project_name, "must be a CodeBuild project name: a letter or digit, then 1-254 "
             "letters, digits, - and _") if not CODEBUILD_PROJECT_NAME.fullmatch(project_name) else None,
            (f"{where}.role_name", role_name, "must be an IAM role name: 1-64 of letters, digits and +=,.@_-")
            if not IAM_ROLE_NAME.fullmatch(role_name) else None,
            (f"{where}.subnets", [], "is required: the private subnets (with a route to NAT) the builds run in")
            if not subnets else None,
            next(((f"{where}.sagemaker_endpoint_names", n, "must be a SageMaker endpoint name (1-63 letters, digits "
                   "and hyphens)") for n in sagemaker_endpoint_names if not SAGEMAKER_NAME.fullmatch(n)), None),
        ]
        first = next((p for p in problems if p is not None), None)
        if first is not None:
            raise ConfigError.single(None, *first)
        super().__init__(scope, id)
        self.project_name = project_name
        self.key = kms.Key(self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
                           description=f"hyperpod-dpd: the checks runner {project_name} (project and build logs)")
        log_group_name = f"/aws/codebuild/{project_name}"
        self._allow_logs(log_group_name)
        self.log_group = logs.LogGroup(self, "Logs", log_group_name=log_group_name, retention=LOG_RETENTION,
                                       encryption_key=self.key, removal_policy=removal_policy)
        self.bucket = self._source_bucket(removal_policy, access_logs)
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=vpc, allow_all_outbound=True,
            description=f"hyperpod-dpd checks runner {project_name}: egress to the API server, AWS APIs, PyPI and npm")
        self.api_ingress = ec2.CfnSecurityGroupIngress(
            self, "ApiServerIngress", group_id=cluster_security_group_id, ip_protocol="tcp",
            from_port=API_SERVER_PORT, to_port=API_SERVER_PORT,
            source_security_group_id=self.security_group.security_group_id,
            description=f"Kubernetes API from the checks runner {project_name}")
        self.role = iam.Role(self, "Role", role_name=role_name, description=f"hyperpod-dpd: the checks runner of "
                             f"{eks_cluster_name} (verify, smoke, rollout)", assumed_by=source_conditions.service_principal(
                                 "codebuild.amazonaws.com", source_conditions.codebuild(self, project_name)))
        statements = self._statements(eks_cluster_name, prometheus_workspace_arn, sagemaker_endpoint_names, subnets)
        self.policy = iam.Policy(self, "Policy", statements=statements)
        self.policy.attach_to_role(self.role)
        nag.acknowledge_wildcards(self.policy, statements, WILDCARD_REASONS)
        self.project = codebuild.Project(
            self, "Project", project_name=project_name, role=self.role.without_policy_updates(),
            source=codebuild.Source.s3(bucket=self.bucket, path=DEFAULT_SOURCE_KEY),
            build_spec=codebuild.BuildSpec.from_object(buildspec()),
            environment=codebuild.BuildEnvironment(
                build_image=BUILD_IMAGE, compute_type=codebuild.ComputeType.SMALL,
                environment_variables={ENVIRONMENT_VARIABLE: codebuild.BuildEnvironmentVariable(value=environment_name)}),
            encryption_key=self.key, timeout=BUILD_TIMEOUT,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.log_group)),
            description=f"hyperpod-dpd: runs the pipeline's cluster checks of {environment_name} inside its VPC")
        # The VPC on the L1: given to the L2, aws-cdk-lib would write a second, unscoped policy of its own for the
        # network interfaces (the statements above are those, scoped to the runner's subnets).
        cfn = self.project.node.default_child
        cfn.vpc_config = codebuild.CfnProject.VpcConfigProperty(  # type: ignore[union-attr]
            vpc_id=vpc.vpc_id, subnets=[subnet.subnet_id for subnet in subnets],
            security_group_ids=[self.security_group.security_group_id])
        self.project.node.add_dependency(self.policy)  # the first build needs the role's permissions

    def _allow_logs(self, log_group_name: str) -> None:
        """CloudWatch Logs encrypts the log group with the key: the key policy admits the Region's logs service for
        that group only (CloudWatch Logs user guide, "Encrypt log data in CloudWatch Logs using AWS KMS")."""
        stack = cdk.Stack.of(self)
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchLogsUse", principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],  # a key policy's resource is the key itself
            conditions={"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": arn(self, "logs", f"log-group:{log_group_name}")}}))

    def _source_bucket(self, removal_policy: cdk.RemovalPolicy, access_logs: s3.IBucket | None) -> s3.Bucket:
        bucket = secure_bucket(self, "Source", bucket_name=None, removal_policy=removal_policy,
                               access_logs=access_logs, versioned=False)
        bucket.add_lifecycle_rule(id="ExpireRuns", prefix=SOURCE_PREFIX,
                                  expiration=cdk.Duration.days(SOURCE_EXPIRATION_DAYS),
                                  abort_incomplete_multipart_upload_after=cdk.Duration.days(1))
        checkov.skip(bucket.node.default_child, "CKV_AWS_21",  # type: ignore[arg-type]
                     f"Each run uploads a new object that expires after {SOURCE_EXPIRATION_DAYS} days; versions "
                     "would only keep checkouts longer")
        return bucket

    def _statements(self, eks_cluster_name: str, workspace_arn: str | None, endpoint_names: Sequence[str],
                    subnets: Sequence[ec2.ISubnet]) -> list[iam.PolicyStatement]:
        interfaces = arn(self, "ec2", "network-interface/*")
        subnet_arns = [arn(self, "ec2", f"subnet/{subnet.subnet_id}") for subnet in subnets]
        statements = [
            iam.PolicyStatement(sid="EksAuthentication", actions=[EKS_AUTHENTICATION],
                                resources=[arn(self, "eks", f"cluster/{eks_cluster_name}")]),
            iam.PolicyStatement(sid="ReadSource", actions=list(SOURCE_OBJECT_ACTIONS),
                                resources=[self.bucket.arn_for_objects(f"{SOURCE_PREFIX}*")]),
            iam.PolicyStatement(sid="SourceBucket", actions=list(SOURCE_BUCKET_ACTIONS), resources=[self.bucket.bucket_arn]),
            iam.PolicyStatement(sid="WriteLogs", actions=list(WRITE_LOG_ACTIONS), resources=[self.log_group.log_group_arn]),
            iam.PolicyStatement(sid="UseKey", actions=list(KEY_ACTIONS), resources=[self.key.key_arn]),
            iam.PolicyStatement(sid="BuildNetwork", actions=list(VPC_DESCRIBE_ACTIONS), resources=["*"]),
            iam.PolicyStatement(sid="BuildInterfaces", actions=[CREATE_INTERFACE], resources=[
                interfaces, *subnet_arns, arn(self, "ec2", f"security-group/{self.security_group.security_group_id}")]),
            iam.PolicyStatement(sid="DeleteBuildInterfaces", actions=[DELETE_INTERFACE], resources=[interfaces],
                                conditions={"StringEquals": {"ec2:Subnet": subnet_arns}}),
            iam.PolicyStatement(
                sid="BuildNetworkPermission", actions=["ec2:CreateNetworkInterfacePermission"],
                resources=[interfaces],
                conditions={"StringEquals": {
                    "ec2:Subnet": subnet_arns, "ec2:AuthorizedService": "codebuild.amazonaws.com"}}),
        ]
        if workspace_arn is not None:
            statements.append(iam.PolicyStatement(sid="QueryMetrics", actions=[QUERY_METRICS], resources=[workspace_arn]))
        if endpoint_names:
            statements.append(iam.PolicyStatement(sid="InvokeEndpoints", actions=[INVOKE_STREAM],
                                                  resources=endpoint_resources(self, endpoint_names)))
        return statements
