"""Partition-aware ARNs: every ARN the toolkit writes uses ``${AWS::Partition}``, never a literal ``aws``.

(``Stack.format_arn`` folds the partition into a literal when the stack's Region is concrete, which breaks the
same template in aws-cn or aws-us-gov.)
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def arn(scope: IConstruct, service: str, resource: str, *, region: str | None = None, account: str | None = None) -> str:
    """``arn:${Partition}:<service>:<region>:<account>:<resource>``; region/account default to the stack's."""
    stack = cdk.Stack.of(scope)
    region = stack.region if region is None else region
    account = stack.account if account is None else account
    return f"arn:{cdk.Aws.PARTITION}:{service}:{region}:{account}:{resource}"


def iam_arn(scope: IConstruct, resource: str) -> str:
    """``arn:${Partition}:iam::<account>:<resource>`` (IAM is global: no Region)."""
    return f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Stack.of(scope).account}:{resource}"
