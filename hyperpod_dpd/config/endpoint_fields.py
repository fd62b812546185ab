"""The endpoint model: every field of ``endpoints[]`` and its sub-sections, and what derives from the fields alone.

The model layer of the endpoint: it imports models only (:mod:`hyperpod_dpd.config.endpoint_sections`,
``endpoint_model``, ``endpoint_router``, ``endpoint_autoscaling``, ``alerts``), never the checks over an endpoint
(``endpoint_checks``, ``capacity``, ``endpoint_image``, ``endpoint_pods``, ``endpoint_rollout``), which take
:class:`EndpointFields`. :class:`hyperpod_dpd.config.endpoints.EndpointConfig`, above both, is what consumers use.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, InstanceSpec
from hyperpod_dpd.catalogue.namespaces import DEFAULT_NAMESPACE, reserved_namespace
from hyperpod_dpd.catalogue.operator import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_HEALTH_CHECK_PATH,
    DEFAULT_INVOCATION_PATH,
    DEFAULT_PD_BUFFER_SIZE,
    DEFAULT_ROUTING_THRESHOLD,
    DEFAULT_WORKER_IMAGE,
    DPD_FIXED_ENVIRONMENT,
    PD_BUFFER_SIZE_VARIABLE,
    DpdRole,
)
from hyperpod_dpd.catalogue.operator import router_host as operator_router_host
from hyperpod_dpd.catalogue.operator import router_service as operator_router_service
from hyperpod_dpd.config.alerts import SloConfig
from hyperpod_dpd.config.base import AvailabilityZoneRef, Model
from hyperpod_dpd.config.endpoint_autoscaling import AutoScalingConfig
from hyperpod_dpd.config.endpoint_cache import ModelCacheConfig
from hyperpod_dpd.config.endpoint_gateway import GatewayConfig, RoutingTier
from hyperpod_dpd.config.endpoint_kv import IecOverrides, KvCacheConfig
from hyperpod_dpd.config.endpoint_model import ModelConfig
from hyperpod_dpd.config.endpoint_router import (
    RouterConfig,
    default_router_pod_labels,
    ingress_name,
    router_policy_name,
)
from hyperpod_dpd.config.endpoint_sections import (
    ImageVersions,
    LmCacheConfig,
    PodAnnotations,
    ReplicaRatio,
    RolloutConfig,
    Toleration,
)
from hyperpod_dpd.config.endpoint_sections import sagemaker_endpoint_name as rendered_sagemaker_name
from hyperpod_dpd.config.hyperpod import GROUP_LABEL, ROLE_LABEL
from hyperpod_dpd.config.names import (
    AcmArn,
    DomainName,
    EndpointName,
    HostedZoneId,
    InstanceGroupName,
    Labels,
    Namespace,
    PlacementGroupName,
    S3Uri,
    SageMakerEndpointName,
    UrlPath,
)

GENERATION_LENGTH = 6  # hex characters of the immutable-field hash in the IEC name

RoutingStrategy = Literal["prefixaware", "kvaware", "session", "roundrobin"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --- roles -------------------------------------------------------------------------------------------------------------

class RoleConfig(Model):
    """One DPD role (``pdSpec.prefillSpec`` / ``decodingSpec``) and its PodDisruptionBudget."""

    replicas: int = Field(default=1, ge=1)
    instance_group: InstanceGroupName | None = None
    node_selector: Labels = Field(default_factory=dict)
    args: tuple[str, ...] = ()
    image: str | None = None
    autoscaling: AutoScalingConfig | None = None
    max_unavailable: int = Field(default=1, ge=0)

    @field_validator("node_selector")
    @classmethod
    def _own_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key in (ROLE_LABEL, GROUP_LABEL):
            if key in value:
                raise ValueError(f"label {key!r} is set by hyperpod-dpd from the role and 'instance_group'")
        return value


class DecodeConfig(RoleConfig):
    # Opt-in for operators newer than the ones in the catalogue that run several decoders per endpoint.
    allow_multiple_replicas: bool = False


# --- routing, placement, exposure --------------------------------------------------------------------------------------

class RoutingConfig(Model):
    threshold: int = DEFAULT_ROUTING_THRESHOLD
    strategy: RoutingStrategy = "prefixaware"
    tier: RoutingTier = "dpd-router"  # "gateway": the Inference Gateway (endpoint_gateway; docs/gateway.md)

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: int) -> int:
        if not 0 <= value <= 2**31 - 1:
            raise ValueError("must be 0 (always disaggregate) or a positive estimated input token count")
        return value


class TopologyConfig(Model):
    """Placement of both roles; ``sameAZ`` is always on (EFA KV transfer needs one AZ)."""

    availability_zone: AvailabilityZoneRef | None = None  # the GPU zone, by name or ID (rendered by name only)
    placement_group: PlacementGroupName | None = None


class TlsConfig(Model):
    certificate_output_s3_uri: S3Uri | None = None
    acm_certificate_arn: AcmArn | None = None
    domain_name: DomainName | None = None
    hosted_zone_id: HostedZoneId | None = None

    @model_validator(mode="after")
    def _custom_certificate(self) -> TlsConfig:
        if (self.acm_certificate_arn is None) != (self.domain_name is None):
            raise ValueError("set both 'acm_certificate_arn' and 'domain_name' for a custom certificate, or neither")
        if self.hosted_zone_id and not self.acm_certificate_arn:
            raise ValueError("'hosted_zone_id' (DNS automation) needs 'acm_certificate_arn' and 'domain_name'")
        return self


class RequestLimits(Model):
    max_concurrent_requests: int | None = Field(default=None, ge=1)
    max_queue_size: int | None = Field(default=None, ge=0)
    overflow_status_code: int | None = Field(default=None, ge=400, le=599)


class MetricsConfig(Model):
    enabled: bool = True
    scrape_interval_seconds: int | None = Field(default=None, ge=5, le=300)


class KvTransferConfig(Model):
    """The floor ``hpdpd verify`` holds the measured KV transfer throughput to (docs/cli.md, "hpdpd verify")."""

    min_gbps: float = Field(default=1.0, gt=0)  # below: FAIL (EFA is not in use, platform docs section 19)
    warn_line_rate_fraction: float = Field(default=0.1, ge=0, le=1)  # below this share of the EFA line rate: WARN


# --- the endpoint ------------------------------------------------------------------------------------------------------

class EndpointFields(Model):
    """One DPD endpoint as written: its fields, their own validation and what derives from them alone. The checks
    over an endpoint take this type; :class:`hyperpod_dpd.config.endpoints.EndpointConfig` adds the methods that run
    them. ``name`` is the stable, client-facing name; the IEC is ``resource_name``."""

    name: EndpointName
    # Never a namespace of Kubernetes or of the platform's add-ons (hyperpod_dpd.catalogue.namespaces), which the
    # endpoint's chart would declare as its own. In an environment it is required (the default "default" is refused
    # there, endpoint_checks); only a chart built in Python on its own keeps "default", which it never declares.
    namespace: Namespace = DEFAULT_NAMESPACE
    model: ModelConfig
    instance_type: str
    image: str = DEFAULT_WORKER_IMAGE
    # What an image of the user's own ships, for the checks gated on it (kvaware, lmcache.mode): endpoint_image.
    image_versions: ImageVersions | None = None
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float = Field(default=DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1)
    prefill: RoleConfig = RoleConfig()
    decode: DecodeConfig = DecodeConfig()
    ratio: ReplicaRatio | None = None  # prefill per decode; None: 1 to 4 (hyperpod_dpd.config.capacity)
    routing: RoutingConfig = RoutingConfig()
    pd_buffer_size: int = Field(default=DEFAULT_PD_BUFFER_SIZE, ge=1)
    l1_cache: bool = True
    kv_cache: KvCacheConfig | None = None  # L1 and L2 tiers (docs/kv-cache.md); set it or l1_cache, not both
    overrides: IecOverrides = Field(default_factory=dict)  # IEC JSON pointer -> value, checked on the CRD schema
    environment: dict[str, str] = Field(default_factory=dict)
    args: tuple[str, ...] = ()
    invocation_path: UrlPath = DEFAULT_INVOCATION_PATH
    health_check_path: str = Field(default=DEFAULT_HEALTH_CHECK_PATH, pattern=r"^/.*")
    sagemaker_endpoint_name: SageMakerEndpointName | None = None
    topology: TopologyConfig = TopologyConfig()
    request_limits: RequestLimits | None = None
    metrics: MetricsConfig = MetricsConfig()
    kv_transfer: KvTransferConfig = KvTransferConfig()  # the floor of `hpdpd verify` (docs/cli.md)
    slo: SloConfig = SloConfig()  # the alert thresholds (docs/monitoring.md)
    tls: TlsConfig | None = None
    router: RouterConfig = RouterConfig()
    gateway: GatewayConfig | None = None  # with routing.tier: gateway (hyperpod_dpd.config.endpoint_gateway)
    rollout: RolloutConfig = RolloutConfig()  # blue/green: SageMaker name per generation, drain (docs/endpoints.md)
    # Fields of later operators (hyperpod_dpd.catalogue.operator.IEC_EXTENSION_FIELDS has the release of each).
    tolerations: tuple[Toleration, ...] | None = None  # None: one per taint of the endpoint's instance groups
    lmcache: LmCacheConfig | None = None
    pod_annotations: PodAnnotations = Field(default_factory=dict)
    model_cache: ModelCacheConfig = ModelCacheConfig()  # weights on local NVMe, image pre-pulled (docs/cold-start.md)

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if value not in DPD_INSTANCE_TYPES:
            raise ValueError(f"is not a DPD-capable instance type; allowed: {', '.join(DPD_INSTANCE_TYPES)}")
        return value

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, value: str) -> str:
        why = reserved_namespace(value)
        if why and value != DEFAULT_NAMESPACE:  # "default" is never declared; an environment refuses it
            raise ValueError(f"is reserved: {why}; an endpoint needs a namespace of its own (its chart declares "
                             "it), such as 'llm-serving'")
        return value

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            if not isinstance(item, str):
                raise ValueError(f"the value of {key} must be a string (quote it in YAML)")
        return value

    # -- derived values ------------------------------------------------------------------------------------------------

    @property
    def instance(self) -> InstanceSpec:
        return DPD_INSTANCE_TYPES[self.instance_type]

    @property
    def gpus_per_pod(self) -> int:
        """GPUs of one prefill or decode pod: the tensor-parallel size, by default every GPU of the instance."""
        return self.tensor_parallel_size or self.instance.gpu_count

    def role_image(self, role: DpdRole) -> str:
        return self.role(role).image or self.image

    @property
    def worker_image(self) -> str:
        """The one image of both roles (the IEC has a single ``worker.image``)."""
        return self.role_image("prefill")

    @property
    def worker_environment(self) -> dict[str, str]:
        """``worker.environmentVariables`` in order: the three DPD variables first, then the endpoint's own."""
        env = {PD_BUFFER_SIZE_VARIABLE: str(self.pd_buffer_size), **DPD_FIXED_ENVIRONMENT}
        env.update({k: v for k, v in self.environment.items() if k not in env})
        return env

    @property
    def generation(self) -> str:
        """A short hash of every field the operator treats as immutable (CRD field descriptions and the DPD documentation).

        It is part of the IEC name, so changing one of those fields creates a new IEC instead of patching the old one.
        """
        immutable = {
            "worker.environmentVariables": list(self.worker_environment.items()),
            "intelligentRoutingSpec.enabled": True,
            "pdSpec": True,
        }
        digest = hashlib.sha256(json.dumps(immutable, sort_keys=True).encode()).hexdigest()
        return digest[:GENERATION_LENGTH]

    @property
    def resource_name(self) -> str:
        """The ``InferenceEndpointConfig`` name: ``<name>-<generation>``."""
        return f"{self.name}-{self.generation}"

    @property
    def router_service_name(self) -> str:
        return operator_router_service(self.resource_name, self.namespace)

    @property
    def router_host(self) -> str:
        """The operator's router Service (http on port 443, as in the SageMaker HyperPod DPD documentation)."""
        return operator_router_host(self.resource_name, self.namespace)

    def sagemaker_endpoint_name_for(self, generation: str) -> str | None:
        """The SageMaker endpoint the IEC of ``generation`` creates (its ``spec.endpointName``):
        ``<sagemaker_endpoint_name>-<generation>``, or ``sagemaker_endpoint_name`` itself with
        ``rollout.fixed_sagemaker_endpoint_name``; None without ``sagemaker_endpoint_name`` (no SageMaker endpoint)."""
        return rendered_sagemaker_name(self.sagemaker_endpoint_name, generation,
                                       fixed=self.rollout.fixed_sagemaker_endpoint_name)

    @property
    def rendered_sagemaker_endpoint_name(self) -> str | None:
        """The SageMaker endpoint of the configured generation: what the endpoints chart renders, and what serves
        once that generation is deployed or promoted (``hpdpd rollout status`` names the serving one)."""
        return self.sagemaker_endpoint_name_for(self.generation)

    def router_pod_labels_for(self, resource_name: str) -> dict[str, str]:
        """The router pod labels the router NetworkPolicy selects for the IEC ``resource_name``."""
        return dict(self.router.router_pod_labels or default_router_pod_labels(resource_name, self.namespace))

    @property
    def ingress_name(self) -> str:
        return ingress_name(self.name, self.namespace)

    @property
    def router_policy_name(self) -> str:
        return router_policy_name(self.name, self.namespace)

    @property
    def client_service_host(self) -> str:
        """The stable in-namespace name clients use; it survives a new generation of the IEC."""
        return f"{self.name}.{self.namespace}.svc.cluster.local"

    @property
    def client_namespaces(self) -> tuple[str, ...]:
        return self.router.client_namespaces or (self.namespace,)

    def in_zone(self, zone: str) -> Self:
        """This endpoint pinned to ``zone`` unless its topology names an AZ already (the environment's GPU AZ)."""
        if self.topology.availability_zone:
            return self
        return self.model_copy(update={"topology": self.topology.model_copy(update={"availability_zone": zone})})

    def role(self, role: DpdRole) -> RoleConfig:
        return self.prefill if role == "prefill" else self.decode

    def node_selector(self, role: DpdRole) -> dict[str, str]:
        """HyperPod node labels of the role's instance group (every node carries them), plus extra labels."""
        config = self.role(role)
        selector: dict[str, str] = {ROLE_LABEL: role}
        if config.instance_group:
            selector[GROUP_LABEL] = config.instance_group
        return {**config.node_selector, **selector}
