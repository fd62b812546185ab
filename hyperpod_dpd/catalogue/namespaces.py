"""Kubernetes namespaces an endpoint must not use: Kubernetes' own, and those of the add-ons the platform installs.

An endpoint's chart declares its namespace (``hyperpod_dpd.k8s.charts``), and the CDK deletes what a chart declares
when the chart goes away (the kubectl handler of aws-cdk-lib 2.275.0, custom-resource-handlers/dist/aws-eks-v2/
kubectl-handler/apply/__init__.py, runs ``kubectl delete -f <manifest>`` on Delete). Removing an endpoint in one of
these namespaces would delete it with everything in it, so they are refused for endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE, OBSERVABILITY_NAMESPACE

# "Avoid creating namespaces with the prefix `kube-`, since it is reserved for Kubernetes system namespaces"
# (kubernetes/website, content/en/docs/concepts/overview/working-with-objects/namespaces.md): kube-system,
# kube-public and kube-node-lease today, and whatever Kubernetes adds under the prefix.
DEFAULT_NAMESPACE = "default"
RESERVED_PREFIX = "kube-"
RESERVED_PREFIX_WHY = "the prefix 'kube-' belongs to Kubernetes' system namespaces"

RESERVED_NAMESPACES: Mapping[str, str] = MappingProxyType({
    # One of Kubernetes' initial namespaces, shared by whatever is deployed without a namespace (same page).
    DEFAULT_NAMESPACE: "Kubernetes' default namespace, shared by everything deployed without a namespace",
    INFERENCE_NAMESPACE: "the HyperPod Inference Operator's namespace (its add-on, routers and load balancers)",
    OBSERVABILITY_NAMESPACE: "the HyperPod observability add-on's namespace",
    # infra/hyperpod_dependencies.py sets namespace.create/name of the HyperPod dependencies chart (aws/sagemaker-
    # hyperpod-cli @ 011ca927, helm_chart/HyperPodHelmChart/values.yaml: namespace.name aws-hyperpod).
    "aws-hyperpod": "the namespace the HyperPod dependencies chart creates",
    # EKS community add-on cert-manager, which the inference add-on requires (awsdocs/amazon-eks-user-guide
    # @ 01385604, latest/ug/workloads/community-addons.adoc: add-on cert-manager, namespace cert-manager).
    "cert-manager": "the cert-manager add-on's namespace (the inference operator needs it)",
})


def reserved_namespace(name: str) -> str | None:
    """Why ``name`` is not an endpoint's namespace to take, or None."""
    if name in RESERVED_NAMESPACES:
        return RESERVED_NAMESPACES[name]
    if name.startswith(RESERVED_PREFIX):
        return RESERVED_PREFIX_WHY
    return None
