"""``endpoints[].gateway``: the HyperPod Inference Gateway in front of an endpoint (``routing.tier: gateway``), as models.

Field names, bounds and defaults are the ``InferenceGatewayConfig`` CRD reference's (hyperpod_dpd.catalogue.gateway,
GATEWAY_PAGE); keys are written in snake_case here and rendered in the CRD's camelCase (hyperpod_dpd/k8s/gateway.py).
Two choices are stricter than upstream, on purpose:

* authentication is on: upstream a gateway without ``spec.auth`` "accepts any request that reaches it"; here an
  endpoint behind the gateway needs ``auth.jwt`` unless ``auth.enabled: false`` is written, which a production
  environment refuses (hyperpod_dpd/config/endpoint_gateway_checks.py);
* TLS is always rendered: with ``tls.acm_certificate_arn`` the gateway terminates with that certificate, without it
  the gateway auto-issues one with cert-manager and imports it into ACM (the CRD's ``tls: {}``).

The checks over an endpoint with this section live in :mod:`hyperpod_dpd.config.endpoint_gateway_checks`; this module
imports no endpoint model, so the endpoint model (``endpoint_fields``) can import it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, model_validator

from hyperpod_dpd.catalogue.gateway import (
    BBR_DEFAULT_REPLICAS,
    CLAIM_VALUE_MAX_LENGTH,
    CLAIM_VALUES_MAX,
    EPP_DEFAULT_REPLICAS,
    JWT_AUDIENCES_MAX,
    JWT_REQUIRED_CLAIMS_MAX,
    LOG_LEVEL_MAX,
    SCHEDULER_TYPES,
    SCORING_WEIGHTS,
)
from hyperpod_dpd.config.base import Model, pattern
from hyperpod_dpd.config.names import AcmArn, Namespace, SubdomainName
from hyperpod_dpd.errors import ConfigError

RoutingTier = Literal["dpd-router", "gateway"]  # routing.tier: the operator's DPD router (default) or the gateway
SchedulerType = Literal["llm-d", "epp"]
assert SCHEDULER_TYPES == ("llm-d", "epp")  # noqa: S101 - the Literal above is the catalogue's list

HttpsUrl = Annotated[str, pattern(r"https://[^\s/$.?#][^\s]*", "an https:// URL")]
ClaimValue = Annotated[str, Field(min_length=1, max_length=CLAIM_VALUE_MAX_LENGTH)]
# Gateway API duration (GEP-2257): one or more <number><unit>, units h, m, s, ms; "0s" disables the timeout.
Duration = Annotated[str, pattern(r"([0-9]{1,5}(h|m|s|ms)){1,4}", "a Gateway API duration such as '30s' or '5m'")]
GATEWAY_NAME_SUFFIX = "-gateway"


class JwtClaim(Model):
    """One ``auth.jwt.provider.requiredClaims`` entry: tokens must carry ``name`` with one of ``values``."""

    name: str = Field(min_length=1)
    value_type: Literal["String", "StringArray"] = "String"
    values: tuple[ClaimValue, ...] = Field(min_length=1, max_length=CLAIM_VALUES_MAX)


class JwtProvider(Model):
    """``auth.jwt.provider``: the OIDC issuer, its JWKS and what tokens for this gateway must carry."""

    name: SubdomainName = "jwt"
    issuer: HttpsUrl
    jwks_uri: HttpsUrl  # rendered as remoteJWKS.uri
    audiences: tuple[str, ...] = Field(default=(), max_length=JWT_AUDIENCES_MAX)
    required_claims: tuple[JwtClaim, ...] = Field(default=(), max_length=JWT_REQUIRED_CLAIMS_MAX)

    @model_validator(mode="after")
    def _audience_or_claims(self) -> JwtProvider:
        if not self.audiences and not self.required_claims:
            raise ValueError("set 'audiences' or 'required_claims' (the CRD needs at least one)")
        return self


class GatewayAuth(Model):
    """Request authentication. ``enabled`` is true unless written false; true needs ``jwt``."""

    enabled: bool = True
    jwt: JwtProvider | None = None

    @model_validator(mode="after")
    def _consistent(self) -> GatewayAuth:
        if not self.enabled and self.jwt is not None:
            raise ValueError("'jwt' is set but 'enabled' is false: remove one of them")
        return self


class GatewayTls(Model):
    """HTTPS at the gateway: an ACM certificate, or (None) one the gateway auto-issues with cert-manager."""

    acm_certificate_arn: AcmArn | None = None


class ScoringWeights(Model):
    """Endpoint Picker scoring weights (non-negative integers); None leaves the upstream default."""

    queue: int | None = Field(default=None, ge=0)
    kv_cache: int | None = Field(default=None, ge=0)
    prefix: int | None = Field(default=None, ge=0)
    lru: int | None = Field(default=None, ge=0)  # llm-d only
    lora_affinity: int | None = Field(default=None, ge=0)
    running_requests: int | None = Field(default=None, ge=0)
    predicted_latency: int | None = Field(default=None, ge=0)

    def manifest(self) -> dict[str, int]:
        """The CRD's ``weights`` object: camelCase names of the catalogue, the weights that are set."""
        out = {_camel(key): value for key, value in self.model_dump().items() if value is not None}
        assert set(out) <= set(SCORING_WEIGHTS)  # noqa: S101 - every field is a documented weight
        return out


