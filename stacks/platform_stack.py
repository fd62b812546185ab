"""The platform stack of an environment: EKS, the HyperPod dependencies chart and the HyperPod cluster."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.platform import build_platform


class PlatformStack(cdk.Stack):
    """What :func:`~hyperpod_dpd.infra.platform.build_platform` builds (the same code as ``HyperPodDpdPlatform``),
    in a stack of its own, plus the outputs operators look up."""

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, network: EfaNetwork,
                 **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        parts = build_platform(self, config=config, network=network)
        self.access_logs = parts.access_logs
        self.eks = parts.eks
        self.hyperpod_dependencies = parts.hyperpod_dependencies
        self.hyperpod = parts.hyperpod
        self.inference_operator = parts.inference_operator
        cdk.CfnOutput(self, "EksClusterName", value=self.eks.cluster_name)
        cdk.CfnOutput(self, "HyperPodClusterArn", value=self.hyperpod.resource.attr_cluster_arn)
        cdk.CfnOutput(self, "InferenceExecutionRoleArn", value=self.inference_operator.execution_role.role_arn)
        cdk.CfnOutput(self, "TlsBucketName", value=self.inference_operator.tls_bucket.bucket_name)
