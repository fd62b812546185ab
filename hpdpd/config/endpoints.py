"""Endpoints section: disaggregated prefill/decode (DPD) inference endpoints of an environment.

One ``EndpointConfig`` becomes one ``InferenceEndpointConfig`` with ``pdSpec`` (``k8s.DisaggregatedEndpoint``) plus the
router resources around it (``k8s.EndpointRouter``). Endpoints are declared in ``config/<env>.yaml`` under
``endpoints:`` or built in Python (:func:`parse_endpoint`); both paths run the same checks, because the CRD has no
cross-field rules and the operator rejects or ignores bad combinations only at deploy time (the operator's CRD has no CEL rules).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, InstanceSpec
from hyperpod_dpd.catalogue.models import model_by_name
from hyperpod_dpd.catalogue.operator import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_HEALTH_CHECK_PATH,
    DEFAULT_INVOCATION_PATH,
    DEFAULT_PD_BUFFER_SIZE,
    DEFAULT_ROUTING_THRESHOLD,
    DEFAULT_WORKER_IMAGE,
    DOCUMENTED_IMAGE_VLLM,
    DPD_FIXED_ENVIRONMENT,
    DPD_WORKER_IMAGES,
    INFERENCE_NAMESPACE,
    KVAWARE_INVOCATION_PATHS,
    KVAWARE_MIN_VLLM,
    MANAGED_VLLM_FLAGS,
    MAX_DECODE_REPLICAS,
    PAYOFF_MIN_PARAMETERS_BILLION,
    PD_BUFFER_SIZE_VARIABLE,
    ROUTER_SERVICE_SUFFIX,
)
from hyperpod_dpd.config.base import AvailabilityZone, Cidr, Model, ResourceName, join
from hyperpod_dpd.config.hyperpod import GROUP_LABEL, ROLE_LABEL
from hyperpod_dpd.errors import ConfigError, Issue
from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

# DPD facts the endpoint model relies on live in the catalogue (hpdpd.catalogue.operator); re-exported here.
GENERATION_LENGTH = 6  # hex characters of the immutable-field hash in the IEC name
MAX_LABEL_LENGTH = 63  # DNS labels: Service, container and IEC names

RoutingStrategy = Literal["prefixaware", "kvaware", "session", "roundrobin"]
DpdRole = Literal["prefill", "decode"]

_TOKEN = re.compile(r"\$\{Token\[[^\]]*\]\}")
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_unresolved(value: Any) -> bool:
    """True for an AWS CDK string token (``${Token[...]}``), e.g. a bucket name another construct creates.

    Such values are known only at deploy time, so pattern checks skip them instead of failing.
    """
    return isinstance(value, str) and bool(_TOKEN.search(value))


def _checked(regex: str, what: str, *, tokens: bool = True) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if tokens and is_unresolved(value):
            return value
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return AfterValidator(check)


# Names that form other names (router Service, containers, the generation hash) must be literal: no tokens.
EndpointName = Annotated[str, _checked(
    r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?",
    "a DNS-1035 label: lower-case letters, digits and '-', starting with a letter (the operator's router "
    "Service name starts with it)", tokens=False)]
Namespace = Annotated[str, _checked(
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a Kubernetes namespace: 1-63 lower-case letters, digits and '-'", tokens=False)]
ModelName = Annotated[str, _checked(
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", "1-63 letters, digits, '.', '_' and '-', starting with a letter or digit")]
SageMakerName = Annotated[str, _checked(
    r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
    "a SageMaker endpoint name: 1-63 letters, digits and '-', starting and ending with a letter or digit")]
BucketName = Annotated[str, _checked(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name (3-63 lower-case characters)")]
RegionName = Annotated[str, _checked(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS Region code such as 'us-west-2'")]
FsxId = Annotated[str, _checked(r"fs-[0-9a-f]{8,17}", "an FSx file system id such as 'fs-0123456789abcdef0'")]
HuggingFaceId = Annotated[str, _checked(r"[a-zA-Z0-9_.-]+/[a-zA-Z0-9_.-]+", "a Hugging Face model id 'owner/name'")]
CommitSha = Annotated[str, _checked(r"[0-9a-f]{40}", "a 40-character lower-case commit SHA")]
SecretName = Annotated[str, _checked(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", "a Kubernetes Secret name (DNS-1123 subdomain)")]
SecretKey = Annotated[str, _checked(r"[-._a-zA-Z0-9]{1,253}", "a Secret key of letters, digits, '-', '_' and '.'")]
AcmArn = Annotated[str, _checked(
    r"arn:aws:acm:[a-z0-9-]+:[0-9]{12}:certificate/[a-fA-F0-9-]+",
    "an ACM certificate ARN 'arn:aws:acm:<region>:<account>:certificate/<id>' (the CRD accepts the aws partition only)")]
DomainName = Annotated[str, _checked(
    r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*",
    "a lower-case DNS name such as 'llm.example.com'")]
HostedZoneId = Annotated[str, _checked(r"Z[A-Z0-9]+", "a Route 53 hosted zone id such as 'Z0123456789ABCDEFGHIJ'")]
S3Uri = Annotated[str, _checked(r"s3://([^/]+)/?(.*)", "an S3 URI such as 's3://bucket/prefix'")]
AmpUrl = Annotated[str, _checked(
    r"https://aps-workspaces\.[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+|",
    "an Amazon Managed Prometheus workspace URL 'https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-...' "
    "or empty")]
UrlPath = Annotated[str, _checked(r"/?[A-Za-z0-9._~/-]*", "a URL path such as 'v1/chat/completions'", tokens=False)]


def _labels(value: dict[str, str]) -> dict[str, str]:
    for key, label in value.items():
        if not _LABEL_KEY.fullmatch(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if not _LABEL_VALUE.fullmatch(str(label)):
            raise ValueError(f"label value {label!r} of {key!r} is not a valid Kubernetes label value")
    return value


Labels = Annotated[dict[str, str], AfterValidator(_labels)]


# --- model source ------------------------------------------------------------------------------------------------------

class S3Source(Model):
    """Weights under ``s3://<bucket>/<prefix>``; keep the bucket in the cluster's Region (cold loads are slow)."""

    bucket: BucketName
    prefix: str = ""
    region: RegionName


