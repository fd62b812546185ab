"""The platform stack of an environment: EKS, the HyperPod dependencies chart and the HyperPod cluster."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.platform import build_platform

# Outputs the pipeline's check steps read (stacks/pipeline_stack.py): the query URL of the observability add-on's
# Prometheus workspace, known only once the workspace exists, for `hpdpd verify --prometheus`.
PROMETHEUS_OUTPUT = "PrometheusQueryUrl"
CHECKS_ROLE_OUTPUT = "ChecksRoleArn"
CHECKS_PROJECT_OUTPUT = "ChecksRunnerProject"


class PlatformStack(cdk.Stack):
    """What :func:`~hyperpod_dpd.infra.platform.build_platform` builds (the same code as ``HyperPodDpdPlatform``),
    in a stack of its own, plus the outputs operators and the pipeline look up."""

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, network: EfaNetwork,
                 **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        parts = build_platform(self, config=config, network=network)
        self.access_logs = parts.access_logs
        self.eks = parts.eks
        self.hyperpod_dependencies = parts.hyperpod_dependencies
        self.hyperpod = parts.hyperpod
        self.inference_operator = parts.inference_operator
        self.checks_role = parts.checks_role
        self.checks_runner = parts.checks_runner
        cdk.CfnOutput(self, "EksClusterName", value=self.eks.cluster_name)
        cdk.CfnOutput(self, "HyperPodClusterArn", value=self.hyperpod.cluster_arn)
        cdk.CfnOutput(self, "InferenceExecutionRoleArn", value=self.inference_operator.execution_role.role_arn)
        cdk.CfnOutput(self, "TlsBucketName", value=self.inference_operator.tls_bucket.bucket_name)
        destination = self.inference_operator.observability_destination
        if destination is not None:
            cdk.CfnOutput(self, PROMETHEUS_OUTPUT, value=destination.prometheus_endpoint,
                          description="Prometheus query URL of the observability workspace (hpdpd verify --prometheus)")
        if self.checks_role is not None:
            # the ARN from the role's name: the role is in the network stack, and an export would pin it there
            cdk.CfnOutput(self, CHECKS_ROLE_OUTPUT, value=self.checks_role.role_arn,
                          description="The role the promotion pipeline's check steps run as (in the network stack)")
        if self.checks_runner is not None:
            cdk.CfnOutput(self, CHECKS_PROJECT_OUTPUT, value=self.checks_runner.project.project_name,
                          description="The CodeBuild project that runs the cluster checks inside the VPC "
                                      "(hpdpd checks run)")
