"""Stable stack names and the translation of config values into CDK values, shared by all stacks."""

from __future__ import annotations

import aws_cdk as cdk
from hyperpod_dpd.config import EnvironmentConfig

PROJECT = "hpdpd"


def stack_name(config: EnvironmentConfig, part: str) -> str:
    """``hpdpd-<env>-<part>``: explicit, so a refactoring of construct paths never renames a stack."""
    return f"{PROJECT}-{config.name}-{part}"


def removal_policy(config: EnvironmentConfig) -> cdk.RemovalPolicy:
    return cdk.RemovalPolicy.RETAIN if config.removal_policy == "retain" else cdk.RemovalPolicy.DESTROY


def environment(config: EnvironmentConfig) -> cdk.Environment:
    return cdk.Environment(account=config.account, region=config.region)