class FsxSource(Model):
    file_system_id: FsxId
    path: str = ""
    dns_name: str | None = None
    mount_name: str | None = None


class SecretKeyRef(Model):
    name: SecretName
    key: SecretKey


class HuggingFaceSource(Model):
    """A Hub model; the token Secret reaches only the init container (needs egress to *.huggingface.co)."""

    model_id: HuggingFaceId
    revision: CommitSha | None = None
    token_secret: SecretKeyRef | None = None


class ModelConfig(Model):
    name: ModelName
    version: str | None = None
    parameters_billion: float | None = Field(default=None, gt=0)
    s3: S3Source | None = None
    fsx: FsxSource | None = None
    huggingface: HuggingFaceSource | None = None
    prefetch: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        chosen = [k for k in ("s3", "fsx", "huggingface") if getattr(self, k) is not None]
        if len(chosen) != 1:
            found = f" (found {' and '.join(chosen)})" if chosen else ""
            raise ValueError(f"set exactly one model source: 's3', 'fsx' or 'huggingface'{found}")
        return self

    @property
    def source_type(self) -> str:
        return "s3" if self.s3 else "fsx" if self.fsx else "huggingface"


# --- autoscaling (KEDA, per role) ---------------------------------------------------------------------------------------

class CloudWatchTrigger(Model):
    metric_name: str = Field(min_length=1)
    namespace: str = Field(min_length=1)
    target_value: float = Field(gt=0)
    dimensions: dict[str, str] = Field(default_factory=dict)
    statistic: str = "Average"
    metric_type: Literal["Average", "Value"] = "Average"
    period_seconds: int | None = Field(default=None, ge=1)
    activation_target_value: float | None = Field(default=None, ge=0)


class PrometheusTrigger(Model):
    query: str = Field(min_length=1)
    target_value: float = Field(gt=0)
    server_address: AmpUrl = ""
    metric_type: Literal["Average", "Value"] = "Average"
    activation_target_value: float | None = Field(default=None, ge=0)


