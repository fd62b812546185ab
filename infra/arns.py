"""Partition-aware ARNs: every ARN the toolkit writes uses ``${AWS::Partition}``, never a literal ``aws``.

(``Stack.format_arn`` folds the partition into a literal when the stack's Region is concrete, which breaks the
same template in aws-cn or aws-us-gov.)
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import lru_cache
from typing import cast

import aws_cdk as cdk
from constructs import IConstruct


def arn(scope: IConstruct, service: str, resource: str, *, region: str | None = None, account: str | None = None) -> str:
    """``arn:${Partition}:<service>:<region>:<account>:<resource>``; region/account default to the stack's."""
    stack_region, stack_account = _stack_location(scope)
    region = stack_region if region is None else region
    account = stack_account if account is None else account
    return f"arn:{_partition()}:{service}:{region}:{account}:{resource}"


def iam_arn(scope: IConstruct, resource: str) -> str:
    """``arn:${Partition}:iam::<account>:<resource>`` (IAM is global: no Region)."""
    return f"arn:{_partition()}:iam::{_stack_location(scope)[1]}:{resource}"


def _stack_location(scope: IConstruct) -> tuple[str, str]:
    """The Region and account of ``scope``'s stack."""
    return _location_of(cast(Hashable, scope))


# A construct's stack, and a stack's Region and account, never change; asking the CDK once per scope saves three
# calls per ARN (a few hundred per synthesis).
@lru_cache(maxsize=1024)
def _location_of(scope: Hashable) -> tuple[str, str]:
    stack = cdk.Stack.of(cast(IConstruct, scope))
    return stack.region, stack.account


@lru_cache(maxsize=1)
def _partition() -> str:
    """The ``${AWS::Partition}`` token (one value per process)."""
    return cdk.Aws.PARTITION
