"""The consumer's serving stack: its own on-call topic beside the whole DPD platform of one environment."""

from typing import Any

import aws_cdk as cdk
from constructs import Construct
from infra.alerts import OnCallTopic

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra import HyperPodDpdPlatform


class ServingStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, env=cdk.Environment(account=config.account, region=config.region), **kwargs)
        self.platform = HyperPodDpdPlatform(self, "Dpd", config=config)
        self.on_call = OnCallTopic(self, "OnCall")
        cdk.CfnOutput(self, "HyperPodClusterArn", value=self.platform.hyperpod.resource.attr_cluster_arn)
