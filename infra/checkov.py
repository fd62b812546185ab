"""checkov findings acknowledged where they arise: CloudFormation ``Metadata.checkov.skip`` on the one resource,
each with its reason (checkov reads it; nothing is skipped globally).

aws-cdk-lib builds a few Lambda-backed handlers of its own (the kubectl provider, bucket deployment, bucket
auto-delete, default-security-group restriction, CfnJson utility). Their Lambda and log-group settings are not ours to
choose; :class:`GeneratedHandlerSkips` records why each checkov finding on them does not apply.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
import jsii
from constructs import IConstruct

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
    existing = resource.get_metadata("checkov") or {}
    skips = [s for s in existing.get("skip", []) if s.get("id") != check_id]
    resource.add_metadata("checkov", {**existing, "skip": [*skips, {"id": check_id, "comment": reason}]})


@jsii.implements(cdk.IAspect)
class GeneratedHandlerSkips:
    """Add the reasoned skips to aws-cdk-lib's own handler Lambdas and their log groups, and to nothing else."""

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, cdk.CfnResource) or node.cfn_resource_type not in HANDLER_REASONS:
            return
        if not any(marker in node.node.path for marker in GENERATED_HANDLERS):
            return
        for check_id, reason in HANDLER_REASONS[node.cfn_resource_type].items():
            skip(node, check_id, reason)
