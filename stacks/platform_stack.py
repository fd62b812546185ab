"""The platform stack of an environment: EKS, the HyperPod dependencies chart and the HyperPod cluster."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.buckets import access_logs_bucket
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.hyperpod_dependencies import HyperPodDependencies
from hyperpod_dpd.infra.inference_operator import InferenceOperator, ObservabilityOptions
from hyperpod_dpd.stacks.naming import removal_policy


class PlatformStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, network: EfaNetwork,
                 **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        policy = removal_policy(config)
        self.access_logs = access_logs_bucket(self, "AccessLogs", removal_policy=policy)
        eks_cfg, hp_cfg = config.eks, config.hyperpod

        self.eks = HyperPodEksCluster(
            self, "Eks",
            vpc=network.vpc,
            subnets=network.eks_subnets,
            cluster_name=eks_cfg.cluster_name,
            version=eks_cfg.version,
            security_group=network.efa_security_group,
            endpoint_access=eks_cfg.endpoint_access,
            public_access_cidrs=eks_cfg.public_access_cidrs,
            admin_principals=eks_cfg.admin_principals,
            logging=eks_cfg.logging,
            system_node_group=eks_cfg.system_node_group,
            addon_versions=eks_cfg.addon_versions,  # overrides; the construct pins the rest from the catalogue
            removal_policy=policy,
        )

        chart = hp_cfg.dependencies_chart
        self.hyperpod_dependencies = HyperPodDependencies(
            self, "HyperPodDependencies",
            cluster=self.eks.cluster,
            region=config.region,
            gpu_instance_types=[g.instance_type for g in hp_cfg.instance_groups if g.is_gpu],
            repository=chart.repository,
            local_path=config.resolve_path(chart.local_path) if chart.local_path else None,
            version=chart.version,
            timeout=cdk.Duration.minutes(chart.timeout_minutes),
        )

        self.hyperpod = HyperPodCluster(
            self, "HyperPod",
            cluster_name=hp_cfg.cluster_name,
            eks_cluster_arn=self.eks.cluster_arn,
            region=config.region,
            subnet_ids=[network.gpu_subnet.subnet_id],
            security_group_ids=[network.efa_security_group.security_group_id, self.eks.cluster.cluster_security_group_id],
            instance_groups=hp_cfg.instance_groups,
            lifecycle_bucket_name=hp_cfg.lifecycle_bucket(config.account, config.region),
            node_recovery=hp_cfg.node_recovery,
            node_provisioning_mode=hp_cfg.node_provisioning_mode,
            depends_on=[self.hyperpod_dependencies, *self.eks.addons.values()],
            removal_policy=policy,
            access_logs_bucket=self.access_logs,
            tags=config.tags,
        )
        operator = config.operator
        self.inference_operator = InferenceOperator(
            self, "InferenceOperator",
            eks_cluster=self.eks,
            hyperpod_cluster=self.hyperpod,
            operator_version=operator.version,
            addon_version=operator.addon_version,
            prerequisite_versions=operator.prerequisite_versions,
            execution_role_name=operator.execution_role(hp_cfg.cluster_name),
            tls_bucket_name=operator.tls_bucket(config.account, config.region),
            model_buckets=config.model_buckets,
            gated_model_access=operator.gated_model_access,
            observability=ObservabilityOptions(addon_version=operator.observability.addon_version)
            if operator.observability.enabled else None,
            require_dpd=bool(config.endpoints),
            removal_policy=policy,
            access_logs_bucket=self.access_logs,
        )
        cdk.CfnOutput(self, "EksClusterName", value=self.eks.cluster_name)
        cdk.CfnOutput(self, "HyperPodClusterArn", value=self.hyperpod.resource.attr_cluster_arn)
        cdk.CfnOutput(self, "InferenceExecutionRoleArn", value=self.inference_operator.execution_role.role_arn)
        cdk.CfnOutput(self, "TlsBucketName", value=self.inference_operator.tls_bucket.bucket_name)
