"""The HyperPod Inference Gateway: the add-on builds that bundle it, its controller's identity, its CRD and its limits.

Sources (each constant names its own):

* GATEWAY_PAGE: the AWS page "Inference Gateway for Amazon SageMaker HyperPod Inference",
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-inference-gateway.md (read
  2026-12 from the stored copy; its sections "Prerequisites and deployment", "Integration with the HyperPod Inference
  Operator", "InferenceGatewayConfig CRD reference" and "Kubernetes RBAC permissions").
* GLOBAL_TS_PAGE: "Global Inference Gateway troubleshooting guide",
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-global-inference-gateway.md
  (``GlobalRoutingInsufficientAZs``).
* aws/sagemaker-hyperpod-cli pull request #461 (chart 2.6.0, operator image v3.6, merged 2026-09-09): "add
  spec/status.inferenceGateway opt-in" to the IEC and JumpStartModel CRDs.

No ``InferenceGatewayConfig`` CRD YAML is published: the operator chart's ``config/crd/`` folder in
aws/sagemaker-hyperpod-cli holds IEC, JumpStartModel, SageMakerEndpointRegistration, ModelImageCache and
ModelWeightsCacheConfig only (every stored version up to chart 2.6.1 at 067d658b). The schema the manifests are
validated with is therefore derived from GATEWAY_PAGE's CRD reference (k8s/crds/SOURCES.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE
from hyperpod_dpd.catalogue.versions import AddonVersion, parse_addon_version

GATEWAY_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-inference-gateway.md"
GATEWAY_TS_PAGE = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                   "sagemaker-hyperpod-model-deployment-ts-inference-gateway.md")
GLOBAL_TS_PAGE = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                  "sagemaker-hyperpod-model-deployment-ts-global-inference-gateway.md")
DPD_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.md"


@dataclass(frozen=True)
class GatewayAddonBuild:
    """A v2.x build of ``amazon-sagemaker-hyperpod-inference``: whether it bundles the gateway, the operator release
    it carries (None: not published) and the evidence."""

    addon_version: str
    gateway: bool
    operator: str | None
    source: str

    @property
    def addon(self) -> AddonVersion:
        return parse_addon_version(self.addon_version)


GATEWAY_ADDON_BUILDS: tuple[GatewayAddonBuild, ...] = (
    # An AWS blog of 2026-09-21, as quoted by a third-party summary, installs the add-on with --addon-version
    # v2.0.0-eksbuild.1 and inferenceGateway.enabled; AWS's own page names eksbuild.2 as the first build with the
    # gateway, so eksbuild.1 is not accepted for it (fail safe).
    GatewayAddonBuild("v2.0.0-eksbuild.1", False, None,
                      "third-party quote of the AWS blog (2026-09-21); below GATEWAY_PAGE's minimum"),
    # GATEWAY_PAGE: "The Inference Gateway is available starting with version v2.0.0-eksbuild.2 of the Amazon
    # SageMaker HyperPod Inference add-on" (and its create-addon command pins it). Which operator release this build
    # carries is NOT published: no release note after v3.4 was found. It carries spec.inferenceGateway, so at least
    # 3.6 (pull request #461); 3.7 (pull request #464, 2026-09-17) is the newest public chart before it. `hpdpd
    # preflight` fails when the pinned build is not offered (hyperpod_dpd/ops/eks_checks.py), the safety net here.
    GatewayAddonBuild("v2.0.0-eksbuild.2", True, None, "GATEWAY_PAGE, 'Add-on version'; operator UNCONFIRMED"),
)
GATEWAY_MINIMUM_ADDON_VERSION = next(b.addon_version for b in GATEWAY_ADDON_BUILDS if b.gateway)
GATEWAY_MINIMUM_ADDON = parse_addon_version(GATEWAY_MINIMUM_ADDON_VERSION)
# The operator release whose CRDs have spec.inferenceGateway (pull request #461): the least a gateway build carries.
GATEWAY_MINIMUM_OPERATOR = "3.6"

# The add-on's configuration values for the gateway (GATEWAY_PAGE, "Install the add-on"): both components enabled,
# the controller's IRSA role as inferenceGateway.serviceAccount.roleArn. Keys of the add-on, not of a Helm chart.
ADDON_OPERATOR_KEY = "inferenceOperator"
ADDON_GATEWAY_KEY = "inferenceGateway"

# The controller (GATEWAY_PAGE, "Set up the certificate issuer IAM role" and "Kubernetes RBAC permissions"): one
# service account in the operator's namespace; its IRSA role must exist before the add-on ("TLS auto-issue is enabled
# by default, and the gateway controller reads this role when it starts. Create the role before you install the
# add-on."), with this AWS managed policy (ACM import, tag, describe, delete of the certificates it creates).
GATEWAY_NAMESPACE = INFERENCE_NAMESPACE
GATEWAY_SERVICE_ACCOUNT = "inference-gateway-controller"
GATEWAY_SUBJECT = f"system:serviceaccount:{GATEWAY_NAMESPACE}:{GATEWAY_SERVICE_ACCOUNT}"
GATEWAY_MANAGED_POLICY = "AmazonSageMakerHyperPodInferenceGatewayAccess"
GATEWAY_CLUSTER_ROLE = "sagemaker-inference-gateway-controller-supplement"  # its cluster-scoped rights
GATEWAY_CLASS = "inference-gateway"  # `kubectl get gatewayclass inference-gateway`

# The CRD (GATEWAY_PAGE, "InferenceGatewayConfig resource metadata").
GATEWAY_GROUP = "inference.sagemaker.aws.amazon.com"
GATEWAY_VERSION = "v1alpha1"
GATEWAY_API_VERSION = f"{GATEWAY_GROUP}/{GATEWAY_VERSION}"
GATEWAY_KIND = "InferenceGatewayConfig"
GATEWAY_PLURAL = "inferencegatewayconfigs"
GATEWAY_SHORT_NAME = "igwc"

# spec limits and defaults (GATEWAY_PAGE, "spec fields" and "SchedulerSpec fields").
BBR_DEFAULT_REPLICAS = 2  # bbr.replicas: minimum 1
BBR_MAX_REQUEST_BODY_BYTES = 268_435_456  # bbr.maxRequestBodyBytes: "Default and maximum" (256 MiB)
DEFAULT_BACKEND_PORT = 8000  # bbr.defaultBackend.port
JWT_AUDIENCES_MAX = 8  # auth.jwt.provider.audiences: "up to 8"
JWT_REQUIRED_CLAIMS_MAX = 16  # requiredClaims: "up to 16 entries"
CLAIM_VALUES_MAX = 128  # each claim's values: 1-128 entries of 1-1024 characters
CLAIM_VALUE_MAX_LENGTH = 1024
CLAIM_VALUE_TYPES = ("String", "StringArray")
SCHEDULERS_MAX = 100  # "At least one scheduler is required, and you can define up to 100"
SCHEDULER_NAME_MAX = 63
MODEL_NAME_MAX = 253
DEFAULT_TARGET_PORT = 8000  # targetPort: 1-65535
APP_PROTOCOLS = ("http", "kubernetes.io/h2c")  # default http
SCHEDULER_TYPES = ("llm-d", "epp")  # default llm-d
ENGINE_TYPES = ("vllm", "sglang")  # default vllm
EPP_DEFAULT_REPLICAS = 2  # replicas: minimum 1; above 1 the Endpoint Picker elects a leader
LORA_ADAPTERS_MAX = 50  # each up to 253 characters
LOG_LEVEL_MAX = 5  # logLevel: 0-5
CONFIGMAP_DEFAULT_KEY = "default-plugins.yaml"  # configMapRef.key


@dataclass(frozen=True)
class ScoringWeight:
    """One Endpoint Picker scoring weight (``weights.<name>``): a non-negative integer (no maximum is documented)."""

    name: str
    default: int | None  # None: the page documents no default
    llm_d_only: bool = False


# "All weights are non-negative integers. Mutually exclusive with configMapRef." (GATEWAY_PAGE, SchedulerSpec fields)
SCORING_WEIGHTS: Mapping[str, ScoringWeight] = MappingProxyType({w.name: w for w in (
    ScoringWeight("queue", 2),
    ScoringWeight("kvCache", 2),
    ScoringWeight("prefix", 3),
    ScoringWeight("lru", None, llm_d_only=True),  # "Valid only when scheduler is llm-d"
    ScoringWeight("loraAffinity", None),
    ScoringWeight("runningRequests", None),
    ScoringWeight("predictedLatency", None),
)})

# A Global Inference Gateway refuses an in-cluster gateway whose load balancer "spans fewer than two Availability
# Zones" (GLOBAL_TS_PAGE, GlobalRoutingInsufficientAZs: tag a subnet in another AZ kubernetes.io/role/internal-elb=1).
LOAD_BALANCER_MIN_ZONES = 2

# Model server floors (GATEWAY_PAGE, "Model server versions"): below vLLM 0.9.2 the KV cache metric is ignored silently.
GATEWAY_MIN_VLLM = "0.9.2"

# Whether a DPD (pdSpec) endpoint may sit behind the gateway: NOT documented, so refused (hyperpod_dpd/config/
# endpoint_gateway.py). What the sources say: the gateway's schedulers route to "model-serving pods selected by a label
# selector" and the Endpoint Picker scores pods on model-server metrics (GATEWAY_PAGE); for a gateway-enabled model
# "the operator sets the scheduler name, modelName, targetPort, and modelSelector" without saying which pods of a pdSpec
# endpoint it selects; "You cannot set inferenceGateway.enabled together with intelligentRoutingSpec.enabled on the same
# model"; and the DPD page has the operator's router select the prefiller ("The router is created automatically when
# pdSpec is present", DPD_PAGE) and never mentions the gateway. No page, chart or pull request states that pdSpec and
# spec.inferenceGateway work together, nor that a scheduler may front the DPD router Service.
DPD_BEHIND_GATEWAY_DOCUMENTED = False
DPD_GATEWAY_REASON = (
    "AWS documents no DPD endpoint behind the Inference Gateway: its schedulers pick model-serving pods by label and "
    "metrics, which for pdSpec would bypass the operator's DPD router, and neither the gateway page nor the DPD page "
    "says pdSpec and spec.inferenceGateway work together (docs/gateway.md)")