class AutoScalingConfig(Model):
    """Independent autoscaling of one role (``pdSpec.autoScalingSpec``); exactly one trigger."""

    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(ge=1)
    polling_interval_seconds: int | None = Field(default=None, ge=1)
    cooldown_seconds: int | None = Field(default=None, ge=0)
    scale_down_stabilization_seconds: int | None = Field(default=None, ge=0)
    cloudwatch: CloudWatchTrigger | None = None
    prometheus: PrometheusTrigger | None = None

    @model_validator(mode="after")
    def _shape(self) -> AutoScalingConfig:
        if (self.cloudwatch is None) == (self.prometheus is None):
            raise ValueError("set exactly one trigger: 'cloudwatch' or 'prometheus'")
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must not exceed max_replicas ({self.max_replicas})")
        return self


# --- roles -------------------------------------------------------------------------------------------------------------

class RoleConfig(Model):
    """One DPD role (``pdSpec.prefillSpec`` / ``decodingSpec``) and its PodDisruptionBudget."""

    replicas: int = Field(default=1, ge=1)
    instance_group: ResourceName | None = None
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

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: int) -> int:
        if not 0 <= value <= 2**31 - 1:
            raise ValueError("must be 0 (always disaggregate) or a positive estimated input token count")
        return value


class TopologyConfig(Model):
    """Placement of both roles; ``sameAZ`` is always on (EFA KV transfer needs one AZ)."""

    availability_zone: AvailabilityZone | None = None
    placement_group: str | None = None


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


class IngressConfig(Model):
    """Expose the router outside the cluster through an Ingress (TLS terminated at the load balancer)."""

    host: DomainName
    class_name: str = "alb"
    scheme: Literal["internal", "internet-facing"] = "internal"
    certificate_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[A-Za-z0-9-]+$")
    tls_secret_name: SecretName | None = None
    backend_protocol: Literal["HTTP", "HTTPS"] = "HTTP"

    @model_validator(mode="after")
    def _tls(self) -> IngressConfig:
        if self.class_name == "alb" and self.tls_secret_name:
            raise ValueError("an 'alb' Ingress takes its certificate from ACM: use 'certificate_arn', not 'tls_secret_name'")
        if self.class_name != "alb" and not self.tls_secret_name:
            raise ValueError(f"a '{self.class_name}' Ingress needs 'tls_secret_name' (a kubernetes.io/tls Secret)")
        if self.class_name != "alb" and self.certificate_arn:
            raise ValueError("'certificate_arn' applies only to class_name 'alb'")
        return self


class RouterConfig(Model):
    """What the router chart adds around the operator's router (client Service, NetworkPolicies, PDBs, Ingress)."""

    client_namespaces: tuple[Namespace, ...] = ()
    network_policy: bool = True
    # Sources outside the cluster's pods, e.g. the VPC CIDR for an Ingress or the operator's load balancer.
    allowed_cidrs: tuple[Cidr, ...] = ()
    router_pod_labels: Labels | None = None
    ingress: IngressConfig | None = None

    @model_validator(mode="after")
    def _ingress_sources(self) -> RouterConfig:
        if self.ingress and self.network_policy and not self.allowed_cidrs:
            raise ValueError("an Ingress reaches the router from the load balancer's addresses, which the router "
                             "NetworkPolicy blocks: list them (e.g. the VPC CIDR) in 'allowed_cidrs'")
        return self


# --- the endpoint ------------------------------------------------------------------------------------------------------

