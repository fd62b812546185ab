"""Checks of ``routing.tier`` and ``endpoints[].gateway`` (models: :mod:`hyperpod_dpd.config.endpoint_gateway`).

Gathered by :mod:`hyperpod_dpd.config.endpoint_checks`: :func:`gateway_issues` on the endpoint alone,
:func:`gateway_environment_issues` against its environment. What each refuses and why is in docs/gateway.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.gateway import (
    DPD_BEHIND_GATEWAY_DOCUMENTED,
    DPD_GATEWAY_REASON,
    GATEWAY_MINIMUM_ADDON,
    GATEWAY_MINIMUM_ADDON_VERSION,
    GATEWAY_MINIMUM_OPERATOR,
    LOAD_BALANCER_MIN_ZONES,
)
from hyperpod_dpd.catalogue.operator import supports
from hyperpod_dpd.catalogue.versions import parse_addon_version
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_gateway import gateway_config
from hyperpod_dpd.errors import MISSING, Issue

if TYPE_CHECKING:
    from hyperpod_dpd.config.endpoint_fields import EndpointFields
    from hyperpod_dpd.config.network import NetworkConfig


def gateway_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    """The endpoint alone: the gateway section without the tier, the tier with intelligent routing (one line naming
    both), a DPD endpoint behind the gateway (undocumented: refused), authentication on without a JWT provider."""
    tier = e.routing.tier
    if tier != "gateway":
        if e.gateway is not None:
            yield Issue(join(path, "gateway"), "<section>", "applies only with routing.tier: gateway")
        return
    where = join(path, "routing.tier")
    if not DPD_BEHIND_GATEWAY_DOCUMENTED:  # every endpoint of the toolkit is a pdSpec (DPD) endpoint: the root cause,
        # before routing.strategy (removing the strategy would only lead to this refusal)
        yield Issue(where, tier, f"cannot front a DPD endpoint: {DPD_GATEWAY_REASON}; use routing.tier: dpd-router")
        return
    if "strategy" in e.routing.model_fields_set:
        # AWS: "You cannot set inferenceGateway.enabled together with intelligentRoutingSpec.enabled on the same model;
        # these fields are mutually exclusive." (GATEWAY_PAGE, Integration with the HyperPod Inference Operator)
        yield Issue(where, tier,
                    f"and routing.strategy ('{e.routing.strategy}', the operator's intelligentRoutingSpec) are mutually "
                    "exclusive (AWS: inferenceGateway.enabled and intelligentRoutingSpec.enabled cannot be set "
                    "together); remove routing.strategy, or use routing.tier: dpd-router")
        return  # the root cause alone
    config = gateway_config(e)
    if config.auth.enabled and config.auth.jwt is None:
        yield Issue(join(path, "gateway.auth.jwt"), MISSING,
                    "is required while gateway.auth.enabled is true (the default): give the OIDC issuer, jwks_uri "
                    "and audiences, or set gateway.auth.enabled: false explicitly (never in production)")


def gateway_environment_issues(e: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    """Against the environment: an add-on build and operator release with the gateway, a load balancer in two AZs,
    and no unauthenticated gateway in production."""
    if e.routing.tier != "gateway":
        return
    where = join(path, "routing.tier")
    operator = root.operator
    addon = operator.effective_addon_version
    try:
        bundles = parse_addon_version(addon) >= GATEWAY_MINIMUM_ADDON
    except ValueError:
        bundles = True  # a malformed add-on version is refused where it is written (operator.addon_version)
    if not bundles or not supports(operator.version, GATEWAY_MINIMUM_OPERATOR):
        yield Issue(where, e.routing.tier,
                    f'needs the Inference Gateway, which the add-on bundles from {GATEWAY_MINIMUM_ADDON_VERSION} with '
                    f'operator {GATEWAY_MINIMUM_OPERATOR} or later (operator.version is "{operator.version}", add-on '
                    f'{addon}); set operator.version to "{GATEWAY_MINIMUM_OPERATOR}" or later and '
                    f'operator.addon_version to "{GATEWAY_MINIMUM_ADDON_VERSION}" or later')
    zones = load_balancer_zones(root.network)
    if len(zones) < LOAD_BALANCER_MIN_ZONES:
        yield Issue(where, e.routing.tier,
                    f"needs internal load-balancer subnets in at least {LOAD_BALANCER_MIN_ZONES} AZs (the network has "
                    f"{len(zones)}: {', '.join(zones) or 'none'}); a Global Inference Gateway refuses a gateway whose "
                    "load balancer spans fewer (GlobalRoutingInsufficientAZs)")
    config = gateway_config(e)
    if not config.auth.enabled and getattr(root, "production", False):
        yield Issue(join(path, "gateway.auth.enabled"), False,
                    "a production gateway must authenticate requests (without spec.auth.jwt it accepts any request "
                    "that reaches it): configure gateway.auth.jwt")


def load_balancer_zones(network: NetworkConfig) -> tuple[str, ...]:
    """The AZs of the subnets an internal load balancer may use: the created VPC's private (EKS) subnets, which
    infra/efa_network.py tags ``kubernetes.io/role/internal-elb``, or the adopted VPC's private subnets (their tags
    are the VPC owner's; docs/gateway.md). The GPU subnet is not counted: it lies in one AZ by design."""
    if network.create is not None:
        return tuple(sorted(set(network.create.availability_zones)))
    assert network.existing is not None  # noqa: S101 - exactly one of create and existing (NetworkConfig)
    return tuple(sorted({s.availability_zone for s in network.existing.private_subnets}))
