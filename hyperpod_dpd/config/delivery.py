"""Who delivers an environment's in-cluster objects (``delivery:``): the CDK stacks, or a GitOps controller.

``delivery.endpoints: cdk`` (the default) is the endpoints stack: one ``KubernetesManifest`` per endpoint, applied and
pruned by CloudFormation's kubectl handler. ``gitops`` hands every object the GitOps tree carries
(``python -m hyperpod_dpd.k8s.gitops``, docs/gitops.md) to Argo CD or Flux, and no stack holds a manifest for them:

* the endpoints' objects (namespaces, IEC, router Services and policies, disruption budgets),
* the operations RBAC (ClusterRoles, ClusterRoleBinding, the router and namespace RoleBindings),
* the HyperPod Karpenter ``HyperpodNodeClass`` and ``NodePool`` of the autoscaled groups.

What a controller needs before it can apply any of that stays with CDK in both modes: the EKS cluster and its
add-ons, the HyperPod dependencies chart, the inference operator add-on with its CRDs and IRSA roles, the EKS access
entries of the operations roles, the HyperPod cluster with its AutoScaling (which installs the Karpenter CRDs).

Never both: a manifest CloudFormation applies with ``prune`` and a controller that prunes would fight over the IEC.

``handover: true`` (``cdk`` only) is the first step of switching to ``gitops`` without deleting the live objects:
CloudFormation's kubectl handler runs ``kubectl delete -f`` on every object of a manifest that leaves the template
(aws-cdk-lib 2.275.0, custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py, RequestType
``Delete``), unless the resource has ``DeletionPolicy: Retain`` ("This capability also applies to stack update
operations that lead to resources being deleted from stacks", AWS CloudFormation, "DeletionPolicy attribute"). So a
deploy with ``handover`` first gives every such manifest ``Retain``; only then may ``endpoints: gitops`` remove them
(docs/gitops.md, "Switching an environment from cdk to gitops").
"""

from __future__ import annotations

from typing import Literal

from pydantic import StrictBool, ValidationInfo, field_validator

from hyperpod_dpd.config.base import Model

Delivery = Literal["cdk", "gitops"]


class DeliveryConfig(Model):
    """``delivery: {endpoints: cdk | gitops, handover: false}``."""

    endpoints: Delivery = "cdk"
    handover: StrictBool = False  # strict: pydantic would read the string 'yes' as true

    @field_validator("handover")
    @classmethod
    def _handover_is_a_cdk_step(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("endpoints") == "gitops":
            raise ValueError("applies to 'endpoints: cdk' only (the step before the switch: it keeps the objects "
                             "when the manifests leave the stacks); with 'endpoints: gitops' remove it")
        return value

    @property
    def gitops(self) -> bool:
        """Whether a GitOps controller, not CDK, applies the objects of the GitOps tree."""
        return self.endpoints == "gitops"
