"""The one place that reads the environment's endpoints, and the names the operator knows them by.

Endpoints (``env.endpoints``) are declared in the environment configuration (an empty tuple when it declares none).
The IEC name the operator sees is the endpoint's ``resource_name``: its name with the generation suffix of the fields
the operator treats as immutable (hyperpod_dpd.config, "New generation" in the README).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_dpd.catalogue.operator import router_url as catalogue_router_url
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.lookup import Lookup, look_up

SAGEMAKER_IN_SERVICE = "InService"
SAGEMAKER_FAILED = frozenset({"Failed", "UpdateRollbackFailed"})
SAGEMAKER_ENDPOINT_PERMISSION = "sagemaker:DescribeEndpoint"


class RoutingLike(Protocol):
    threshold: int


class ModelLike(Protocol):
    name: str
    s3: Any  # ``.bucket``, ``.prefix``, ``.region`` or None


class EndpointLike(Protocol):
    """The attributes of an endpoint the operations commands read."""

    name: str
    namespace: str
    sagemaker_endpoint_name: str | None
    # The SageMaker endpoint the configured IEC generation creates: ``<sagemaker_endpoint_name>-<generation>``, or the
    # name itself with rollout.fixed_sagemaker_endpoint_name (hyperpod_dpd.config.endpoint_rollout).
    rendered_sagemaker_endpoint_name: str | None
    routing: RoutingLike
    model: ModelLike
    invocation_path: str

    @property
    def resource_name(self) -> str:
        """The IEC's name in Kubernetes: ``<name>-<generation>``."""
        ...


def configured_endpoints(env: Any) -> tuple[EndpointLike, ...]:
    """The environment's endpoints, in file order (empty when the environment declares none)."""
    return tuple(env.endpoints)


def iec_name(endpoint: EndpointLike) -> str:
    """The ``InferenceEndpointConfig`` name in Kubernetes."""
    return endpoint.resource_name


def router_url(endpoint: EndpointLike) -> str:
    """The router Service URL, reachable only from inside the cluster (or through a port-forward of it)."""
    return catalogue_router_url(iec_name(endpoint), endpoint.namespace, endpoint.invocation_path)


def select_endpoints(endpoints: tuple[EndpointLike, ...], name: str | None) -> tuple[EndpointLike, ...]:
    """All endpoints, or the one called ``name``; an unknown name is an error listing the known ones."""
    if name is None:
        return endpoints
    chosen = tuple(e for e in endpoints if name in (e.name, iec_name(e)))
    if not chosen:
        known = ", ".join(e.name for e in endpoints) or "none declared"
        raise HpdpdError(f"no endpoint named {name!r} in the environment; endpoints: {known}")
    return chosen


@dataclass(frozen=True, kw_only=True)
class SageMakerEndpointState:
    """``EndpointStatus`` of a SageMaker endpoint and its ``FailureReason`` (one line, or None)."""

    status: str
    failure_reason: str | None = None

    @property
    def failed(self) -> bool:
        return self.status in SAGEMAKER_FAILED


def read_sagemaker_endpoint(sagemaker: Any, name: str) -> Lookup[SageMakerEndpointState]:
    """The endpoint's state; not found on SageMaker's "Could not find endpoint"; unknown on any other error."""

    def describe() -> SageMakerEndpointState:
        data = sagemaker.describe_endpoint(EndpointName=name)
        reason = " ".join(str(data.get("FailureReason") or "").split()) or None
        return SageMakerEndpointState(status=str(data.get("EndpointStatus", "")), failure_reason=reason)

    return look_up(describe, permission=SAGEMAKER_ENDPOINT_PERMISSION)
