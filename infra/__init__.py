"""Reusable AWS CDK constructs for a HyperPod-on-EKS platform sized for disaggregated prefill/decode.

One import for consumers::

    from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails, availability_zone_context

:class:`HyperPodDpdPlatform` builds a whole environment from one configuration; the building blocks
(:class:`EfaNetwork`, :class:`HyperPodEksCluster`, :class:`HyperPodDependencies`, :class:`HyperPodCluster`,
:class:`InferenceOperator`, and the pipeline's :class:`ChecksRunner` and :class:`ChecksRole`) are exported too for
apps that compose their own.
"""

from hyperpod_dpd.infra.checks_role import ChecksRole
from hyperpod_dpd.infra.checks_runner import ChecksRunner
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.guardrails import HyperPodDpdChecks, Settings, apply_guardrails
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.hyperpod_dependencies import HyperPodDependencies
from hyperpod_dpd.infra.inference_operator import InferenceOperator, ObservabilityOptions
from hyperpod_dpd.infra.monitoring import DpdMonitoring
from hyperpod_dpd.infra.observability import ObservabilityDestination
from hyperpod_dpd.infra.operations_access import OperationsAccess
from hyperpod_dpd.infra.platform import (
    HyperPodDpdPlatform,
    PlatformResources,
    availability_zone_context,
    availability_zones,
    build_endpoints,
    build_network,
    build_platform,
)

__all__ = [
    "ChecksRole",
    "ChecksRunner",
    "EfaNetwork",
    "HyperPodCluster",
    "HyperPodDependencies",
    "HyperPodDpdChecks",
    "HyperPodDpdPlatform",
    "HyperPodEksCluster",
    "InferenceOperator",
    "ObservabilityOptions",
    "PlatformResources",
    "Settings",
    "apply_guardrails",
    "availability_zone_context",
    "availability_zones",
    "build_endpoints",
    "build_network",
    "build_platform",
    "DpdMonitoring",
    "ObservabilityDestination",
    "OperationsAccess",
]
