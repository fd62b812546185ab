"""EnvironmentStage: everything of one environment, deployable with ``cdk deploy "<env>/*"``."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.feature_flags import FEATURE_FLAGS
from hyperpod_dpd.infra.guardrails import apply_guardrails
from hyperpod_dpd.infra.guardrails.stateful import retain_stateful_resources
from hyperpod_dpd.stacks.endpoints_stack import EndpointsStack
from hyperpod_dpd.stacks.naming import (
    deployed_stage,
    environment,
    keep_logical_ids,
    removal_policy,
    stack_name,
    tag_owner,
)
from hyperpod_dpd.stacks.network_stack import NetworkStack
from hyperpod_dpd.stacks.platform_stack import PlatformStack


class EnvironmentStage(cdk.Stage):
    """One environment. The same class is used by ``cdk deploy`` and by the promotion pipeline.

    ``config`` as the application passes it: an environment the pipeline promotes carries the trust of its checks
    role (``config.checks_role_trust``), so its network stack creates that role (``checks_role``, which every check
    step assumes, preflight first) and, with endpoints, its platform stack the checks runner
    (``platform.checks_runner``: a CodeBuild project in the environment's VPC), before the endpoints stack and so
    before the pipeline's ``Rollout`` step of that stack.
    """

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, env=environment(config), **kwargs)
        # The flags the stacks are tested with, whatever the cdk.json of the directory the app runs in (another
        # project's, for `python -m hyperpod_dpd.stacks.application --check` run there): before the first stack.
        for flag, value in FEATURE_FLAGS.items():
            self.node.set_context(flag, value)
        self.config = config
        common: dict[str, Any] = {"termination_protection": config.termination_protection}
        self.network = NetworkStack(self, "Network", config=config, stack_name=stack_name(config, "network"),
                                    description=f"hyperpod-dpd {config.name}: VPC, subnets, EFA security group",
                                    **common)
        self.platform = PlatformStack(self, "Platform", config=config, network=self.network.network,
                                      stack_name=stack_name(config, "platform"),
                                      description=f"hyperpod-dpd {config.name}: EKS, HyperPod dependencies, HyperPod cluster",
                                      **common)
        self.platform.add_stack_dependency(self.network)
        self.checks_role = self.platform.checks_role  # in the network stack; None unless config.checks_role_trust
        # Always present, even with no endpoints: removing an environment's last endpoint then updates this stack,
        # which deletes the endpoint's objects, instead of leaving a stack that no deploy touches any more.
        self.endpoints = EndpointsStack(
            self, "Endpoints", config=config, eks_cluster=self.platform.eks,
            inference_operator=self.platform.inference_operator, stack_name=stack_name(config, "endpoints"),
            description=f"hyperpod-dpd {config.name}: DPD endpoints (InferenceEndpointConfig, router resources)",
            **common)
        self.endpoints.add_stack_dependency(self.platform)
        for key, value in {"project": "hyperpod-dpd", **config.tags}.items():
            cdk.Tags.of(self).add(key, value)
        for stack in (self.network, self.platform, self.endpoints):  # who owns each role (hyperpod_dpd/ops/ownership.py)
            tag_owner(stack)
        keep_logical_ids(self, deployed_stage(config))  # a renamed file keeps its stacks' resources (stacks/naming.py)
        # removal_policy: retain keeps every stateful resource of every stack (the HyperPod cluster and the network
        # included) on stack deletion and replacement; destroy leaves each construct's own policy.
        retain_stateful_resources(self, removal_policy(config))
        # Security gates on every synth: cdk-nag's AwsSolutions pack and the project's own rules. Findings fail
        # synthesis unless acknowledged on the one construct they concern, with a reason (see infra/nag.py).
        apply_guardrails(self, production=config.production)
