"""HyperPod Inference Operator releases, its EKS add-on, prerequisites and the DPD worker images.

Sources: SageMaker HyperPod inference release notes (v2.3 ... v3.4), the DPD page and blog (2026-07-10), and the
``hyperpod-inference-operator`` Helm chart 2.2.2 in aws/sagemaker-hyperpod-cli @ 011ca927.
The add-on <-> operator mapping comes from the upgrade commands in the release notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hyperpod_dpd.catalogue.versions import AddonVersion, parse_addon_version

INFERENCE_ADDON = "amazon-sagemaker-hyperpod-inference"
INFERENCE_NAMESPACE = "hyperpod-inference-system"
OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
OBSERVABILITY_ADDON_VERSION = "v1.0.5-eksbuild.1"
OBSERVABILITY_NAMESPACE = "hyperpod-observability"
OBSERVABILITY_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
# The execution role's name must start with this: the managed policy passes only such roles, and the add-on
# rejects other names.
EXECUTION_ROLE_PREFIX = "SageMakerHyperPodInference"
EXECUTION_ROLE_MANAGED_POLICY = "AmazonSageMakerHyperPodInferenceAccess"
GATED_MODEL_MANAGED_POLICY = "AmazonSageMakerHyperPodGatedModelAccess"
# The managed policy grants S3 only on buckets named hyperpod-tls*.
TLS_BUCKET_PREFIX = "hyperpod-tls-"


@dataclass(frozen=True)
class OperatorRelease:
    operator: str
    addon_version: str
    released: str
    dpd: bool
    notes: str

    @property
    def addon(self) -> AddonVersion:
        return parse_addon_version(self.addon_version)


OPERATOR_RELEASES: Mapping[str, OperatorRelease] = MappingProxyType({r.operator: r for r in (
    OperatorRelease("3.0", "v1.0.0-eksbuild.1", "2026-02-23", False, "EKS add-on introduced"),
    OperatorRelease("3.1.2", "v1.2.0-eksbuild.1", "2026-05-06", False, "hyperpodClusterArn mandatory"),
    OperatorRelease("3.1.3", "v1.2.1-eksbuild.1", "2026", False, "minimum for the vLLM 0.19.1 kvaware stack"),
    OperatorRelease("3.2", "v1.3.0-eksbuild.1", "2026-06-12", True, "pdSpec (disaggregated prefill/decode)"),
    OperatorRelease("3.3", "v1.4.0-eksbuild.1", "2026-08-04", True, "modelCacheConfig, enableL1Cache=false honoured"),
    OperatorRelease("3.4", "v1.5.0-eksbuild.1", "2026-08-21", True, "sidecar resource overrides"),
)})
DPD_MINIMUM_OPERATOR = "3.2"
DPD_MINIMUM_ADDON = OPERATOR_RELEASES[DPD_MINIMUM_OPERATOR].addon
DEFAULT_OPERATOR = "3.4"  # the newest known


@dataclass(frozen=True)
class PrerequisiteAddon:
    """An EKS add-on that must be ACTIVE before the inference add-on (its init container checks for them)."""

    name: str
    minimum: str
    pinned: str
    service_account: str | None  # namespace:name of the IRSA service account, if the add-on needs AWS access

    @property
    def minimum_version(self) -> AddonVersion:
        return parse_addon_version(self.minimum)


PREREQUISITE_ADDONS: tuple[PrerequisiteAddon, ...] = (
    PrerequisiteAddon("aws-mountpoint-s3-csi-driver", "v1.14.1-eksbuild.1", "v1.14.1-eksbuild.1", "kube-system:s3-csi-driver-sa"),
    PrerequisiteAddon("aws-fsx-csi-driver", "v1.6.0-eksbuild.1", "v1.6.0-eksbuild.1", "kube-system:fsx-csi-controller-sa"),
    PrerequisiteAddon("metrics-server", "v0.7.2-eksbuild.4", "v0.7.2-eksbuild.4", None),
    PrerequisiteAddon("cert-manager", "v1.18.2-eksbuild.2", "v1.18.2-eksbuild.2", None),
)

# Images that ship LMCache 0.4.3, vLLM 0.19.0, NIXL 1.0.0 and the EFA libfabric provider (DPD page).
DPD_WORKER_IMAGES: tuple[str, ...] = (
    "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1",
    "lmcache/vllm-openai:v0.4.3",
)
DEFAULT_WORKER_IMAGE = DPD_WORKER_IMAGES[0]
DEFAULT_ROUTING_THRESHOLD = 4096
DEFAULT_PD_BUFFER_SIZE = 8 * 1024**3  # bytes, per tensor-parallel rank on the decoder
MAX_DECODE_REPLICAS = 1  # the current release supports one decoder per endpoint (DPD page)

# Worker environment of both roles: the decoder's KV receive buffer (per tensor-parallel rank), no re-caching on the
# decoder (the prefiller owns cache hits), and one hash seed, because LMCache keys its cache with Python hash().
PD_BUFFER_SIZE_VARIABLE = "PD_BUFFER_SIZE"
DPD_FIXED_ENVIRONMENT: Mapping[str, str] = MappingProxyType({"LMCACHE_SAVE_DECODE_CACHE": "False", "PYTHONHASHSEED": "0"})
DPD_ENVIRONMENT_VARIABLES = (PD_BUFFER_SIZE_VARIABLE, *DPD_FIXED_ENVIRONMENT)
DEFAULT_INVOCATION_PATH = "v1/chat/completions"  # the documented DPD example
DEFAULT_GPU_MEMORY_UTILIZATION = 0.75  # DPD tuning table; higher leaves more KV room but the prefiller may OOM
DEFAULT_HEALTH_CHECK_PATH = "/health"  # vLLM's route; the CRD default /ping does not exist in vLLM
PAYOFF_MIN_PARAMETERS_BILLION = 70  # "dense models of 70B+ parameters"
KVAWARE_INVOCATION_PATHS = ("completions", "v1/completions")  # kvaware does not support chat completions
KVAWARE_MIN_VLLM = "0.19.1"
DOCUMENTED_IMAGE_VLLM = "0.19.0"  # what both documented DPD images ship
# Flags the toolkit derives from typed fields; setting them in free-form args would desynchronise GPU requests.
MANAGED_VLLM_FLAGS = ("--model", "--host", "--port", "--tensor-parallel-size")
# The router Service the operator creates per IEC, in its namespace: <iec>-<namespace>-routing-service:443.
ROUTER_SERVICE_SUFFIX = "-routing-service"
ROUTER_PORT = 443


def operator_for_addon(version: str) -> OperatorRelease | None:
    """The newest known operator release whose add-on version is at or below ``version``."""
    parsed = parse_addon_version(version)
    known = [r for r in OPERATOR_RELEASES.values() if r.addon <= parsed]
    return max(known, key=lambda r: r.addon) if known else None
