"""The endpoints stack of an environment: each DPD endpoint's manifests, applied after the inference add-on."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.inference_operator import InferenceOperator
from hyperpod_dpd.k8s.charts import EndpointChart, add_environment_charts


class EndpointsStack(cdk.Stack):
    """One ``KubernetesManifest`` per endpoint chart (the IEC and its router resources), through the platform's
    kubectl provider. Each depends on the inference add-on, which makes this stack deploy after the platform stack:
    the IEC needs the operator's CRD and the router objects need its namespace.

    Kept apart from the platform stack so that endpoint changes (replicas, threshold, image) never touch the
    cluster stacks. ``prune`` deletes objects dropped from a chart, e.g. the old IEC after a new generation.
    """

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, eks_cluster: HyperPodEksCluster,
                 inference_operator: InferenceOperator, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.charts: list[EndpointChart] = add_environment_charts(cdk8s.App(), config)
        self.manifests: dict[str, eks.KubernetesManifest] = {}
        for chart in self.charts:
            manifest = eks.KubernetesManifest(
                self, f"Endpoint-{chart.node.id}", cluster=eks_cluster.cluster, manifest=chart.to_json(),
                overwrite=True, prune=True)
            manifest.node.add_dependency(inference_operator.resource)
            self.manifests[chart.node.id] = manifest
