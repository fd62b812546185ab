"""The endpoints stack of an environment: each DPD endpoint's manifests, applied after the inference add-on."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.inference_operator import InferenceOperator
from hyperpod_dpd.infra.platform import build_endpoints


class EndpointsStack(cdk.Stack):
    """One ``KubernetesManifest`` per endpoint chart, through the platform's kubectl provider (see
    :func:`~hyperpod_dpd.infra.platform.build_endpoints`). Its dependency on the inference add-on makes this stack
    deploy after the platform stack.

    Kept apart from the platform stack so that endpoint changes (replicas, threshold, image) never touch the
    cluster stacks. With no endpoints it holds one placeholder (CloudFormation refuses an empty template), so the
    stack outlives its last endpoint and deleting that endpoint from the config deletes its objects.

    With ``delivery.endpoints: gitops`` it holds the placeholder only, whatever the endpoints: a GitOps controller
    applies them from the tree ``python -m hyperpod_dpd.k8s.gitops`` writes (docs/gitops.md), and the stack stays so
    that switching back to ``cdk`` later needs no new stack.
    """

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, eks_cluster: HyperPodEksCluster,
                 inference_operator: InferenceOperator, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.charts, self.manifests = build_endpoints(self, config=config, eks_cluster=eks_cluster,
                                                      inference_operator=inference_operator)
        if not self.manifests:
            cdk.CfnResource(self, "NoEndpoints", type="AWS::CloudFormation::WaitConditionHandle")
