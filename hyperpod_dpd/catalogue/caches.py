"""The operator's host-local caches (model weights on NVMe, the worker image) and the facts a cold start is read from.

Sources:

* ``InferenceEndpointConfig`` ``spec.modelCacheConfig`` of operator 3.3: the CRD of the ``hyperpod-inference-operator``
  Helm chart 2.3.0 (appVersion 3.3), aws/sagemaker-hyperpod-cli @ 0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b,
  ``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml``
  (vendored as ``k8s/crds/``): ``weightsCache.{enabled (default false), hostPath (default /opt/dlami/nvme, 1-255
  characters)}``, ``imageCache.enabled`` (required in ``imageCache``: "the operator creates a ModelImageCache resource
  that pins the inference server image on target nodes", "pre-pulls ... onto target nodes via a DaemonSet").
* The AWS page "Model weights caching and image caching" (sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-
  model-caching): weights are pre-populated "on host-local NVMe storage on each eligible node"; both caches are set
  "through the modelCacheConfig field on your InferenceEndpointConfig or JumpStartModel".
* ``ModelWeightsCacheConfig`` (namespaced, ``inference.sagemaker.aws.amazon.com/v1``) and ``ModelImageCache``: CRDs
  of the same chart and commit (``..._modelweightscacheconfigs.yaml``, ``..._modelimagecaches.yaml``). The weights
  cache's own resource has ``nodeAffinity`` (core ``NodeAffinity``: "Node affinity for cache population scheduling"),
  ``nodeSelector``, and status ``state`` / ``readyNodes`` / ``targetNodes``. The operator creates these from the IEC;
  the toolkit renders only the IEC field.
* Operator 3.5: aws/sagemaker-hyperpod-cli pull request #455 (chart 2.5.0, merged 2026-09-01): "adds the
  weights-cache node affinity field to the inference-operator CRDs". Its path and shape in the IEC are NOT published
  in any source found (no CRD of 3.4 or later is public): :data:`WEIGHTS_CACHE_AFFINITY_PATH` is inferred as the IEC
  counterpart of ``ModelWeightsCacheConfig.spec.nodeAffinity``, with that field's shape. UNCONFIRMED: if 3.5 puts it
  elsewhere, the API server's strict field validation refuses the IEC with "unknown field" (see
  ``IEC_EXTENSION_FIELDS``), it is not dropped silently.
* Local NVMe of each instance type: EC2 ``DescribeInstanceTypes`` ``InstanceStorageInfo`` (the copy moto 5.2.5 ships;
  ``tests/hyperpod_dpd/catalogue/test_caches.py`` compares).
* Kubelet wording of image events: kubernetes/kubernetes ``pkg/kubelet/images/image_manager.go`` (``Pulling image %q``;
  ``Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.``; older releases end after
  ``including waiting)``; ``Container image %q already present on machine``), reasons ``Pulling`` / ``Pulled``
  (``pkg/kubelet/events/event.go``); pod conditions ``PodScheduled``, ``Initialized``, ``ContainersReady``, ``Ready``
  (core/v1 ``PodConditionType``); the kube-apiserver keeps events for ``--event-ttl`` (default 1h), so an old pod's
  pull events are gone and its image phase is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# -- the IEC fields ---------------------------------------------------------------------------------------------------
MODEL_CACHE_RELEASE = "3.3"  # spec.modelCacheConfig (weightsCache, imageCache): chart 2.3.0 CRD
WEIGHTS_CACHE_AFFINITY_RELEASE = "3.5"  # the weights cache's node affinity: sagemaker-hyperpod-cli #455
WEIGHTS_CACHE_PATH = "spec.modelCacheConfig.weightsCache"
IMAGE_CACHE_PATH = "spec.modelCacheConfig.imageCache"
WEIGHTS_CACHE_AFFINITY_PATH = "spec.modelCacheConfig.weightsCache.nodeAffinity"  # inferred, see the module docstring
DEFAULT_WEIGHTS_HOST_PATH = "/opt/dlami/nvme"  # the CRD's default for weightsCache.hostPath
HOST_PATH_MAX = 255  # weightsCache.hostPath maxLength (minLength 1)

MODEL_CACHE_SOURCE = ("InferenceEndpointConfig CRD, chart 2.3.0 (operator 3.3), aws/sagemaker-hyperpod-cli @ 0986f2cc: "
                      "spec.modelCacheConfig; declared by the vendored CRD, rendered by patch from the endpoint's "
                      "model_cache section")
AFFINITY_SOURCE = ("aws/sagemaker-hyperpod-cli #455: 'adds the weights-cache node affinity field to the "
                   "inference-operator CRDs' (IEC path not stated: weightsCache.nodeAffinity with the shape of "
                   "ModelWeightsCacheConfig.spec.nodeAffinity @ 0986f2cc is inferred, UNCONFIRMED)")

_REQUIREMENT: Mapping[str, Any] = {"type": "object", "required": ["key", "operator"], "properties": {
    "key": {"type": "string"}, "operator": {"type": "string"},
    "values": {"type": "array", "items": {"type": "string"}}}}
_TERM: Mapping[str, Any] = {"type": "object", "properties": {
    "matchExpressions": {"type": "array", "items": _REQUIREMENT},
    "matchFields": {"type": "array", "items": _REQUIREMENT}}}
# core/v1 NodeAffinity as controller-gen writes it in ModelWeightsCacheConfig.spec.nodeAffinity (@ 0986f2cc).
NODE_AFFINITY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {
    "preferredDuringSchedulingIgnoredDuringExecution": {"type": "array", "items": {
        "type": "object", "required": ["preference", "weight"],
        "properties": {"preference": _TERM, "weight": {"type": "integer", "format": "int32"}}}},
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "type": "object", "required": ["nodeSelectorTerms"],
        "properties": {"nodeSelectorTerms": {"type": "array", "items": _TERM}}}}}

# -- local NVMe instance store ------------------------------------------------------------------------------------------
# GB of NVMe instance store (EC2 InstanceStorageInfo.TotalSizeInGB; 8 x 3,800 GB SSD, NvmeSupport "required") per
# HyperPod instance type with any; a type that is not listed has none (the m5/m6i/c6i system types: EC2
# InstanceStorageSupported false).
LOCAL_NVME_GB: Mapping[str, int] = MappingProxyType({
    "ml.p5.48xlarge": 30400,
    "ml.p5e.48xlarge": 30400,
    "ml.p5en.48xlarge": 30400,
    "ml.p6-b200.48xlarge": 30400,
    "ml.p6-b300.48xlarge": 30400,
})


def local_nvme_gb(instance_type: str) -> int:
    """GB of local NVMe instance store of ``instance_type``; 0 when it has none (or is unknown)."""
    return LOCAL_NVME_GB.get(instance_type, 0)


# -- cold-start evidence (core/v1) ---------------------------------------------------------------------------------------
SCHEDULED_CONDITION = "PodScheduled"
INITIALIZED_CONDITION = "Initialized"
CONTAINERS_READY_CONDITION = "ContainersReady"
READY_CONDITION = "Ready"
NODE_READY_CONDITION = "Ready"  # a Node's condition
PULLING_REASON = "Pulling"
PULLED_REASON = "Pulled"
STARTED_REASON = "Started"
ALREADY_PRESENT = "already present on machine"
EVENT_TTL_SECONDS = 3600  # kube-apiserver --event-ttl default
