"""checkov findings acknowledged where they arise: CloudFormation ``Metadata.checkov.skip`` on the one resource,
each with its reason (checkov reads it; nothing is skipped globally).

aws-cdk-lib builds a few Lambda-backed handlers of its own (the kubectl provider, bucket deployment, bucket
auto-delete, default-security-group restriction, CfnJson utility). Their Lambda and log-group settings are not ours to
choose; :func:`skip_generated_handlers` records why each checkov finding on them does not apply.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import IConstruct, IValidation

# Markers in the construct path of aws-cdk-lib's own handlers.
GENERATED_HANDLERS = (
    "KubectlProvider", "Custom::CDKBucketDeployment", "Custom::S3AutoDeleteObjectsCustomResourceProvider",
    "Custom::VpcRestrictDefaultSGCustomResourceProvider", "AWSCDKCfnUtilsProvider",
)
HANDLER_REASONS: Mapping[str, Mapping[str, str]] = {
    "AWS::Lambda::Function": {
        "CKV_AWS_115": "aws-cdk-lib custom-resource handler, invoked by CloudFormation only while deploying; reserved "
                       "concurrency would only add a failure mode",
        "CKV_AWS_116": "aws-cdk-lib custom-resource handler called synchronously by CloudFormation; failures surface as "
                       "stack events, a dead-letter queue would never receive them",
        "CKV_AWS_117": "aws-cdk-lib handler that calls only AWS APIs (S3, CloudFormation); the kubectl handler, which "
                       "reaches the cluster, does run in the VPC",
        "CKV_AWS_173": "aws-cdk-lib handler whose environment holds no secrets (names and paths only); encrypted at "
                       "rest with the AWS managed key",
    },
    "AWS::Logs::LogGroup": {
        "CKV_AWS_158": "log group of an aws-cdk-lib deployment-time handler: handler logs only, no model or request "
                       "data; encrypted at rest by CloudWatch Logs",
    },
}


def skip(resource: cdk.CfnResource, check_id: str, reason: str) -> None:
    """Skip one checkov check on one resource, with the reason (merged with earlier skips)."""
    skip_all(resource, {check_id: reason})


def skip_all(resource: cdk.CfnResource, reasons: Mapping[str, str]) -> None:
    """Skip several checkov checks on one resource (``check id -> reason``), merged with its earlier skips."""
    existing = resource.get_metadata("checkov") or {}
    skips = [s for s in existing.get("skip", []) if s.get("id") not in reasons]
    resource.add_metadata("checkov", {**existing, "skip": [*skips, *({"id": c, "comment": r} for c, r in reasons.items())]})


def skip_generated_handlers(scope: IConstruct) -> None:
    """Give aws-cdk-lib's own handler Lambdas and log groups under ``scope`` their reasoned skips, when ``scope``
    is synthesized (handlers aws-cdk-lib adds late are covered too)."""
    scope.node.add_validation(GeneratedHandlerSkips(scope))


@jsii.implements(IValidation)
class GeneratedHandlerSkips:
    """Adds the reasoned skips to aws-cdk-lib's own handlers under one scope, and to nothing else.

    It runs once per synthesis of the scope, as a node validation: after aspects and preparation (so every handler
    exists) and before the templates are rendered (so the metadata is in them). An aspect would do the same with a
    call from the CDK into Python for every construct; here the CDK is asked once for the subtree, and only the
    Lambda functions and log groups in it are looked at. It reports no errors, and applying it twice changes nothing.
    """

    def __init__(self, scope: IConstruct) -> None:
        self._scope = scope

    def validate(self) -> list[str]:
        stage = self._scope if cdk.Stage.is_stage(self._scope) else cdk.Stage.of(self._scope)
        for node in self._scope.node.find_all():
            resource_type = _handler_type(node)
            if resource_type is None:
                continue
            path = node.node.path
            if not any(marker in path for marker in GENERATED_HANDLERS):
                continue
            if cdk.Stage.of(node) is stage:  # a nested stage was synthesized on its own, before this one
                skip_all(node, HANDLER_REASONS[resource_type])  # type: ignore[arg-type]
        return []


def _handler_type(node: IConstruct) -> str | None:
    """The resource type of a Lambda function or log group, else ``None``; told by class where it can be, so the CDK
    is asked only about generic ``CfnResource`` objects (the custom-resource providers' handlers)."""
    if isinstance(node, lambda_.CfnFunction):
        return "AWS::Lambda::Function"
    if isinstance(node, logs.CfnLogGroup):
        return "AWS::Logs::LogGroup"
    if type(node) is cdk.CfnResource and node.cfn_resource_type in HANDLER_REASONS:
        return node.cfn_resource_type
    return None
