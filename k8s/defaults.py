"""Fixed values of the Kubernetes side: the worker container layout, pod sizing, and the operator's labels.

Figures come from the documented DPD example (SageMaker HyperPod DPD documentation) and the operator's naming (same page); endpoint-level
defaults (image, threshold, buffer, strategy) live in ``hyperpod_dpd.catalogue`` and ``hyperpod_dpd.config.endpoints``.
"""

from __future__ import annotations

# The vLLM worker as in the documented example: the server listens on 8000 and reads the weights the operator mounts.
MODEL_PORT = 8000
MODEL_PORT_NAME = "http"
MODEL_VOLUME_NAME = "model-weights"
MODEL_MOUNT_PATH = "/opt/ml/model"
LISTEN_ALL = "0.0.0.0"  # noqa: S104 - vLLM must accept the operator's Nginx sidecar and the router
GPU_RESOURCE = "nvidia.com/gpu"
# Share of the host's vCPUs and memory a pod using all GPUs requests: the example asks 96 vCPU / 1024 GiB of
# ml.p5.48xlarge's 192 / 2048, leaving room for the operator's sidecars, the device plugins and the kubelet.
HOST_SHARE = 0.5

# Labels the operator puts on DPD pods (documented: the DPD page selects pods with it).
DPD_ROLE_LABEL = "inference.sagemaker.aws.amazon.com/dpd-role"
DPD_ROLES = ("prefill", "decode")

# Labels hyperpod-dpd puts on every object it renders.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "hyperpod-dpd"
ENDPOINT_LABEL = "hyperpod-dpd/endpoint"
GENERATION_LABEL = "hyperpod-dpd/generation"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def router_pod_labels(resource_name: str, namespace: str) -> dict[str, str]:
    """ASSUMPTION (undocumented): the router pods of an IEC carry ``app=<iec-name>-<iec-namespace>-router``.

    The docs name only the router Deployment (``<iec-name>-<iec-namespace>-router-...``). Check with
    ``kubectl get pods -n hyperpod-inference-system --show-labels`` and override with ``router.router_pod_labels``.
    A wrong guess selects no pod, so the router NetworkPolicy then has no effect (it fails open, never closed).
    """
    return {"app": f"{resource_name}-{namespace}-router"}
