"""HyperPod Inference Operator releases, its EKS add-on, prerequisites and the DPD worker images.

Sources: SageMaker HyperPod inference release notes (v2.3 ... v3.4), the DPD page and blog (2026-07-10), the
``hyperpod-inference-operator`` Helm chart 2.2.2 in aws/sagemaker-hyperpod-cli @ 011ca927, and the chart bumps of
that repository for 3.5-3.7 (pull requests #455, #461, #464, #466).
The add-on <-> operator mapping comes from the upgrade commands in the release notes (3.0-3.4); see the table for 3.5+.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from hyperpod_dpd.catalogue.caches import (
    AFFINITY_SOURCE,
    IMAGE_CACHE_PATH,
    MODEL_CACHE_RELEASE,
    MODEL_CACHE_SOURCE,
    NODE_AFFINITY_SCHEMA,
    WEIGHTS_CACHE_AFFINITY_PATH,
    WEIGHTS_CACHE_AFFINITY_RELEASE,
    WEIGHTS_CACHE_PATH,
)
from hyperpod_dpd.catalogue.versions import AddonVersion, parse_addon_version

INFERENCE_ADDON = "amazon-sagemaker-hyperpod-inference"
# The add-on's namespace, where the operator also runs each IEC's router Deployment and Service (the DPD page,
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html).
INFERENCE_NAMESPACE = "hyperpod-inference-system"
# The two DPD roles of an InferenceEndpointConfig (pdSpec.prefillSpec / decodeSpec), in that order.
DpdRole = Literal["prefill", "decode"]
DPD_ROLES: tuple[DpdRole, DpdRole] = ("prefill", "decode")
# Kubernetes names shared by the charts (hyperpod_dpd.k8s) and the CLI (hyperpod_dpd.ops), which must not import
# the charts' package (it starts cdk8s's jsii runtime).
DPD_ROLE_LABEL = "inference.sagemaker.aws.amazon.com/dpd-role"  # the operator's label on DPD pods (DPD page)
ENDPOINT_LABEL = "hyperpod-dpd/endpoint"  # hyperpod-dpd's labels on every object it renders
GENERATION_LABEL = "hyperpod-dpd/generation"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "hyperpod-dpd"
GPU_RESOURCE = "nvidia.com/gpu"  # the DPD page's per-role requests; advertised by the NVIDIA device plugin
EFA_RESOURCE = "vpc.amazonaws.com/efa"  # advertised by the EFA device plugin (EKS user guide, "Manage EFA devices")
OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
OBSERVABILITY_ADDON_VERSION = "v1.0.5-eksbuild.1"
# The add-on's namespace (SageMaker HyperPod observability add-on documentation; the DPD dashboards need it).
OBSERVABILITY_NAMESPACE = "hyperpod-observability"
OBSERVABILITY_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
# How AWS's own install configures the observability add-on: aws/sagemaker-hyperpod-cluster-setup,
# eks/cloudformation/observability-template.yaml (read at commits 12abe330, 14144a48 and 0ab564d7) and the add-on update Lambda
# eks/cloudformation/resources/observability-eksaddon-update-lambda-function/lambda_function/lambda_function.py
# (b94d78ef), which adds "amgWorkspace". AWS publishes no configuration schema for the add-on (none in the add-on's
# documentation, none in that repository), so OBSERVABILITY_CONFIGURATION_SCHEMA below is derived from those templates.
OBSERVABILITY_SCRAPE_INTERVAL = 30  # seconds; every category in every version of the template
# Metric categories with the template's default level and its AllowedValues. Only the categories that every version
# of the template sends; the others differ between versions ("customMetrics" at 12abe33/14144a4 is "clusterMetrics"
# at 0ab564d, "rayMetrics" appears at 14144a4) and are left to the add-on's defaults.
OBSERVABILITY_METRIC_LEVELS: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType({
    "trainingMetrics": ("BASIC", ("BASIC", "ADVANCED")),  # TrainingMetricLevel
    "inferenceMetrics": ("BASIC", ("BASIC",)),  # fixed in the template
    "taskGovernanceMetrics": ("DISABLED", ("DISABLED", "ADVANCED")),  # TaskGovernanceMetricLevel
    "scalingMetrics": ("DISABLED", ("DISABLED", "ADVANCED")),  # ScalingMetricLevel
    "nodeMetrics": ("BASIC", ("BASIC", "ADVANCED")),  # NodeMetricLevel
    "acceleratedComputeMetrics": ("BASIC", ("BASIC", "ADVANCED")),  # AcceleratedComputeMetricLevel
    "networkMetrics": ("DISABLED", ("DISABLED", "ADVANCED")),  # NetworkMetricLevel
})
_VERSION_DEPENDENT_METRICS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "customMetrics": ("BASIC", "ADVANCED"), "clusterMetrics": ("BASIC", "ADVANCED"),  # ClusterMetricLevel
    "rayMetrics": ("DISABLED", "ADVANCED"),  # RayMetricLevel
})
# The template tags the workspace and the add-on with this.
OBSERVABILITY_TAGS: Mapping[str, str] = MappingProxyType({"SageMaker": "true"})
# Regions where the template creates Amazon Managed Grafana (its AMGRegionMapping).
GRAFANA_REGIONS: tuple[str, ...] = ("us-east-1", "us-east-2", "us-west-2", "ap-northeast-1", "ap-southeast-1",
                                    "ap-southeast-2", "eu-central-1", "eu-west-1", "eu-west-2")


def _metric_schema(levels: tuple[str, ...]) -> dict[str, object]:
    return {"type": "object", "additionalProperties": False, "required": ["level", "scrapeInterval"],
            "properties": {"level": {"enum": list(levels)}, "scrapeInterval": {"type": "integer", "minimum": 1}}}


# Derived from the templates above, not published by AWS. Patterns are loose enough for CloudFormation tokens
# (checked again on the synthesized, resolved values). "logging" is a top-level key at 12abe33 and 14144a4 and sits
# inside "metricsProvider" at 0ab564d; the toolkit sends it only when logging is switched on, top-level.
OBSERVABILITY_CONFIGURATION_SCHEMA: Mapping[str, object] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["ampWorkspace", "metricsProvider"],
    "properties": {
        "ampWorkspace": {
            "type": "object", "additionalProperties": False, "required": ["prometheusEndpoint", "arn"],
            "properties": {
                "prometheusEndpoint": {"type": "string", "pattern": r"^https://aps-workspaces\.[^/]+/workspaces/[^/]+$"},
                "arn": {"type": "string", "pattern": r"^arn:[^:]+:aps:[^:]+:[^:]+:workspace/[^/]+$"}}},
        "metricsProvider": {
            "type": "object", "additionalProperties": False,
            "properties": {**{name: _metric_schema(allowed) for name, (_, allowed) in OBSERVABILITY_METRIC_LEVELS.items()},
                           **{name: _metric_schema(allowed) for name, allowed in _VERSION_DEPENDENT_METRICS.items()}}},
        "amgWorkspace": {
            "type": "object", "additionalProperties": False, "required": ["workspaceName", "arn"],
            "properties": {"workspaceName": {"type": "string", "minLength": 1},
                           "arn": {"type": "string", "pattern": r"^arn:[^:]+:grafana:[^:]+:[^:]+:/workspaces/[^/]+$"}}},
        "logging": {"type": "object", "additionalProperties": False, "required": ["enabled"],
                    "properties": {"enabled": {"type": "boolean"}}},
    },
}

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
    # 3.5-3.7: no release notes with upgrade commands were found, so the add-on builds follow the documented scheme
    # (each release one add-on minor up: 3.2 v1.3.0, 3.3 v1.4.0, 3.4 v1.5.0) and are NOT confirmed by AWS. The dates
    # are those of the public Helm chart bumps. `hpdpd preflight` fails with the offered versions if a pin is wrong.
    # aws/sagemaker-hyperpod-cli #455 (chart 2.5.0, image v3.5, merged 2026-09-01)
    OperatorRelease("3.5", "v1.6.0-eksbuild.1", "2026-09-01", True, "node affinity for the model weights cache"),
    # aws/sagemaker-hyperpod-cli #461 (chart 2.6.0, image v3.6, merged 2026-09-09)
    OperatorRelease("3.6", "v1.7.0-eksbuild.1", "2026-09-09", True,
                    "opt-in inference gateway, kubernetes.podTemplateAnnotations"),
    # aws/sagemaker-hyperpod-cli #464 (image v3.7, merged 2026-09-17) and #466 (chart 2.7.0)
    OperatorRelease("3.7", "v1.8.0-eksbuild.1", "2026-09-17", True,
                    "tolerations, lmcache.mode, operator priority class, CloudWatch log sidecar"),
    # The add-on's v2.x line (v2.0.0-eksbuild.2 and later bundle the Inference Gateway) carries an operator release
    # AWS has not published: its builds are in hyperpod_dpd/catalogue/gateway.py (GATEWAY_ADDON_BUILDS), selected
    # with operator.addon_version, not rows here.
)})
DPD_MINIMUM_OPERATOR = "3.2"
DPD_MINIMUM_ADDON = OPERATOR_RELEASES[DPD_MINIMUM_OPERATOR].addon
DEFAULT_OPERATOR = "3.7"  # the newest known


def release_key(version: str) -> tuple[int, ...]:
    """``"3.1.2"`` -> ``(3, 1, 2)``; ``"3.7"`` -> ``(3, 7, 0)``: operator versions in numeric order."""
    parts = tuple(int(p) for p in version.split("."))
    return parts + (0,) * (3 - len(parts))


def supports(operator: str, introduced: str) -> bool:
    """Whether operator release ``operator`` has what release ``introduced`` added."""
    return release_key(operator) >= release_key(introduced)


@dataclass(frozen=True)
class CrdField:
    """An ``InferenceEndpointConfig`` field newer than the vendored CRD (operator 3.3, ``k8s/crds/SOURCES.md``): its
    dotted JSON path, the operator release that added it, where that is documented, and its ``openAPIV3Schema`` shape
    (for the manifest checks)."""

    path: str
    introduced: str
    source: str
    schema: Mapping[str, Any]
    # True for a field the vendored CRD declares already but an endpoint section renders by patch (model_cache:
    # hyperpod_dpd/catalogue/caches.py): gated and rendered like the others, not added to the schema.
    declared: bool = False


# The Kubernetes core Toleration, as controller-gen writes []corev1.Toleration into a CRD.
_TOLERATIONS_SCHEMA: Mapping[str, Any] = {"type": "array", "items": {"type": "object", "properties": {
    "effect": {"type": "string"}, "key": {"type": "string"}, "operator": {"type": "string"},
    "tolerationSeconds": {"type": "integer", "format": "int64"}, "value": {"type": "string"}}}}

# The one list of IEC fields rendered beyond the vendored CRD: k8s/extensions.py renders them with JSON patches and
# adds them to the schema the manifest validation uses; the endpoint checks gate them on operator.version.
# The newest public CRD is operator 3.3's (chart 2.3.0, aws/sagemaker-hyperpod-cli @ 0986f2cc); none of 3.4-3.7 was
# found, so these paths and shapes are inferred from the chart pull requests, not read from a CRD. If a release puts
# one elsewhere, kubectl's strict field validation fails the deploy with "unknown field" (the kubectl provider applies
# without --validate=false) instead of dropping it; extend_schema raises once a vendored CRD declares one.
IEC_EXTENSION_FIELDS: Mapping[str, CrdField] = MappingProxyType({f.path: f for f in (
    CrdField("spec.kubernetes.podTemplateAnnotations", "3.6",
             "aws/sagemaker-hyperpod-cli #461: 'IEC spec.kubernetes.podTemplateAnnotations'",
             {"type": "object", "additionalProperties": {"type": "string"}}),
    CrdField("spec.tolerations", "3.7",
             "aws/sagemaker-hyperpod-cli #464: 'InferenceEndpointConfig and JumpStartModel CRDs now support "
             "tolerations' (path not stated: a spec-level []Toleration is inferred, UNCONFIRMED)", _TOLERATIONS_SCHEMA),
    CrdField("spec.lmcache", "3.7",
             "aws/sagemaker-hyperpod-cli #464: 'lmcache.mode (InProcess | MultiProcess)'",
             {"type": "object", "properties": {"mode": {"type": "string", "enum": ["InProcess", "MultiProcess"]}}}),
    # The host-local caches (hyperpod_dpd/catalogue/caches.py has the sources): declared by the vendored 3.3 CRD, and
    # the weights cache's node affinity of 3.5 (path inferred, UNCONFIRMED).
    CrdField(WEIGHTS_CACHE_PATH, MODEL_CACHE_RELEASE, MODEL_CACHE_SOURCE, {}, declared=True),
    CrdField(IMAGE_CACHE_PATH, MODEL_CACHE_RELEASE, MODEL_CACHE_SOURCE, {}, declared=True),
    CrdField(WEIGHTS_CACHE_AFFINITY_PATH, WEIGHTS_CACHE_AFFINITY_RELEASE, AFFINITY_SOURCE, NODE_AFFINITY_SCHEMA),
)})


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
DOCUMENTED_IMAGE_LMCACHE = "0.4.3"  # what both documented DPD images ship
# lmcache.mode MultiProcess runs an LMCache server sidecar and needs LMCache 0.5.0 or later (sagemaker-hyperpod-cli #464).
LMCACHE_MULTIPROCESS_MINIMUM = "0.5.0"
# ASSUMPTION: the tag of lmcache/vllm-openai images is the LMCache version they ship (v0.4.3 ships LMCache 0.4.3).
_LMCACHE_IMAGE_TAG = re.compile(r"(?:[^/]+/)*lmcache/vllm-openai:v(\d+\.\d+\.\d+)")
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
# The kvaware version matrix of the "KV caching and intelligent routing" page
# (docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-caching-routing): operator >= 3.1.3
# (add-on v1.2.1-eksbuild.1) with LMCache >= 0.4.3 and vLLM >= 0.19.1; older operators pair with LMCache 0.3.9post2 and
# vLLM 0.11.1. DPD needs operator 3.2 anyway (DPD_MINIMUM_OPERATOR), so the image's versions are what can fall short.
KVAWARE_MIN_VLLM = "0.19.1"
KVAWARE_MIN_LMCACHE = "0.4.3"
# What both documented DPD images ship (the DPD page, sagemaker-hyperpod-model-deployment-dpd: "LMCache 0.4.3, vLLM
# 0.19.0, NIXL 1.0.0"): so kvaware is known not to run on them (0.19.0 < 0.19.1).
DOCUMENTED_IMAGE_VLLM = "0.19.0"
# Flags the toolkit derives from typed fields; setting them in free-form args would desynchronise GPU requests.
MANAGED_VLLM_FLAGS = ("--model", "--host", "--port", "--tensor-parallel-size")
# The router Service the operator creates per IEC, in its namespace: <iec>-<namespace>-routing-service:443 (the DPD
# page's invocation example, http://<iec>-<namespace>-routing-service.hyperpod-inference-system.svc.cluster.local:443).
ROUTER_SERVICE_SUFFIX = "-routing-service"
ROUTER_PORT = 443


def router_service(iec: str, namespace: str) -> str:
    """The router Service the operator creates for an IEC, in INFERENCE_NAMESPACE (SageMaker HyperPod DPD page)."""
    return f"{iec}-{namespace}{ROUTER_SERVICE_SUFFIX}"


def router_host(iec: str, namespace: str) -> str:
    """The in-cluster DNS name of that Service (the docs call it with http on ROUTER_PORT)."""
    return f"{router_service(iec, namespace)}.{INFERENCE_NAMESPACE}.svc.cluster.local"


def router_url(iec: str, namespace: str, path: str) -> str:
    return f"http://{router_host(iec, namespace)}:{ROUTER_PORT}/{path.lstrip('/')}"


def operator_for_addon(version: str) -> OperatorRelease | None:
    """The newest known operator release whose add-on version is at or below ``version``."""
    parsed = parse_addon_version(version)
    known = [r for r in OPERATOR_RELEASES.values() if r.addon <= parsed]
    return max(known, key=lambda r: r.addon) if known else None


def image_lmcache_version(image: str) -> str | None:
    """The LMCache version ``image`` ships, when the catalogue or the image tag says; None when unknown."""
    if image in DPD_WORKER_IMAGES:
        return DOCUMENTED_IMAGE_LMCACHE
    match = _LMCACHE_IMAGE_TAG.fullmatch(image)
    return match.group(1) if match else None


def image_vllm_version(image: str) -> str | None:
    """The vLLM version ``image`` ships, when the catalogue says (the documented DPD images); None when unknown. An
    lmcache/vllm-openai tag names the LMCache release, not vLLM's, so no tag is read for it."""
    return DOCUMENTED_IMAGE_VLLM if image in DPD_WORKER_IMAGES else None


# A release version of vLLM or LMCache as the projects tag them: MAJOR.MINOR.PATCH, optionally a post release
# ("0.3.9post2" in the kvaware matrix above, "0.3.9.post2" in PEP 440 spelling). Pre-releases (rc, dev) are not
# accepted: whether one has what its final release adds is unknown, so it cannot lift a version gate.
COMPONENT_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?")


def component_version_key(version: str) -> tuple[int, int, int, int]:
    """``"0.19.1"`` -> ``(0, 19, 1, 0)``, ``"0.3.9post2"`` -> ``(0, 3, 9, 2)``; ``ValueError`` for another form."""
    match = COMPONENT_VERSION.fullmatch(version)
    if match is None:
        raise ValueError(f"{version!r} is not a release version like '0.19.1'")
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch), int(post or 0)


def at_least(version: str, minimum: str) -> bool:
    """Whether component release ``version`` is ``minimum`` or later."""
    return component_version_key(version) >= component_version_key(minimum)
