"""Acknowledging cdk-nag findings precisely: one construct, one finding, one reason.

cdk-nag (v3, through ``cdk.Validations``) names wildcard findings by the rendered action or resource, e.g.
``AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:us-west-2:111111111111:instance/*]``. The helpers here
render statements the same way, so each wildcard is acknowledged by its exact finding id with the reason written
next to the statement that needs it; a new wildcard is never covered by an old acknowledgment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

PLUGIN = "AwsSolutions"


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (``AwsSolutions-IAM4[Policy::...]``) on one construct and its children."""
    acknowledge_all(construct, [(rule, reason)])


def acknowledge_all(construct: IConstruct, findings: Iterable[tuple[str, str]]) -> None:
    """Acknowledge several findings (``(rule, reason)`` pairs) on one construct: one call into the CDK for all."""
    acknowledgments = [cdk.Acknowledgment(id=f"{PLUGIN}::{rule}", reason=reason) for rule, reason in findings]
    if acknowledgments:
        cdk.Validations.of(construct).acknowledge(*acknowledgments)


def render(scope: IConstruct, value: Any) -> str:
    """A CloudFormation value as cdk-nag prints it: ``{"Ref": X}`` -> ``<X>``, ``Fn::GetAtt`` -> ``<X.Attr>``."""
    resolved = cdk.Stack.of(scope).resolve(value)
    return _render(resolved)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}>"
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(_render(p) for p in parts)
    return compact_json(value)


def compact_json(value: Any) -> str:
    """JSON as cdk-nag embeds unrenderable values in finding ids."""
    return json.dumps(value, separators=(",", ":"))


def acknowledge_managed_policies(construct: IConstruct, reasons: Mapping[str, str]) -> None:
    """Acknowledge IAM4 for AWS managed policies by name (``service-role/AWSLambdaBasicExecutionRole``)."""
    acknowledge_all(construct, [(f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]", reason)
                                for name, reason in reasons.items()])


def acknowledge_wildcards(policy: IConstruct, statements: Iterable[iam.PolicyStatement], reasons: Mapping[str, str]) -> None:
    """Acknowledge IAM5 for every wildcard action and resource of ``statements`` (by their ``sid``)."""
    acknowledged = []
    for data in cdk.Stack.of(policy).resolve([s.to_statement_json() for s in statements]):
        sid = data.get("Sid")
        findings = _wildcard_findings(data)
        if findings and sid not in reasons:
            raise KeyError(f"statement {sid!r} of {policy.node.path} has wildcards {findings} but no reason")
        acknowledged += [(f"AwsSolutions-IAM5[{finding}]", reasons[sid]) for finding in findings]
    acknowledge_all(policy, acknowledged)


def _wildcard_findings(statement: Mapping[str, Any]) -> list[str]:
    """The IAM5 finding details of one resolved statement: each wildcard action and resource, rendered as cdk-nag does."""
    findings = [f"Action::{a}" for a in _as_list(statement.get("Action")) if "*" in a]
    return findings + [f"Resource::{_render(r)}" for r in _as_list(statement.get("Resource")) if "*" in _render(r)]


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def acknowledge_grant(grantee: iam.IGrantable, grant: iam.Grant, reason: str) -> list[str]:
    """Acknowledge the IAM5 findings that ``grant`` itself adds to its grantee's identity policy, by exact id, on the
    grantee's own construct (a role, user or group: its default policy is a child). A wildcard the grantee's policy
    gets from anything else stays a finding. Returns the finding ids acknowledged (none when the grant wrote no
    principal statement, e.g. for a service principal: then the grant is in the resource's policy, which this helper
    does not acknowledge, so any finding there stays one).

    cdk-nag names an action wildcard by the action alone (``AwsSolutions-IAM5[Action::s3:List*]``), so the same
    wildcard action another grant adds to the same policy is covered too; resource findings name the resource. The
    ids are computed in the grantee's stack, as the template will render them: a grantee in another stack than the
    granted resource sees a cross-stack reference there, which this rendering does not predict, so those resource
    findings stay unacknowledged and fail synthesis loudly instead of passing silently.
    """
    principal = grantee.grant_principal
    if not grant.principal_statements or not isinstance(principal, Construct):
        return []
    document = cdk.Stack.of(principal).resolve([s.to_statement_json() for s in grant.principal_statements])
    findings = list(dict.fromkeys(f"AwsSolutions-IAM5[{finding}]" for data in document
                                  for finding in _wildcard_findings(data)))
    acknowledge_all(principal, [(finding, reason) for finding in findings])
    return findings


def acknowledge_generated_policy(policy: IConstruct | None, reason: str) -> None:
    """Acknowledge the wildcards of a policy that aws-cdk-lib generates for its own handlers (asset copies,
    custom-resource frameworks). Each finding is still acknowledged by its exact id, as computed from the policy
    document at the time of the call: call it after the construct that owns the handler is complete."""
    if policy is None:
        raise ValueError("no generated policy found to acknowledge")
    document = cdk.Stack.of(policy).resolve(policy.document.to_json())  # type: ignore[attr-defined]
    acknowledge_all(policy, [(f"AwsSolutions-IAM5[{finding}]", reason)
                             for data in _as_list(document.get("Statement")) for finding in _wildcard_findings(data)])


def acknowledge_generated_function(function: IConstruct | None, reason: str) -> None:
    """AwsSolutions-L1 on a Lambda function whose runtime aws-cdk-lib chooses (bumped with aws-cdk-lib)."""
    if function is None:
        raise ValueError("no generated function found to acknowledge")
    acknowledge(function, "AwsSolutions-L1", reason)
