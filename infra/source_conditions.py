"""Confused-deputy conditions on the service-principal trusts the toolkit writes, one builder per service, each next
to the page that documents it; and the two ways to apply them.

* :func:`service_principal` for a role the toolkit creates: the principal with its conditions.
* :func:`bind_trust` for a role aws-cdk-lib creates (the EKS cluster role, the flow-log role, CDK Pipelines' roles):
  the conditions added to that role's existing trust statement in place, so the role keeps its logical id (a new
  role would replace the EKS cluster, whose ``RoleArn`` cannot change in place).
* :func:`mark_unbound` for a trust a service documents no condition for: the resource names its exemption of
  :data:`~hyperpod_dpd.infra.guardrails.rules.trust.UNBOUND`, which says why (the HPDPD-IAM3 rule checks it).

Every value is partition-aware (``${AWS::Partition}`` through :func:`~hyperpod_dpd.infra.arns.arn`) and names the
stack's own account: a service acts for this account's resources only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.guardrails.rules.base import as_list
from hyperpod_dpd.infra.guardrails.rules.trust import METADATA_KEY, UNBOUND

Conditions = Mapping[str, Mapping[str, Any]]


def _account(scope: IConstruct) -> Conditions:
    return {"StringEquals": {"aws:SourceAccount": cdk.Stack.of(scope).account}}


def flow_logs(scope: IConstruct) -> Conditions:
    """The role VPC flow logs assume to publish to CloudWatch Logs: the owner account and its flow logs ("We recommend
    that you use the aws:SourceAccount and aws:SourceArn condition keys ... The source account is the owner of the flow
    log and the source ARN is the flow log ARN", ``arn:aws:ec2:region:account_id:vpc-flow-log/flow-log-id``; the id is
    unknown before the flow log exists, so a wildcard: VPC user guide, "IAM role for publishing flow logs to
    CloudWatch Logs")."""
    return {**_account(scope), "ArnLike": {"aws:SourceArn": arn(scope, "ec2", "vpc-flow-log/*")}}


def eks_cluster(scope: IConstruct, cluster_name: str) -> Conditions:
    """The EKS cluster role: "The value of aws:SourceArn must be the ARN of an EKS cluster", with aws:SourceAccount
    (EKS user guide, "Cross-service confused deputy prevention in Amazon EKS", "Amazon EKS cluster role",
    awsdocs/amazon-eks-user-guide latest/ug/security/cross-service-confused-deputy-prevention.adoc @5534e8cc)."""
    return {**_account(scope), "ArnLike": {"aws:SourceArn": arn(scope, "eks", f"cluster/{cluster_name}")}}


def codebuild(scope: IConstruct, project: str = "*") -> Conditions:
    """A CodeBuild service role: its project(s) in this account and Region (CodeBuild user guide, "Allow CodeBuild to
    interact with other AWS services": aws:SourceAccount is the project's owner, aws:SourceArn the project ARN; cited
    with that page by aws-solutions/aws-control-tower-customizations issue #226 [? the page itself was not read
    here]). ``project``: the project's name, or ``*`` when CDK names the project (its ARN is not known to the role
    without a circular reference)."""
    return {**_account(scope), "ArnLike": {"aws:SourceArn": arn(scope, "codebuild", f"project/{project}")}}


def sagemaker(scope: IConstruct) -> Conditions:
    """A role SageMaker assumes for the inference operator: SageMaker resources of this account and Region, the
    condition the operator's own published trust uses (aws/sagemaker-hyperpod-cli
    helm_chart/HyperPodHelmChart/charts/inference-operator/config/policy/execution_role_trust_relationship_beta.json
    @0139e198: ``ArnLike aws:SourceArn arn:aws:sagemaker:<REGION>:<Account_ID>:*``; SageMaker developer guide,
    "Cross-service confused deputy prevention": the account in aws:SourceArn binds the use to this account)."""
    return {"ArnLike": {"aws:SourceArn": arn(scope, "sagemaker", "*")}}


def step_functions(scope: IConstruct) -> Conditions:
    """A state machine's role: state machines of this account and Region (Step Functions developer guide, "Creating
    an IAM role for your state machine", cross-service confused deputy prevention: aws:SourceArn
    ``arn:aws:states:region:account:stateMachine:*`` with aws:SourceAccount; the roles the Step Functions console
    creates carry exactly these [? the page itself was not read here])."""
    return {**_account(scope), "ArnLike": {"aws:SourceArn": arn(scope, "states", "stateMachine:*")}}


def service_principal(service: str, conditions: Conditions) -> iam.ServicePrincipal:
    """``service`` as a principal that holds only with ``conditions``."""
    return iam.ServicePrincipal(service, conditions={k: dict(v) for k, v in conditions.items()})


def bind_trust(role: iam.IRole, service: str, conditions: Conditions) -> None:
    """Add ``conditions`` to the trust statement of ``role`` (created by aws-cdk-lib) that admits ``service`` alone.

    The statement keeps its index and its other conditions; the role keeps its logical id. ``ValueError`` when the
    role has no such statement (aws-cdk-lib changed how it builds the role: look before binding anything else)."""
    cfn = cast(iam.CfnRole, role.node.default_child)
    document = cdk.Stack.of(role).resolve(cfn.assume_role_policy_document) or {}
    for index, statement in enumerate(as_list(document.get("Statement"))):
        principal = statement.get("Principal")
        if isinstance(principal, dict) and as_list(principal.get("Service")) == [service]:
            merged = {op: dict(keys) for op, keys in (statement.get("Condition") or {}).items()}
            for op, keys in conditions.items():
                merged[op] = {**merged.get(op, {}), **keys}
            cfn.add_property_override(f"AssumeRolePolicyDocument.Statement.{index}.Condition", merged)
            return
    raise ValueError(f"{role.node.path} has no trust statement that admits {service} alone")


def mark_unbound(construct: IConstruct, exemption: str) -> None:
    """Record on the CloudFormation resource of ``construct`` that it admits its principal under ``exemption`` (an id
    of :data:`~hyperpod_dpd.infra.guardrails.rules.trust.UNBOUND`, which holds the reason and the source)."""
    if exemption not in UNBOUND:
        raise KeyError(f"unknown exemption {exemption!r}; documented: {', '.join(sorted(UNBOUND))}")
    resource = cast(cdk.CfnResource, construct.node.default_child if not isinstance(construct, cdk.CfnResource)
                    else construct)
    marked = [str(m) for m in as_list(resource.get_metadata(METADATA_KEY))]
    resource.add_metadata(METADATA_KEY, sorted({*marked, exemption}))
