"""InferenceGateway: the ``InferenceGatewayConfig`` (``inference.sagemaker.aws.amazon.com/v1alpha1``) in front of
model-serving pods, built from a typed :class:`~hyperpod_dpd.config.endpoint_gateway.GatewayConfig`.

What it renders is the CRD reference of GATEWAY_PAGE (hyperpod_dpd.catalogue.gateway), validated against the schema
derived from it (k8s/crds/, labelled derived: AWS publishes no CRD YAML), and the page's validation rules the schema
cannot hold (BBR on with several schedulers, one scheduler per model name, ``weights.lru`` with ``llm-d`` only) are
checked here, so a bad combination is a :class:`ConfigError` before anything joins the tree.

Authentication is on unless the configuration says ``auth.enabled: false``; TLS is always on (an ACM certificate,
or the gateway's cert-manager auto-issue, ``tls: {}``).

The schedulers come as :class:`GatewayBackend` entries: which pods serve a model behind the gateway. A DPD endpoint
has none that AWS documents (:func:`endpoint_backend` refuses it with the reason; docs/gateway.md), so the
environment's endpoint charts render no gateway today; this construct is what renders one once a documented backend
exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cdk8s
from constructs import Construct

from hyperpod_dpd.catalogue.gateway import (
    DEFAULT_TARGET_PORT,
    DPD_BEHIND_GATEWAY_DOCUMENTED,
    DPD_GATEWAY_REASON,
    GATEWAY_API_VERSION,
    GATEWAY_KIND,
    MODEL_NAME_MAX,
    SCHEDULER_NAME_MAX,
    SCHEDULERS_MAX,
)
from hyperpod_dpd.config.endpoint_gateway import GatewayConfig
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.config.names import labels_problem
from hyperpod_dpd.errors import MISSING, ConfigError, Issue


@dataclass(frozen=True)
class GatewayBackend:
    """One ``spec.schedulers`` entry: the model name clients send, and the pods (by label) that serve it."""

    name: str
    model_name: str
    model_selector: Mapping[str, str] = field(default_factory=dict)
    target_port: int = DEFAULT_TARGET_PORT


def endpoint_backend(endpoint: EndpointConfig) -> GatewayBackend:
    """The backend of a toolkit endpoint behind the gateway. Every toolkit endpoint is a DPD (``pdSpec``) endpoint,
    and AWS documents none behind the gateway, so this is a :class:`ConfigError` with the reason."""
    if not DPD_BEHIND_GATEWAY_DOCUMENTED:
        raise ConfigError.single(f"endpoint {endpoint.name}", "routing.tier", endpoint.routing.tier,
                                 f"cannot front a DPD endpoint: {DPD_GATEWAY_REASON}")
    raise NotImplementedError("a documented DPD backend would be derived here")  # pragma: no cover


class InferenceGateway(Construct):
    """One ``InferenceGatewayConfig`` named ``name`` in the chart's namespace, with one scheduler per backend.

    Args:
        gateway: the typed gateway section (auth, TLS, scheduler type, weights, replicas). No default.
        name: the object's name (:func:`hyperpod_dpd.config.endpoint_gateway.gateway_reference`). No default.
        backends: the schedulers, 1 to 100, one per model name. No default.

    The primary child ``Resource`` is the ``cdk8s.ApiObject``.
    """

    def __init__(self, scope: Construct, id: str, *, gateway: GatewayConfig, name: str,
                 backends: Sequence[GatewayBackend]) -> None:
        problems = list(_backend_issues(gateway, backends))
        if problems:
            raise ConfigError(f"gateway {name}", problems)
        super().__init__(scope, id)
        self.gateway, self.backends = gateway, tuple(backends)
        self.resource = cdk8s.ApiObject(self, "Resource", api_version=GATEWAY_API_VERSION, kind=GATEWAY_KIND,
                                        metadata=cdk8s.ApiObjectMetadata(name=name))
        self.resource.add_json_patch(cdk8s.JsonPatch.add("/spec", self.spec()))

    def spec(self) -> dict[str, Any]:
        g = self.gateway
        spec: dict[str, Any] = {
            "bbr": {"enabled": len(self.backends) > 1, "replicas": g.bbr_replicas},
            "tls": {"acmArn": g.tls.acm_certificate_arn} if g.tls.acm_certificate_arn else {},
            "observability": {"metrics": {"enabled": g.metrics}},
            "schedulers": [self._scheduler(b) for b in self.backends],
        }
        jwt = g.auth.jwt
        if g.auth.enabled and jwt is not None:
            provider: dict[str, Any] = {"name": jwt.name, "issuer": jwt.issuer, "remoteJWKS": {"uri": jwt.jwks_uri}}
            if jwt.audiences:
                provider["audiences"] = list(jwt.audiences)
            if jwt.required_claims:
                provider["requiredClaims"] = [{"name": c.name, "valueType": c.value_type, "values": list(c.values)}
                                              for c in jwt.required_claims]
            spec["auth"] = {"jwt": {"provider": provider}}
        return spec

    def _scheduler(self, backend: GatewayBackend) -> dict[str, Any]:
        g = self.gateway
        entry: dict[str, Any] = {
            "name": backend.name, "modelName": backend.model_name,
            "modelSelector": {"matchLabels": dict(backend.model_selector)},
            "targetPort": backend.target_port, "scheduler": g.scheduler, "engineType": "vllm",  # the DPD images run vLLM
            "replicas": g.scheduler_replicas,
        }
        if g.weights is not None and g.weights.manifest():
            entry["weights"] = g.weights.manifest()
        if g.route_timeout is not None:
            entry["routeTimeout"] = g.route_timeout
        if g.log_level is not None:
            entry["logLevel"] = g.log_level
        return entry


def _backend_issues(gateway: GatewayConfig, backends: Sequence[GatewayBackend]) -> list[Issue]:
    """GATEWAY_PAGE's limits and validation rules on the schedulers, and authentication on or explicitly off."""
    found: list[Issue] = []
    if gateway.auth.enabled and gateway.auth.jwt is None:
        found.append(Issue("auth.jwt", MISSING, "is required while auth.enabled is true (the default); set "
                                             "auth.enabled: false explicitly to serve without authentication"))
    if not 1 <= len(backends) <= SCHEDULERS_MAX:
        found.append(Issue("backends", len(backends), f"must be 1 to {SCHEDULERS_MAX} schedulers"))
    names: set[str] = set()
    models: set[str] = set()
    for index, backend in enumerate(backends):
        where = f"backends[{index}]"
        if not 1 <= len(backend.name) <= SCHEDULER_NAME_MAX or backend.name in names:
            found.append(Issue(f"{where}.name", backend.name, f"must be 1-{SCHEDULER_NAME_MAX} characters and unique"))
        if not 1 <= len(backend.model_name) <= MODEL_NAME_MAX or backend.model_name in models:
            found.append(Issue(f"{where}.model_name", backend.model_name,
                               f"must be 1-{MODEL_NAME_MAX} characters and unique across schedulers"))
        if not backend.model_selector:
            found.append(Issue(f"{where}.model_selector", {}, "must select the model-serving pods by label"))
        problem = labels_problem(dict(backend.model_selector))
        if problem:
            found.append(Issue(f"{where}.model_selector", dict(backend.model_selector), problem))
        if not 1 <= backend.target_port <= 65535:
            found.append(Issue(f"{where}.target_port", backend.target_port, "must be 1-65535"))
        names.add(backend.name)
        models.add(backend.model_name)
    return found
