"""Endpoints section: disaggregated prefill/decode (DPD) inference endpoints of an environment.

One ``EndpointConfig`` becomes one ``InferenceEndpointConfig`` with ``pdSpec`` (``k8s.DisaggregatedEndpoint``) plus the
router resources around it (``k8s.EndpointRouter``). Endpoints are declared in ``config/<env>.yaml`` under
``endpoints:`` or built in Python (:func:`parse_endpoint`); both paths run the same checks, because the CRD has no
cross-field rules and the operator rejects or ignores bad combinations only at deploy time (the operator's CRD has no CEL rules).

Layers: the model (:mod:`hyperpod_dpd.config.endpoint_fields`, :class:`EndpointFields`), the checks over it
(:mod:`hyperpod_dpd.config.endpoint_checks` and the modules it gathers), then :class:`EndpointConfig` here, which
adds the methods that run the checks. The names consumers import from this module are re-exported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from hyperpod_dpd.catalogue.operator import DpdRole as DpdRole  # re-exported: consumers import it from here
from hyperpod_dpd.catalogue.operator import supports
from hyperpod_dpd.config.alerts import SloConfig as SloConfig  # re-exported: the endpoint's slo section
from hyperpod_dpd.config.endpoint_autoscaling import AutoScalingConfig as AutoScalingConfig
from hyperpod_dpd.config.endpoint_checks import endpoint_issues, endpoint_warnings
from hyperpod_dpd.config.endpoint_checks import (
    managed_flag_issues as managed_flag_issues,  # re-exported: k8s/ imports it from here
)
from hyperpod_dpd.config.endpoint_fields import GENERATION_LENGTH as GENERATION_LENGTH  # re-exported
from hyperpod_dpd.config.endpoint_fields import DecodeConfig as DecodeConfig
from hyperpod_dpd.config.endpoint_fields import EndpointFields
from hyperpod_dpd.config.endpoint_fields import KvTransferConfig as KvTransferConfig
from hyperpod_dpd.config.endpoint_fields import MetricsConfig as MetricsConfig
from hyperpod_dpd.config.endpoint_fields import RequestLimits as RequestLimits
from hyperpod_dpd.config.endpoint_fields import RoleConfig as RoleConfig
from hyperpod_dpd.config.endpoint_fields import RoutingConfig as RoutingConfig
from hyperpod_dpd.config.endpoint_fields import RoutingStrategy as RoutingStrategy
from hyperpod_dpd.config.endpoint_fields import TlsConfig as TlsConfig
from hyperpod_dpd.config.endpoint_fields import TopologyConfig as TopologyConfig
from hyperpod_dpd.config.endpoint_kv_checks import kv_warnings
from hyperpod_dpd.config.endpoint_model import FsxSource as FsxSource  # re-exported: the model sources were here
from hyperpod_dpd.config.endpoint_model import HuggingFaceSource as HuggingFaceSource
from hyperpod_dpd.config.endpoint_model import ModelConfig as ModelConfig
from hyperpod_dpd.config.endpoint_model import S3Source as S3Source
from hyperpod_dpd.config.endpoint_model import SecretKeyRef as SecretKeyRef
from hyperpod_dpd.config.endpoint_pods import TOLERATIONS_RELEASE, derived_tolerations
from hyperpod_dpd.config.endpoint_rollout import drain_seconds as rollout_drain_seconds
from hyperpod_dpd.config.endpoint_router import IngressConfig as IngressConfig  # re-exported: the router section
from hyperpod_dpd.config.endpoint_router import RouterConfig as RouterConfig
from hyperpod_dpd.config.endpoint_sections import ImageVersions as ImageVersions  # re-exported: the sections
from hyperpod_dpd.config.endpoint_sections import LmCacheConfig as LmCacheConfig
from hyperpod_dpd.config.endpoint_sections import ReplicaRatio as ReplicaRatio
from hyperpod_dpd.config.endpoint_sections import RolloutConfig as RolloutConfig
from hyperpod_dpd.config.endpoint_sections import Toleration as Toleration
from hyperpod_dpd.config.names import is_unresolved as is_unresolved  # re-exported: k8s/ imports it from here
from hyperpod_dpd.config.validation import issues_from_validation
from hyperpod_dpd.errors import ConfigError, Issue


class EndpointConfig(EndpointFields):
    """One DPD endpoint (every field: :class:`~hyperpod_dpd.config.endpoint_fields.EndpointFields`), with the
    values and checks that need the checks' modules."""

    @property
    def drain_seconds(self) -> int | None:
        """Seconds ``hpdpd rollout promote`` keeps the old generation after the switch (None: unknown, see
        :func:`hyperpod_dpd.config.endpoint_rollout.drain_seconds`)."""
        return rollout_drain_seconds(self)

    def for_environment(self, root: Any) -> EndpointConfig:
        """This endpoint as ``root`` renders it: pinned to the GPU AZ, and with the tolerations of its instance groups'
        taints unless it lists its own (none below the operator release that added tolerations)."""
        endpoint = self.in_zone(root.network.gpu_availability_zone)
        if self.tolerations is not None:
            return endpoint
        derived = derived_tolerations(self, root.hyperpod) if supports(root.operator.version, TOLERATIONS_RELEASE) else ()
        return endpoint.model_copy(update={"tolerations": derived})

    # -- checks (hyperpod_dpd.config.endpoint_checks) -----------------------------------------------------------------

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Errors; ``root`` is the environment (or ``None`` for an endpoint built in Python without one)."""
        return endpoint_issues(self, root, path)

    def warnings(self, path: str = "") -> list[Issue]:
        """Valid but doubtful choices, where the docs say DPD will not pay off or may not work, under ``path``
        (``endpoints[0]`` in an environment); what the endpoint cannot run is an error of :meth:`issues`."""
        return [*endpoint_warnings(self, path), *kv_warnings(self, path)]


def parse_endpoint(data: Mapping[str, Any], *, source: str = "endpoint") -> EndpointConfig:
    """Validate an endpoint built in Python; problems raise :class:`ConfigError`, one line per field."""
    try:
        endpoint = EndpointConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(source, issues_from_validation(exc, EndpointConfig)) from None
    problems = list(endpoint.issues(None, ""))
    if problems:
        raise ConfigError(source, problems)
    return endpoint
