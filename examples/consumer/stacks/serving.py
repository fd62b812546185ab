"""The consumer's serving stack: its own on-call topic and batch job role beside the whole DPD platform of one
environment."""

from typing import Any

import aws_cdk as cdk
from constructs import Construct
from infra.alerts import OnCallTopic
from infra.batch import BatchJobRole

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra import HyperPodDpdPlatform


class ServingStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, env=cdk.Environment(account=config.account, region=config.region), **kwargs)
        self.platform = HyperPodDpdPlatform(self, "Dpd", config=config)
        self.on_call = OnCallTopic(self, "OnCall")
        # The consumer's own role reads the model bucket; the grant acknowledges its own wildcard findings.
        self.batch = BatchJobRole(self, "BatchJob")
        self.platform.grant_model_read(self.batch.role, bucket="ml-models-123456789012-us-west-2")
        cdk.CfnOutput(self, "HyperPodClusterArn", value=self.platform.hyperpod.cluster_arn)
