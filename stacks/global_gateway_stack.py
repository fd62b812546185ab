"""The stage and stack of one global inference gateway (``global.yaml``), in its home account and Region.

Order: a member's HyperPod cluster and in-cluster gateway must exist before the gateway names them (the handler
resolves each cluster's ARN, and SageMaker adds the member then). Stacks of different stages cannot depend on each
other, so the order is kept where each deploy is decided:

* the promotion pipeline deploys this stage after the wave of its last member, once every member's checks have passed
  (:class:`~hyperpod_dpd.stacks.pipeline_stack.PipelineStack` adds each stage :func:`attachable` names after each
  wave);
* with a plain ``cdk deploy``, deploy the members' stages first: ``cdk deploy "dev/*" "staging/*"``, then
  ``cdk deploy "global-<name>/*"`` (docs/global.md). A gateway deployed too early fails with "no HyperPod cluster ...:
  deploy environment ... before the global gateway", and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.config.global_gateway import GlobalGatewayConfig, members
from hyperpod_dpd.infra.global_gateway import GlobalInferenceGateway, Member
from hyperpod_dpd.infra.guardrails import apply_guardrails
from hyperpod_dpd.stacks.naming import tag_owner


class GlobalGatewayStack(cdk.Stack):
    """The gateway's custom resource, its handler and (unless ``execution_role_arn``) its execution role."""

    def __init__(self, scope: Construct, id: str, *, config: GlobalGatewayConfig,
                 environments: Mapping[str, EnvironmentConfig], **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.config = config
        self.gateway = GlobalInferenceGateway(
            self, "Gateway", name=config.name, weights=config.weights.api(),
            execution_role_arn=config.execution_role_arn,
            members=[Member(environment=env.name, region=env.region, cluster_name=env.hyperpod.cluster_name,
                            namespace=namespace, name=name)
                     for env, namespace, name in members(config, environments)])
        cdk.CfnOutput(self, "GatewayArn", value=self.gateway.resource.get_att_string("Arn"))
        cdk.CfnOutput(self, "EndpointUrl", value=self.gateway.resource.get_att_string("EndpointUrl"))


class GlobalGatewayStage(cdk.Stage):
    """``global-<name>``: deployable with ``cdk deploy "global-<name>/*"`` after the member environments."""

    def __init__(self, scope: Construct, *, config: GlobalGatewayConfig,
                 environments: Mapping[str, EnvironmentConfig], production: bool = False, **kwargs: Any) -> None:
        super().__init__(scope, config.stage_id,
                         env=cdk.Environment(account=config.account, region=config.region), **kwargs)
        self.config = config
        self.member_environments = config.member_environments
        self.stack = GlobalGatewayStack(
            self, "Gateway", config=config, environments=environments, stack_name=config.stack_name,
            description=f"hyperpod-dpd global inference gateway {config.name}: "
                        + ", ".join(f"{m.environment}/{m.endpoint}" for m in config.members))
        cdk.Tags.of(self).add("project", "hyperpod-dpd")
        tag_owner(self.stack)
        apply_guardrails(self, production=production)


def attachable(stages: Iterable[GlobalGatewayStage], done: set[str], wave: set[str]) -> Iterator[GlobalGatewayStage]:
    """The gateways whose last member was just deployed and checked: every member in ``done``, one in ``wave``."""
    for stage in stages:
        members = set(stage.member_environments)
        if members <= done and members & wave:
            yield stage