class GatewayConfig(Model):
    """``endpoints[].gateway``: the ``InferenceGatewayConfig`` an endpoint with ``routing.tier: gateway`` sits behind."""

    name: SubdomainName | None = None  # default: <endpoint name>-gateway
    namespace: Namespace | None = None  # default: the endpoint's namespace
    scheduler: SchedulerType = "llm-d"
    weights: ScoringWeights | None = None
    scheduler_replicas: int = Field(default=EPP_DEFAULT_REPLICAS, ge=1)
    bbr_replicas: int = Field(default=BBR_DEFAULT_REPLICAS, ge=1)
    route_timeout: Duration | None = None
    log_level: int | None = Field(default=None, ge=0, le=LOG_LEVEL_MAX)
    metrics: bool = True
    auth: GatewayAuth = GatewayAuth()
    tls: GatewayTls = GatewayTls()

    @model_validator(mode="after")
    def _lru(self) -> GatewayConfig:
        if self.weights is not None and self.weights.lru is not None and self.scheduler != "llm-d":
            raise ValueError(f"weights.lru is valid only with scheduler 'llm-d' (this is '{self.scheduler}')")
        return self


DEFAULT_GATEWAY = GatewayConfig()


class _GatewayEndpoint(Protocol):
    """What :func:`gateway_reference` reads of an endpoint (``EndpointFields`` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def gateway(self) -> GatewayConfig | None: ...
    @property
    def routing(self) -> Any: ...


def gateway_config(endpoint: _GatewayEndpoint) -> GatewayConfig:
    """The endpoint's gateway section, or the defaults when it has none."""
    return endpoint.gateway or DEFAULT_GATEWAY


def gateway_reference(endpoint: _GatewayEndpoint) -> tuple[str, str]:
    """``(namespace, name)`` of the in-cluster ``InferenceGatewayConfig`` the endpoint sits behind: ``gateway.namespace``
    (default: the endpoint's) and ``gateway.name`` (default ``<endpoint>-gateway``). These are what a Global Inference
    Gateway's ``AddInferenceGateway`` takes as ``Namespace`` and ``Name``. An endpoint on another tier has none: a
    :class:`ConfigError`."""
    if endpoint.routing.tier != "gateway":
        raise ConfigError.single(f"endpoint {endpoint.name}", "routing.tier", endpoint.routing.tier,
                                 "is not 'gateway': the endpoint sits behind no Inference Gateway")
    config = gateway_config(endpoint)
    return config.namespace or endpoint.namespace, config.name or f"{endpoint.name}{GATEWAY_NAME_SUFFIX}"


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)
