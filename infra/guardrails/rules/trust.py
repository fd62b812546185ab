"""Confused-deputy rule: every statement that admits an AWS service principal names the source it acts for.

A service principal in a trust policy or a resource policy can act for *any* account's resources unless a condition
binds it to this account's: ``aws:SourceArn``, ``aws:SourceAccount`` (or ``aws:SourceOrgID``/``aws:SourceOrgPaths``)
with a value that is not a bare wildcard (IAM User Guide, "The confused deputy problem" and "AWS global condition
context keys"). Some services document a binding key of their own instead (below). Where a service documents none for
a use, or documents a trust without one, the statement is exempt only through an entry of :data:`UNBOUND` with its
reason and source: for every use of the principal (``everywhere``), or for the resources that carry the entry's id
in their ``Metadata`` under :data:`METADATA_KEY` (:func:`hyperpod_dpd.infra.source_conditions.mark_unbound`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings, as_list
from hyperpod_dpd.infra.guardrails.templates import Resource, StageTemplates

RULE_ID = "HPDPD-IAM3"
METADATA_KEY = "hpdpd:unbound-principals"
SOURCE_KEYS = frozenset({"aws:sourcearn", "aws:sourceaccount", "aws:sourceorgid", "aws:sourceorgpaths"})
# Service-specific keys that bind a use to this account's resources as the global ones do.
BINDING_KEYS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    # CloudWatch Logs encrypts a log group with a KMS key under the encryption context aws:logs:arn, the log group's
    # ARN (which names the account); the documented key policy conditions on it (CloudWatch Logs user guide, "Encrypt
    # log data in CloudWatch Logs using AWS KMS", step 2).
    (re.compile(r"logs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?"), frozenset({"kms:encryptioncontext:aws:logs:arn"})),
)
# Where the policy document of each resource type is (a Lambda permission has properties instead, see below).
DOCUMENTS = {
    "AWS::IAM::Role": "AssumeRolePolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::Logs::ResourcePolicy": "PolicyDocument",
    "AWS::Events::EventBusPolicy": "Statement",
    "AWS::SecretsManager::ResourcePolicy": "ResourcePolicy",
    "AWS::ECR::Repository": "RepositoryPolicyText",
}


@dataclass(frozen=True, kw_only=True)
class Unbound:
    """A service principal admitted without a source condition, and why that is the documented (or only safe) form."""

    id: str
    principal: str
    reason: str
    source: str
    everywhere: bool = False  # every statement of the principal; otherwise only resources marked with ``id``


UNBOUND: Mapping[str, Unbound] = {u.id: u for u in (
    Unbound(id="lambda-execution-role", principal="lambda.amazonaws.com", everywhere=True,
            reason="a function's own execution role (here only aws-cdk-lib's handlers and the autoscaling waiter): "
                   "Lambda documents its trust without a source condition and binds the credentials to the "
                   "function with lambda:SourceFunctionArn in identity policies instead",
            source="AWS Lambda developer guide, 'Defining Lambda function permissions with an execution role' and "
                   "'Using the source function ARN to control function access behavior' [? no Lambda page states "
                   "that it sets aws:SourceArn when it assumes a function's role]"),
    Unbound(id="ec2-instance-role", principal="ec2.amazonaws.com", everywhere=True,
            reason="an instance profile's role (the optional EKS managed node group's node role): EC2 assumes it for "
                   "the instances launched with this account's instance profile, and the documented trust carries no "
                   "source condition",
            source="EKS user guide, 'Amazon EKS node IAM role' (trust policy: ec2.amazonaws.com alone); IAM User "
                   "Guide, 'Use an IAM role to grant permissions to applications running on Amazon EC2 instances' "
                   "[? no EC2 page states that it sets aws:SourceArn for an instance profile]"),
    Unbound(id="hyperpod-instance-role", principal="sagemaker.amazonaws.com",
            reason="the HyperPod instance groups' execution role: the HyperPod IAM pages give its trust without a "
                   "condition and SageMaker's confused-deputy page lists no HyperPod example; a condition SageMaker "
                   "does not set when it vends the nodes' credentials would leave every node without them",
            source="SageMaker developer guide, 'IAM role for SageMaker HyperPod' and 'Cross-service confused deputy "
                   "prevention' (features listed: Edge Manager, Images, Inference, Batch Transform, Marketplace, Neo, "
                   "Pipelines, Processing, Studio, Training) [? unconfirmed for HyperPod]"),
    Unbound(id="hyperpod-cluster-role", principal="hyperpod.sagemaker.amazonaws.com",
            reason="the role HyperPod's managed Karpenter assumes: AWS documents its trust without a condition",
            source="SageMaker developer guide, 'Create an IAM role for HyperPod autoscaling with Karpenter' (trust "
                   "policy: the service principal alone) [? unconfirmed whether HyperPod sets aws:SourceArn]"),
    Unbound(id="pipeline-service-role", principal="codepipeline.amazonaws.com",
            reason="the CodePipeline service role CDK Pipelines creates: no confused-deputy condition for a "
                   "pipeline's service role was found in the CodePipeline user guide, and a condition CodePipeline "
                   "does not set would stop every execution; only this account can pass the role (iam:PassRole)",
            source="CodePipeline user guide, 'Manage the CodePipeline service role' [? unconfirmed]"),
)}


def _text(value: Any) -> str:
    """A principal or condition value as text: literals as they are, intrinsics as JSON (never matches a name)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _wildcard(value: Any) -> bool:
    values = as_list(value)
    return not values or all(isinstance(v, str) and v.strip("*") == "" for v in values)


