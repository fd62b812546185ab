"""ChecksRole: the role the promotion pipeline's check steps run as inside one environment, so no one makes it by hand.

The pipeline's ``Rollout``, ``Smoke`` and ``KvFabric`` steps (stacks/pipeline_stack.py) run in CodeBuild in the
pipeline account and assume this role in the environment's account. It is created by the environment's platform
stack, which every stage deploys before its endpoints stack (and so before ``Rollout``, a step of that stack), and it
is one of the operations roles: an EKS access entry in the ``hyperpod-dpd-operations`` group with the RBAC of
infra/operations_access.py.

* **Name**: explicit (``hpdpd-<env>-checks``, :data:`hyperpod_dpd.config.environment.CHECKS_ROLE_NAME`), so the
  pipeline account can name it before it exists.
* **Trust**: one role ARN, the pipeline's CodeBuild role of this environment's checks. The trust policy names the
  pipeline *account* as principal with an ``aws:PrincipalArn`` condition on that role: IAM refuses a trust policy whose
  principal is a role that does not exist yet, and turns a role principal into the role's unique id, so a recreated
  pipeline role would lose the trust; the condition key holds "the ARN of the role, not the ARN of the user that
  assumed the role" for role sessions (IAM User Guide, "AWS global condition context keys", ``aws:PrincipalArn``).
* **Permissions**: exactly the AWS calls the check steps make as this role (hpdpd/ops): ``eks:DescribeCluster`` on the
  cluster (EKS authentication, hpdpd/ops/eks_auth.py; the bearer token is a presigned ``sts:GetCallerIdentity``, which
  needs no permission), ``aps:QueryMetrics`` on the observability workspace (verify's Prometheus queries,
  hpdpd/ops/metrics.py ``AMP_PERMISSION``), and ``sagemaker:InvokeEndpointWithResponseStream`` on the endpoints that
  have a SageMaker endpoint name (smoke through SageMaker, hpdpd/ops/smoke.py ``sagemaker_sender``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_dpd.config.endpoint_checks import GENERATION_LENGTH
from hyperpod_dpd.config.environment import IAM_ROLE_NAME, TRUSTED_ROLE_ARN
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.arns import arn

# The actions, each with the call that needs it (see the module docstring).
EKS_AUTHENTICATION = "eks:DescribeCluster"
QUERY_METRICS = "aps:QueryMetrics"
INVOKE_STREAM = "sagemaker:InvokeEndpointWithResponseStream"
# SageMaker authorizes invocations against the endpoint's ARN with the name in lower case, whatever its case in
# CreateEndpoint (an AccessDenied for endpoint "...--LaBSE" names resource "endpoint/endpoint-setu4993--labse":
# philschmid/cdk-samples issue #2; prometheus-community/yet-another-cloudwatch-exporter PR #1178, "Resource ARN is
# only in lower case").
SAGEMAKER_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # EndpointName (SageMaker API reference)


def endpoint_resources(scope: Construct, names: Sequence[str]) -> list[str]:
    """The endpoint ARNs smoke may invoke for each configured SageMaker endpoint name: the name itself, and the name
    of each IEC generation, ``<name>-<generation>`` (a generation is GENERATION_LENGTH hex characters; one ``?``
    matches exactly one character in IAM ARN matching, so no other endpoint is covered)."""
    resources = []
    for name in dict.fromkeys(n.lower() for n in names):
        resources += [arn(scope, "sagemaker", f"endpoint/{name}"),
                      arn(scope, "sagemaker", f"endpoint/{name}-{'?' * GENERATION_LENGTH}")]
    return resources


class ChecksRole(Construct):
    """The pipeline's checks role of one environment (see the module docstring).

    Args:
        role_name: the role's explicit name (``hpdpd-<env>-checks``).
        trusted_role_arn: the one role that may assume it (the pipeline's CodeBuild role of this environment's
            checks, ``arn:<partition>:iam::<pipeline account>:role/<pipeline>-checks-<env>``).
        eks_cluster_name: the EKS cluster the steps authenticate to.
        prometheus_workspace_arn: the observability add-on's workspace, which verify queries; None without it.
        sagemaker_endpoint_names: the endpoints' configured SageMaker endpoint names, which smoke invokes.

    Attributes: ``role`` (the ``iam.Role``), ``policy`` (its one inline policy), ``trusted_role_arn`` (partition-aware).
    """

    def __init__(self, scope: Construct, id: str, *, role_name: str, trusted_role_arn: str, eks_cluster_name: str,
                 prometheus_workspace_arn: str | None = None, sagemaker_endpoint_names: Sequence[str] = ()) -> None:
        where = "ChecksRole"
        if not IAM_ROLE_NAME.fullmatch(role_name):
            raise ConfigError.single(None, f"{where}.role_name", role_name,
                                     "must be an IAM role name: 1-64 of letters, digits and +=,.@_-")
        trusted = TRUSTED_ROLE_ARN.fullmatch(trusted_role_arn)
        if trusted is None:
            raise ConfigError.single(None, f"{where}.trusted_role_arn", trusted_role_arn,
                                     "must be an IAM role ARN such as "
                                     "'arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev'")
        bad = [n for n in sagemaker_endpoint_names if not SAGEMAKER_NAME.fullmatch(n)]
        if bad:
            raise ConfigError.single(None, f"{where}.sagemaker_endpoint_names", bad[0],
                                     "must be a SageMaker endpoint name (1-63 letters, digits and hyphens)")
        super().__init__(scope, id)
        account = trusted["account"]
        self.trusted_role_arn = f"arn:{cdk.Aws.PARTITION}:iam::{account}:role/{trusted['name']}"
        self.role = iam.Role(
            self, "Role", role_name=role_name,
            # the account as ARN, so the partition stays ${AWS::Partition} (AccountPrincipal folds it into a literal)
            assumed_by=iam.ArnPrincipal(f"arn:{cdk.Aws.PARTITION}:iam::{account}:root").with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": self.trusted_role_arn}}),
            description=f"hyperpod-dpd: the promotion pipeline's checks of {eks_cluster_name} (verify, smoke, rollout)")
        statements = [iam.PolicyStatement(sid="EksAuthentication", actions=[EKS_AUTHENTICATION],
                                          resources=[arn(self, "eks", f"cluster/{eks_cluster_name}")])]
        if prometheus_workspace_arn is not None:
            statements.append(iam.PolicyStatement(sid="QueryMetrics", actions=[QUERY_METRICS],
                                                  resources=[prometheus_workspace_arn]))
        if sagemaker_endpoint_names:
            statements.append(iam.PolicyStatement(sid="InvokeEndpoints", actions=[INVOKE_STREAM],
                                                  resources=endpoint_resources(self, sagemaker_endpoint_names)))
        self.policy = iam.Policy(self, "Policy", statements=statements)
        self.policy.attach_to_role(self.role)
