"""The Kubernetes objects of HyperPod-managed Karpenter for one autoscaled instance group: a HyperpodNodeClass and a
NodePool (SageMaker docs, "Autoscaling on SageMaker HyperPod EKS", its "Create a NodeClass" and "Create a NodePool"
pages). :meth:`hyperpod_dpd.infra.hyperpod_cluster.HyperPodCluster.add_karpenter_resources` applies them; the GitOps
tree (hyperpod_dpd.k8s.gitops_render) carries them instead with GitOps delivery."""

from __future__ import annotations

from typing import Any

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.operator import GPU_RESOURCE, MANAGED_BY, MANAGED_BY_LABEL
from hyperpod_dpd.config.hyperpod import InstanceGroup

# No public CRD of HyperpodNodeClass exists to validate against: its shape is the documented one (apiVersion, kind and
# spec.instanceGroups, a list of at most 10 existing instance group names, "Create a NodeClass").
NODECLASS_GROUP = "karpenter.sagemaker.amazonaws.com"
NODECLASS_API_VERSION = f"{NODECLASS_GROUP}/v1"
NODECLASS_KIND = "HyperpodNodeClass"
# NodePool of the karpenter.sh/v1 API, validated in the tests against the upstream CRD (kubernetes-sigs/karpenter
# v1.0.0, the first v1 release). Only fields of that release are rendered, and the HyperPod provider's supported
# requirement (node.kubernetes.io/instance-type).
NODEPOOL_API_VERSION = "karpenter.sh/v1"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
KARPENTER_PREFIX = "hpdpd-"


def karpenter_name(group: InstanceGroup) -> str:
    """The Kubernetes name of a group's HyperpodNodeClass and NodePool (cluster-scoped, lower case)."""
    return KARPENTER_PREFIX + group.name.lower()


def karpenter_manifests(group: InstanceGroup, *, consolidate_after_minutes: int) -> list[dict[str, Any]]:
    """The HyperpodNodeClass and the NodePool of one autoscaled group.

    The NodePool carries the group's labels and taints (HyperPod puts them on every node of the group, and Karpenter
    must know them to tell which pending pods the group can take), caps the group with ``limits`` (``nodes``, which
    every karpenter.sh/v1 release counts in the NodePool's status, and the GPUs of that many nodes as a second bound),
    removes a node only when it is empty, one at a time, and never expires nodes (HyperPod patches and replaces them).
    """
    assert group.autoscaling is not None, group.name
    name = karpenter_name(group)
    managed = {MANAGED_BY_LABEL: MANAGED_BY}
    gpus = INSTANCE_TYPES[group.instance_type].gpu_count * group.autoscaling.max_nodes
    node_spec: dict[str, Any] = {
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": NODECLASS_KIND, "name": name},
        "requirements": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [group.instance_type]}],
        "expireAfter": "Never",
    }
    if group.taints:
        node_spec["taints"] = [{k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v}
                               for t in group.taints]
    node_class = {"apiVersion": NODECLASS_API_VERSION, "kind": NODECLASS_KIND,
                  "metadata": {"name": name, "labels": managed}, "spec": {"instanceGroups": [group.name]}}
    node_pool = {
        "apiVersion": NODEPOOL_API_VERSION, "kind": "NodePool", "metadata": {"name": name, "labels": managed},
        "spec": {
            "template": {"metadata": {"labels": dict(sorted(group.node_labels.items()))}, "spec": node_spec},
            "limits": {"nodes": group.autoscaling.max_nodes, GPU_RESOURCE: gpus} if gpus else
                      {"nodes": group.autoscaling.max_nodes},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{consolidate_after_minutes}m",
                           "budgets": [{"nodes": "1"}]},
        },
    }
    return [node_class, node_pool]
