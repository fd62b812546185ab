"""Stable stack names and the translation of config values into CDK values, shared by all stacks."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.config.identity import OWNER_TAG, PROJECT, default_stack_prefix
from hyperpod_dpd.config.identity import stack_name as _stack_name
from hyperpod_dpd.infra.platform import removal_policy

__all__ = ["PROJECT", "deployed_stage", "environment", "keep_logical_ids", "removal_policy", "stack_name", "tag_owner"]


def stack_name(config: EnvironmentConfig, part: str) -> str:
    """``<stack_name_prefix>-<part>`` (default ``hpdpd-<env>-<part>``): explicit, so a refactoring of construct paths
    never renames a stack, and a renamed environment file with ``stack_name_prefix`` keeps its stacks. One definition,
    :func:`hyperpod_dpd.config.identity.stack_name`, which the identity checks and ``hpdpd preflight`` use too."""
    return _stack_name(config, part)


def tag_owner(stack: cdk.Stack) -> None:
    """Tag the stack's IAM roles with its name (:data:`~hyperpod_dpd.config.identity.OWNER_TAG`): CloudFormation's own
    ``aws:cloudformation:stack-name`` tag never reaches ``AWS::IAM::Role``, and ``hpdpd preflight`` tells by this tag
    whether a role name already belongs to another stack (hyperpod_dpd/ops/ownership.py)."""
    cdk.Tags.of(stack).add(OWNER_TAG, stack.stack_name, include_resource_types=["AWS::IAM::Role"])


def deployed_stage(config: EnvironmentConfig) -> str:
    """The stage the environment's stacks were named after: ``<old>`` for ``stack_name_prefix: hpdpd-<old>`` (a renamed
    file that keeps its stacks), else the environment's own name."""
    project = default_stack_prefix("")
    prefix = config.stack_prefix
    return prefix[len(project):] if prefix.startswith(project) and len(prefix) > len(project) else config.name


def keep_logical_ids(stage: cdk.Stage, deployed: str) -> None:
    """Give the rules that reference their own security group the logical ids they have under the stage ``deployed``.

    CDK names such a rule after its peer's unique id, ``from <Names.uniqueId(peer)>:<port>`` (aws-cdk-lib 2.275.0
    aws-ec2/lib/security-group.js, ``addIngressRule`` and ``determineRuleScope``), and that id holds the whole construct
    path, the stage (the file name) first: a renamed file would replace the EFA group's self-referencing rules, and EC2
    refuses to create a rule that already exists. Each such rule's logical id is computed here under ``deployed`` with
    CDK's own ``Names.uniqueId`` and ``Stack.getLogicalId`` on a scratch tree of the same paths. Nothing changes when
    ``deployed`` is the stage's own id.
    """
    if deployed == stage.node.id:
        return
    scratch = cdk.Stage(cdk.App(), deployed)
    for stack in (c for c in stage.node.children if isinstance(c, cdk.Stack)):
        twin = cdk.Stack(scratch, stack.node.id)
        for group in (c for c in stack.node.find_all() if isinstance(c, ec2.SecurityGroup)):
            current, twin_group = cdk.Names.unique_id(group), _twin(twin, stack, group)
            previous = cdk.Names.unique_id(twin_group)
            for rule in group.node.children:
                if isinstance(rule, cdk.CfnResource) and current in rule.node.id:
                    twin_rule = cdk.CfnResource(twin_group, rule.node.id.replace(current, previous),
                                                type=rule.cfn_resource_type)
                    rule.override_logical_id(twin.get_logical_id(twin_rule))


def _twin(twin_stack: cdk.Stack, stack: cdk.Stack, construct: Construct) -> Construct:
    """A construct at ``construct``'s path below ``stack``, under ``twin_stack``."""
    node: Construct = twin_stack
    for part in construct.node.path.split("/")[len(stack.node.path.split("/")):]:
        node = next((c for c in node.node.children if c.node.id == part), None) or Construct(node, part)  # type: ignore[assignment]
    return node


def environment(config: EnvironmentConfig) -> cdk.Environment:
    return cdk.Environment(account=config.account, region=config.region)