class EndpointConfig(Model):
    """One DPD endpoint. ``name`` is the stable, client-facing name; the IEC is ``resource_name``."""

    name: EndpointName
    namespace: Namespace = "default"
    model: ModelConfig
    instance_type: str
    image: str = DEFAULT_WORKER_IMAGE
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float = Field(default=DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1)
    prefill: RoleConfig = RoleConfig()
    decode: DecodeConfig = DecodeConfig()
    routing: RoutingConfig = RoutingConfig()
    pd_buffer_size: int = Field(default=DEFAULT_PD_BUFFER_SIZE, ge=1)
    l1_cache: bool = True
    environment: dict[str, str] = Field(default_factory=dict)
    args: tuple[str, ...] = ()
    invocation_path: UrlPath = DEFAULT_INVOCATION_PATH
    health_check_path: str = Field(default=DEFAULT_HEALTH_CHECK_PATH, pattern=r"^/.*")
    sagemaker_endpoint_name: SageMakerName | None = None
    topology: TopologyConfig = TopologyConfig()
    request_limits: RequestLimits | None = None
    metrics: MetricsConfig = MetricsConfig()
    tls: TlsConfig | None = None
    router: RouterConfig = RouterConfig()

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if value not in DPD_INSTANCE_TYPES:
            raise ValueError(f"is not a DPD-capable instance type; allowed: {', '.join(DPD_INSTANCE_TYPES)}")
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
        return f"{self.resource_name}-{self.namespace}{ROUTER_SERVICE_SUFFIX}"

    @property
    def router_host(self) -> str:
        """The operator's router Service (http on port 443, as in the SageMaker HyperPod DPD documentation)."""
        return f"{self.router_service_name}.{INFERENCE_NAMESPACE}.svc.cluster.local"

    @property
    def client_service_host(self) -> str:
        """The stable in-namespace name clients use; it survives a new generation of the IEC."""
        return f"{self.name}.{self.namespace}.svc.cluster.local"

    @property
    def client_namespaces(self) -> tuple[str, ...]:
        return self.router.client_namespaces or (self.namespace,)

    def in_zone(self, zone: str) -> EndpointConfig:
        """This endpoint pinned to ``zone`` unless its topology names an AZ already (the environment's GPU AZ)."""
        if self.topology.availability_zone:
            return self
        return self.model_copy(update={"topology": self.topology.model_copy(update={"availability_zone": zone})})

    def role(self, role: DpdRole) -> RoleConfig:
        return self.prefill if role == "prefill" else self.decode

    def node_selector(self, role: DpdRole) -> dict[str, str]:
        """HyperPod node labels of the role's instance group (every node carries them), plus extra labels."""
        config = self.role(role)
        selector = {ROLE_LABEL: role}
        if config.instance_group:
            selector[GROUP_LABEL] = config.instance_group
        return {**config.node_selector, **selector}

    # -- checks ----------------------------------------------------------------------------------------------------------

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Errors; ``root`` is the environment (or ``None`` for an endpoint built in Python without one)."""
        yield from self._local_issues(path)
        if root is not None:
            yield from self._environment_issues(root, path)

    def _local_issues(self, path: str) -> Iterator[Issue]:
        gpus = self.instance.gpu_count
        if self.tensor_parallel_size is not None:
            divisors = [d for d in range(1, gpus + 1) if gpus % d == 0]
            if self.tensor_parallel_size > gpus:
                yield Issue(join(path, "tensor_parallel_size"), self.tensor_parallel_size,
                            f"exceeds the {gpus} GPUs of {self.instance_type}; allowed: {divisors}")
            elif gpus % self.tensor_parallel_size:
                yield Issue(join(path, "tensor_parallel_size"), self.tensor_parallel_size,
                            f"must divide the {gpus} GPUs of {self.instance_type}; allowed: {divisors}")
        yield from self._decode_issues(path)
        if self.routing.strategy == "kvaware" and self.invocation_path.strip("/") not in KVAWARE_INVOCATION_PATHS:
            yield Issue(join(path, "invocation_path"), self.invocation_path,
                        "routing strategy 'kvaware' supports only the completions API; use '/completions' "
                        "(or 'v1/completions'), or another strategy for '/v1/chat/completions'")
        service = self.router_service_name
        if len(service) > MAX_LABEL_LENGTH:
            room = MAX_LABEL_LENGTH - len(ROUTER_SERVICE_SUFFIX) - GENERATION_LENGTH - 2
            yield Issue(join(path, "name"), self.name,
                        f"with namespace '{self.namespace}' the operator's router Service '{service}' would have "
                        f"{len(service)} characters (Service names allow {MAX_LABEL_LENGTH}); name and namespace "
                        f"may total at most {room} characters")
        prefill_image, decode_image = self.role_image("prefill"), self.role_image("decode")
        if prefill_image != decode_image:
            role, other = ("decode", "prefill") if self.decode.image else ("prefill", "decode")
            yield Issue(join(path, f"{role}.image"), self.role_image(role),
                        f"must equal the {other} image ({self.role_image(other)}): prefiller and decoder must run the "
                        "same image (the IEC has one worker.image; LMCache and NIXL versions must match)")
        yield from self._environment_variable_issues(path)
        for where, args in (("args", self.args), ("prefill.args", self.prefill.args), ("decode.args", self.decode.args)):
            yield from managed_flag_issues(join(path, where), args)
        for role in ("prefill", "decode"):
            config = self.role(role)
            scaling = config.autoscaling
            if scaling and not scaling.min_replicas <= config.replicas <= scaling.max_replicas:
                yield Issue(join(path, f"{role}.replicas"), config.replicas,
                            f"must be between autoscaling.min_replicas ({scaling.min_replicas}) and "
                            f"max_replicas ({scaling.max_replicas})")
        gpu_memory = (self.instance.gpu.memory_gib if self.instance.gpu else 0) * 1024**3
        if self.pd_buffer_size >= gpu_memory:
            yield Issue(join(path, "pd_buffer_size"), self.pd_buffer_size,
                        f"must be smaller than one GPU's memory ({self.instance.gpu.memory_gib:g} GiB on "  # type: ignore[union-attr]
                        f"{self.instance_type}); it is allocated per tensor-parallel rank on the decoder")

    def _decode_issues(self, path: str) -> Iterator[Issue]:
        if self.decode.allow_multiple_replicas:
            return
        why = (f"the HyperPod Inference Operator supports {MAX_DECODE_REPLICAS} decoder per endpoint today; add prefill "
               "replicas or raise pd_buffer_size instead, or set decode.allow_multiple_replicas: true for an operator "
               "that runs several decoders")
        if self.decode.replicas > MAX_DECODE_REPLICAS:
            yield Issue(join(path, "decode.replicas"), self.decode.replicas, why)
        scaling = self.decode.autoscaling
        if scaling and scaling.max_replicas > MAX_DECODE_REPLICAS:
            yield Issue(join(path, "decode.autoscaling.max_replicas"), scaling.max_replicas, why)

    def _environment_variable_issues(self, path: str) -> Iterator[Issue]:
        for key, value in self.environment.items():
            where = join(join(path, "environment"), key)
            if key == PD_BUFFER_SIZE_VARIABLE:
                yield Issue(where, value, "set the typed field pd_buffer_size instead")
            elif key in DPD_FIXED_ENVIRONMENT and value != DPD_FIXED_ENVIRONMENT[key]:
                yield Issue(where, value,
                            f"must be '{DPD_FIXED_ENVIRONMENT[key]}' for DPD (hyperpod-dpd sets it; prefiller and "
                            "decoder must agree or KV cache lookups miss)")

    def _environment_issues(self, root: Any, path: str) -> Iterator[Issue]:
        yield from self._group_issues(root, path)
        zone = self.topology.availability_zone
        if zone is not None and zone != root.network.gpu_availability_zone:
            yield Issue(join(path, "topology.availability_zone"), zone,
                        f"must be network.gpu_availability_zone ({root.network.gpu_availability_zone}), the AZ of "
                        "the prefill and decode groups")
        endpoints = list(root.endpoints)
        index = next((i for i, e in enumerate(endpoints) if e is self), len(endpoints))
        for earlier, other in enumerate(endpoints[:index]):
            if other.name == self.name:
                yield Issue(join(path, "name"), self.name,
                            f"duplicate endpoint name (also endpoints[{earlier}]); names must be unique")
            elif other.namespace == self.namespace:
                yield Issue(join(path, "namespace"), self.namespace,
                            f"already holds endpoints[{earlier}] ({other.name}); one DPD endpoint per namespace, "
                            "because the operator labels pods only by DPD role, so the router chart's "
                            "PodDisruptionBudgets and NetworkPolicies cannot tell two endpoints apart")

    def _group_issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Roles against the HyperPod groups; skipped while the groups themselves are invalid (root cause alone)."""
        if next(iter(root.hyperpod.issues(root, "hyperpod")), None) is not None:
            return
        groups = {g.name: g for g in root.hyperpod.instance_groups}
        for role in ("prefill", "decode"):
            config = self.role(role)
            if config.instance_group is None:
                continue
            where = join(path, f"{role}.instance_group")
            group = groups.get(config.instance_group)
            if group is None:
                yield Issue(where, config.instance_group,
                            f"is not an instance group of hyperpod.instance_groups; known: {', '.join(groups)}")
            elif group.role != role:
                yield Issue(where, config.instance_group, f"is a '{group.role}' group; a {role} role needs a '{role}' group")
            elif group.instance_type != self.instance_type:
                yield Issue(where, config.instance_group,
                            f"runs {group.instance_type}, but the endpoint's instance_type is {self.instance_type}")
            else:
                per_node = self.instance.gpu_count // self.gpus_per_pod
                if per_node == 0:
                    continue  # tensor_parallel_size exceeds the instance's GPUs: reported by the local checks
                nodes = math.ceil(config.replicas / per_node)
                if nodes > group.count:
                    yield Issue(join(path, f"{role}.replicas"), config.replicas,
                                f"needs {nodes} nodes ({per_node} pod(s) of {self.gpus_per_pod} GPUs per node), but "
                                f"instance group '{group.name}' has count {group.count}")

    def warnings(self) -> list[Issue]:
        """Valid but doubtful choices, where the docs say DPD will not pay off or may not work."""
        found: list[Issue] = []
        known = model_by_name(self.model.name)
        billions = self.model.parameters_billion or (known.parameters / 1e9 if known else None)
        if billions is not None and billions < PAYOFF_MIN_PARAMETERS_BILLION:
            found.append(Issue("model.parameters_billion", billions,
                               f"DPD pays off for dense models of {PAYOFF_MIN_PARAMETERS_BILLION}B+ parameters; "
                               "a smaller model gains little over colocated serving"))
        elif known is not None and known.is_moe:
            found.append(Issue("model.name", self.model.name,
                               f"is a mixture-of-experts model ({known.active_parameters / 1e9:.0f}B active); the DPD "
                               "documentation expects little gain for MoE models (run 'hpdpd plan' to check)"))
        threshold = self.routing.threshold
        if self.max_model_len is not None and 0 < threshold and self.max_model_len < threshold:
            found.append(Issue("max_model_len", self.max_model_len,
                               f"is below routing.threshold ({threshold}): no prompt reaches the threshold, so no "
                               "request is ever disaggregated"))
        image = self.worker_image
        if not is_unresolved(image) and image not in DPD_WORKER_IMAGES:
            found.append(Issue("image", image,
                               "is not a documented DPD image (it must ship LMCache, NIXL and the EFA libfabric "
                               f"provider); documented: {', '.join(DPD_WORKER_IMAGES)}"))
        elif self.routing.strategy == "kvaware":
            found.append(Issue("routing.strategy", "kvaware",
                               f"needs vLLM >= {KVAWARE_MIN_VLLM}, but the documented DPD images ship vLLM "
                               f"{DOCUMENTED_IMAGE_VLLM}"))
        router = self.router
        if self.sagemaker_endpoint_name and router.network_policy and not router.allowed_cidrs:
            found.append(Issue("router.allowed_cidrs", [],
                               "a SageMaker endpoint reaches the model through the operator's load balancer; if that "
                               "targets the router, the router NetworkPolicy blocks it unless the load balancer's "
                               "addresses (e.g. the VPC CIDR) are listed here"))
        return found


def managed_flag_issues(path: str, args: tuple[str, ...] | list[str]) -> Iterator[Issue]:
    """Free-form vLLM args must not set the flags the toolkit derives from typed fields."""
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in MANAGED_VLLM_FLAGS:
            yield Issue(join(path, index), arg,
                        f"is set by hyperpod-dpd ({', '.join(MANAGED_VLLM_FLAGS)} come from typed fields such as "
                        "tensor_parallel_size)")


def parse_endpoint(data: Mapping[str, Any], *, source: str = "endpoint") -> EndpointConfig:
    """Validate an endpoint built in Python; problems raise :class:`ConfigError`, one line per field."""
    from hyperpod_dpd.config.loader import issues_from_validation  # the loader imports this module

    try:
        endpoint = EndpointConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(source, issues_from_validation(exc, EndpointConfig)) from None
    problems = list(endpoint.issues(None, ""))
    if problems:
        raise ConfigError(source, problems)
    return endpoint
