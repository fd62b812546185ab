"""The KV cache tiers of an ``InferenceEndpointConfig`` (``spec.kvCacheSpec``) and what each operator release does with
them, with the cluster setting the managed tier needs (``TieredStorageConfig`` of ``AWS::SageMaker::Cluster``).

Sources:

* CRD: ``kvCacheSpec.enableL1Cache`` (default true), ``enableL2Cache`` (default false), ``l2CacheSpec.l2CacheBackend``
  (pattern ``(?i)redis|tieredstorage``, "Required when L2CacheSpec is provided"), ``l2CacheSpec.l2CacheLocalUrl``,
  ``cacheConfigFile`` ("If specified, override other configurations"): the vendored CRD, ``k8s/crds/`` (operator 3.3,
  aws/sagemaker-hyperpod-cli @ 0986f2cc; 3.2's file at 011ca927 has the same block).
* "KV caching and intelligent routing", SageMaker developer guide,
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing.html: L2 "leverages
  Redis or managed tiered storage"; ``l2CacheLocalUrl`` is the Redis cluster URL and "is not needed if tieredstorage is
  selected"; a Redis cluster outside the HyperPod cluster's VPC gets no guaranteed encryption in transit; the managed
  tiered-storage L2 is shared by all deployments in a cluster with no isolation, and KV data is not encrypted at rest
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing.html).
* aws/sagemaker-hyperpod-cli issue #431 (open), https://github.com/aws/sagemaker-hyperpod-cli/issues/431: operator
  ``v3.2.0`` (add-on ``v1.3.0-eksbuild.1``) ignores ``l2CacheBackend: redis``; it injects
  ``LMCACHE_REMOTE_URL=sagemaker-hyperpod://$(NODE_IP):9200`` and ``LMCACHE_EXTRA_CONFIG`` naming the shared memory
  ``ai_toolkit_cache`` (the managed tier's connector), and strips ``LMCACHE_*`` from ``worker.environmentVariables``.
  Without the host daemon behind that connector, LMCache runs degraded.
* ``AWS::SageMaker::Cluster`` ``TieredStorageConfig`` (its CloudFormation registry schema, as cfn-lint
  1.58 ships it; botocore 1.44.8 ``ClusterTieredStorageConfig``): ``Mode`` (required, ``Enable`` |
  ``Disable``; "When set to Enable, the system installs a memory management daemon that provides disaggregated memory
  as a service"), ``InstanceMemoryAllocationPercentage`` (integer 0-100, optional). Not among the schema's
  ``createOnlyProperties`` (ClusterName, VpcConfig, Orchestrator/Eks): the CloudFormation reference says "Update
  requires: No interruption", so the share changes in place.
* The tiered-storage daemon on the GPU node (``sagemaker-hyperpod://$(NODE_IP):9200``, shared memory
  ``/dev/shm/ai_toolkit_cache``) is what cluster tiered storage installs: awslabs "AI on SageMaker HyperPod",
  https://awslabs.github.io/ai-on-sagemaker-hyperpod/docs/eks-orchestration/inference/bring-your-own-inference-framework/hyperpod-managed-kv-cache-with-lmcache
  ("When creating or updating a HyperPod cluster, tiered storage is enabled with a TieredStorageConfig block",
  example ``{"Mode": "Enable", "InstanceMemoryAllocationPercentage": 20}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from hyperpod_dpd.catalogue.operator import OPERATOR_RELEASES, supports

L2Backend = Literal["tieredstorage", "redis"]
L2_BACKENDS: tuple[L2Backend, ...] = ("tieredstorage", "redis")
REDIS_ISSUE_URL = "https://github.com/aws/sagemaker-hyperpod-cli/issues/431"
CACHING_PAGE_URL = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                    "sagemaker-hyperpod-model-deployment-caching-routing.html")

# enableL1Cache: false is honoured from operator 3.3 on; earlier releases ignore it and keep L1 on (the 3.3 row of
# OPERATOR_RELEASES, "enableL1Cache=false honoured", from the SageMaker HyperPod inference release notes).
L1_OFF_RELEASE = "3.3"

# AWS::SageMaker::Cluster TieredStorageConfig (CloudFormation registry schema; botocore ClusterTieredStorageConfig).
TIERED_STORAGE_MODES = ("Enable", "Disable")
TIERED_STORAGE_PERCENT_MIN = 0  # InstanceMemoryAllocationPercentage: minimum 0
TIERED_STORAGE_PERCENT_MAX = 100  # maximum 100
# The AWS::SageMaker::Cluster properties that replace the cluster when they change (createOnlyProperties); the
# TieredStorageConfig is not among them, so a changed share updates the cluster in place.
CLUSTER_CREATE_ONLY = ("/properties/ClusterName", "/properties/VpcConfig", "/properties/Orchestrator/Eks")


@dataclass(frozen=True)
class L2BackendFacts:
    """What the operator releases do with one ``l2CacheBackend``.

    ``honoured_from``: the first catalogued release known to wire the backend, or None when no source confirms any
    release does. ``ignored_in``: releases known to drop it. ``needs_url``: whether ``l2CacheLocalUrl`` is its address.
    ``cluster_tiered_storage``: whether the cluster must run tiered storage (its daemon backs the tier).
    """

    backend: L2Backend
    honoured_from: str | None
    ignored_in: tuple[str, ...]
    needs_url: bool
    cluster_tiered_storage: bool
    source: str


L2_BACKEND_FACTS: Mapping[str, L2BackendFacts] = MappingProxyType({f.backend: f for f in (
    # Documented for the operator on the caching page with no release bound. Operator 3.2.0 is observed wiring its
    # connector (issue #431, even for 'redis'), and 3.2 is the first release with pdSpec (DPD_MINIMUM_OPERATOR), so
    # every DPD release of the catalogue (3.2-3.7) renders it; no release note removes it.
    L2BackendFacts("tieredstorage", "3.2", (), needs_url=False, cluster_tiered_storage=True,
                   source=f"{CACHING_PAGE_URL}; {REDIS_ISSUE_URL} (3.2.0 injects the sagemaker-hyperpod connector)"),
    # Ignored by 3.2 (issue #431, open). No release note or chart change of 3.3-3.7 says it was fixed, so no release
    # is confirmed to honour it: refused everywhere until a source confirms one.
    L2BackendFacts("redis", None, ("3.2",), needs_url=True, cluster_tiered_storage=False,
                   source=f"{REDIS_ISSUE_URL} (operator v3.2.0 ignores l2CacheBackend: redis; open)"),
)})


def backend_refusal(backend: str, operator: str) -> str | None:
    """Why operator release ``operator`` cannot serve L2 backend ``backend`` (one sentence with its source), or None."""
    facts = L2_BACKEND_FACTS.get(backend.lower())
    if facts is None:
        return f"is not an L2 cache backend; allowed: {', '.join(L2_BACKENDS)}"
    if operator in facts.ignored_in:
        return (f"is ignored by operator {operator}: it wires the managed tiered-storage connector instead "
                f"(LMCACHE_REMOTE_URL=sagemaker-hyperpod://...) and drops the Redis URL, see {REDIS_ISSUE_URL}; use "
                "'tieredstorage'")
    if facts.honoured_from is None:
        return (f"is not confirmed to be honoured by operator {operator}: 3.2 ignores it ({REDIS_ISSUE_URL}, still "
                "open) and no later release says it was fixed; use 'tieredstorage'")
    if operator not in OPERATOR_RELEASES or not supports(operator, facts.honoured_from):
        return f"needs operator {facts.honoured_from} or later (operator is \"{operator}\")"
    return None
