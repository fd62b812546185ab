"""The stack names of an environment, as the model needs them: the prefix field's type and its default.

The model layer of :mod:`hyperpod_dpd.config.identity` (which checks the names an environment claims, over the whole
:class:`~hyperpod_dpd.config.environment.EnvironmentConfig`, and re-exports these): the environment model imports this
module, so nothing here may import the environment.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from hyperpod_dpd.config.base import pattern

PROJECT = "hpdpd"
# The stacks of an environment, ``<stack_name_prefix>-<part>`` (stacks/environment_stage.py).
STACK_PARTS = ("network", "platform", "endpoints")
# The stacks that apply Kubernetes manifests (the platform: operations RBAC, Karpenter; the endpoints: the endpoints).
MANIFEST_STACK_PARTS = ("platform", "endpoints")
# CloudFormation stack names: "can contain only alphanumeric characters (case-sensitive) and hyphens. It must start
# with an alphabetic character and can't be longer than 128 characters" (CloudFormation API Reference, CreateStack,
# StackName); the CDK refuses the same outside /^[A-Za-z][A-Za-z0-9-]*$/ (aws-cdk-lib 2.275.0 core/lib/stack.js,
# VALID_STACK_NAME_REGEX). The prefix leaves room for the longest part.
MAX_STACK_NAME = 128
MAX_STACK_PREFIX = MAX_STACK_NAME - len("-" + max(STACK_PARTS, key=len))
StackNamePrefix = Annotated[str, Field(max_length=MAX_STACK_PREFIX), pattern(
    r"[A-Za-z][A-Za-z0-9-]*", "letters, digits and hyphens starting with a letter (CloudFormation stack names: "
    f"<prefix>-network, <prefix>-platform, <prefix>-endpoints; at most {MAX_STACK_PREFIX} characters)")]


def default_stack_prefix(environment: str) -> str:
    """``hpdpd-<env>``: the stack name prefix of an environment without ``stack_name_prefix``."""
    return f"{PROJECT}-{environment}"