def bound(condition: Any, principal: str) -> bool:
    """True when ``condition`` binds ``principal``'s use to a source with a value that is not a bare wildcard."""
    keys = set(SOURCE_KEYS)
    for pattern, extra in BINDING_KEYS:
        if pattern.fullmatch(principal):
            keys |= extra
    for operator_block in (condition or {}).values() if isinstance(condition, dict) else ():
        for key, value in (operator_block or {}).items():
            if key.lower() in keys and not _wildcard(value):
                return True
    return False


def _markers(templates: StageTemplates, resource: Resource) -> set[str]:
    raw = templates.templates[resource.template_path]["Resources"][resource.logical_id]
    return {str(m) for m in as_list((raw.get("Metadata") or {}).get(METADATA_KEY))}


def _exempt(principal: str, markers: set[str]) -> bool:
    return any(u.principal == principal and (u.everywhere or u.id in markers) for u in UNBOUND.values())


def _document(resource: Resource) -> Any:
    document = resource.properties.get(DOCUMENTS[resource.type])
    if isinstance(document, str):  # AWS::Logs::ResourcePolicy and ECR hold JSON text
        try:
            document = json.loads(document)
        except ValueError:
            return None
    if resource.type == "AWS::Events::EventBusPolicy":  # one statement, not a document
        return {"Statement": [document]} if isinstance(document, dict) else None
    return document


def _unbound(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for resource in templates.resources(*DOCUMENTS, "AWS::Lambda::Permission"):
        markers = _markers(templates, resource)
        if resource.type == "AWS::Lambda::Permission":
            principal = _text(resource.properties.get("Principal"))
            if principal.endswith((".amazonaws.com", ".amazonaws.com.cn")) and not _exempt(principal, markers) and \
                    not any(not _wildcard(resource.properties.get(k)) for k in ("SourceArn", "SourceAccount")):
                yield Finding(resource, "Properties", f"admits {principal} without SourceArn or SourceAccount")
            continue
        document = _document(resource)
        if not isinstance(document, dict):
            continue
        for index, statement in enumerate(as_list(document.get("Statement"))):
            if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
                continue
            principals = statement.get("Principal")
            services = as_list(principals.get("Service")) if isinstance(principals, dict) else []
            for principal in (_text(s) for s in services):
                if not bound(statement.get("Condition"), principal) and not _exempt(principal, markers):
                    yield Finding(resource, f"Properties.{DOCUMENTS[resource.type]}.Statement[{index}]",
                                  f"admits {principal} without aws:SourceArn or aws:SourceAccount")


RULES = [
    Rule(id=RULE_ID, description="A statement that admits an AWS service principal must bind it to its source "
                                 "(aws:SourceArn / aws:SourceAccount, or the service's documented key)",
         fix="Add the service's confused-deputy condition (hyperpod_dpd.infra.source_conditions), or mark the "
             "resource with a documented exemption of hyperpod_dpd.infra.guardrails.rules.trust.UNBOUND", check=_unbound),
]
