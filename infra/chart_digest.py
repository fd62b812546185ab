"""ChartDigestCheck: at deploy, before Helm pulls the HyperPod dependencies chart from ECR, check that its tag holds
the recorded digest in a repository whose tags cannot move (the handler: handlers/chart_digest/index.py).

Why a resource of its own: aws-cdk-lib's Helm handler (2.275.0, custom-resource-handlers/dist/aws-eks-v2/
kubectl-handler/helm/__init__.py) pulls an OCI chart with ``helm pull <Repository> --version <Version> --untar`` and
installs the directory named after the last path element of ``Repository``. With a digest in the reference
(``<chart>@sha256:...``) Helm 3.17 and 4.1 (the kubectl layers' helm) pull by digest, but untar into ``<chart>/`` and
leave ``<chart>@sha256:...`` empty, which the handler then installs; ``--version 0.1.0@sha256:...`` is "improper
constraint" (tests/infra/test_chart_digest.py runs both against a loopback registry). So Helm pulls by tag, and this
check, which the Helm chart depends on, runs first on every create and every update of the chart.

The residual gap is the time between the check and the pull (seconds, in one deployment): in an ``IMMUTABLE``
repository the tag can then change only by deleting the image and pushing another, which needs ECR delete and push
rights on the mirror.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_dpd.catalogue.versions import HYPERPOD_CHART_COMMIT
from hyperpod_dpd.config.dependencies_chart import EcrChart
from hyperpod_dpd.infra import checkov

HANDLER_DIR = Path(__file__).parent / "handlers" / "chart_digest"
RESOURCE_TYPE = "Custom::HyperPodChartDigest"
# ECR actions of the check; both take the repository as their resource (Service Authorization Reference, Amazon ECR:
# DescribeImages and DescribeRepositories, resource type "repository").
ACTIONS = ("ecr:DescribeRepositories", "ecr:DescribeImages")
RUNTIME = lambda_.Runtime.PYTHON_3_14  # the newest Python runtime aws-cdk-lib 2.275 knows (cdk-nag AwsSolutions-L1)
HANDLER_TIMEOUT = cdk.Duration.seconds(60)
# CloudFormation's wait for the function's answer (ServiceTimeout, 1-3600 s): the function answers within its
# 60 s timeout; a function that never answers (killed before its PUT) fails the deploy after five minutes.
SERVICE_TIMEOUT = cdk.Duration.minutes(5)

FUNCTION_SKIPS = {
    "CKV_AWS_115": "deployment-time check invoked by CloudFormation only; reserved concurrency would only add a failure "
                   "mode in accounts with a low concurrency quota",
    "CKV_AWS_116": "invoked by CloudFormation, which it answers itself, failures included; a dead-letter queue would "
                   "never receive anything",
    "CKV_AWS_117": "calls only AWS APIs (ECR DescribeRepositories and DescribeImages, the CloudFormation response URL); "
                   "nothing in the VPC",
}
LOG_GROUP_SKIPS = {
    "CKV_AWS_158": "logs of a deployment-time check: request events and ECR digests only, no model or request data; "
                   "encrypted at rest by CloudWatch Logs",
}


def chart_fingerprint(properties: Mapping[str, Any]) -> str:
    """A digest of the Helm chart's properties: a property of the check, so any change to the chart (values, version,
    repository) is an update of the check too and the check runs again before Helm does."""
    return hashlib.sha256(json.dumps(properties, sort_keys=True, default=str).encode()).hexdigest()


class ChartDigestCheck(Construct):
    """Fails the deployment unless ECR holds ``digest`` under ``tag`` in ``chart``'s repository and its tags are
    immutable. Make the Helm chart depend on ``resource``.

    Args:
        chart: the chart's ECR repository (``hyperpod_dpd.config.dependencies_chart.ecr_chart``). No default.
        tag: the chart version, its tag in ECR. No default.
        digest: the expected ``sha256:<64 hex>`` manifest digest. No default.
        chart_properties: the Helm chart's properties; a change re-runs the check on update. No default.
        removal_policy: of the handler's log group. Default: DESTROY.
        log_retention: of the handler's log group. Default: one year.
    """

    def __init__(self, scope: Construct, id: str, *, chart: EcrChart, tag: str, digest: str,
                 chart_properties: Mapping[str, Any], removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        role = iam.Role(self, "HandlerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"Checks the digest of {chart.repository_name}:{tag} before Helm installs it")
        self.log_group.grant_write(role)
        repository_arn = cdk.Arn.format(cdk.ArnComponents(
            partition=cdk.Aws.PARTITION, service="ecr", region=chart.region, account=chart.account,
            resource="repository", resource_name=chart.repository_name))
        self.read_policy = iam.Policy(self, "ReadRepositoryPolicy", statements=[iam.PolicyStatement(
            sid="DescribeTheChartRepository", actions=list(ACTIONS), resources=[repository_arn])])
        self.read_policy.attach_to_role(role)
        self.function = lambda_.Function(
            self, "Function", runtime=RUNTIME, handler="index.handler", role=role, timeout=HANDLER_TIMEOUT,
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            log_group=self.log_group, memory_size=256,
            description=f"{RESOURCE_TYPE}: {chart.repository_name}:{tag} is {digest}")
        self.function.node.add_dependency(self.read_policy)
        # Read by the handler (handlers/chart_digest/index.py, PROPERTIES); the commit and the fingerprint only make
        # any change an update that checks again.
        self.properties: Mapping[str, str] = {
            "RegistryId": chart.account, "Region": chart.region, "RepositoryName": chart.repository_name, "Tag": tag,
            "Digest": digest, "SourceCommit": HYPERPOD_CHART_COMMIT, "ChartFingerprint": chart_fingerprint(chart_properties)}
        self.resource = cdk.CustomResource(
            self, "Resource", service_token=self.function.function_arn, resource_type=RESOURCE_TYPE,
            service_timeout=SERVICE_TIMEOUT, removal_policy=cdk.RemovalPolicy.DESTROY, properties=dict(self.properties))
        for construct, skips in ((self.function, FUNCTION_SKIPS), (self.log_group, LOG_GROUP_SKIPS)):
            resource = construct.node.default_child
            assert isinstance(resource, cdk.CfnResource), construct.node.path
            checkov.skip_all(resource, skips)
