"""Stable stack names and the translation of config values into CDK values, shared by all stacks."""

from __future__ import annotations

import aws_cdk as cdk

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.platform import removal_policy

__all__ = ["PROJECT", "environment", "removal_policy", "stack_name"]

PROJECT = "hpdpd"


def stack_name(config: EnvironmentConfig, part: str) -> str:
    """``hpdpd-<env>-<part>``: explicit, so a refactoring of construct paths never renames a stack."""
    return f"{PROJECT}-{config.name}-{part}"


def environment(config: EnvironmentConfig) -> cdk.Environment:
    return cdk.Environment(account=config.account, region=config.region)
