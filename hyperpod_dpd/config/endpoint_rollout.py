"""Blue/green settings of an endpoint (``endpoints[].rollout``): the SageMaker endpoint name each IEC generation
renders, and the drain between switching clients to a new generation and deleting the old one.

SageMaker endpoint names are unique per account and Region, case-insensitively, at most 63 characters of
``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`` (botocore 1.44.8 ``sagemaker`` service-2, ``CreateEndpointInput.EndpointName``:
"The name must be unique within an Amazon Web Services Region in your Amazon Web Services account. The name is
case-insensitive in CreateEndpoint"; shape ``EndpointName``: max 63). The IEC's ``spec.endpointName`` is the name the
operator creates (CRD: "Name used for Sagemaker Endpoint"), so two generations side by side need two names: each
generation renders ``<sagemaker_endpoint_name>-<generation>``, unless ``fixed_sagemaker_endpoint_name`` keeps the
configured name, and then ``hpdpd rollout promote`` refuses blue/green (``--in-place`` remains).

The drain: an ``ExternalName`` re-point moves only new DNS lookups (CoreDNS answers with a 5 s TTL by default:
coredns/coredns@12cdb0c ``plugin/kubernetes/README.md``, ``ttl``), and a request already on the old router runs to its
end there. Its longest is ``max_model_len`` tokens (vLLM's ``--max-model-len``; unset, the model's context from the
catalogue, which is vLLM's default) at the endpoint's TPOT objective plus its TTFT objective (``slo``), since one
request never generates more than ``max_model_len`` tokens. The SLOs are P99 figures, so the slowest 1 % can take
longer: ``drain_seconds`` sets the drain explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from hyperpod_dpd.catalogue.models import model_by_name
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_sections import DNS_TTL_SECONDS as DNS_TTL_SECONDS  # re-exported: the model
from hyperpod_dpd.config.endpoint_sections import MAX_DRAIN_SECONDS as MAX_DRAIN_SECONDS
from hyperpod_dpd.config.endpoint_sections import SAGEMAKER_NAME_MAX as SAGEMAKER_NAME_MAX
from hyperpod_dpd.config.endpoint_sections import RolloutConfig as RolloutConfig
from hyperpod_dpd.config.endpoint_sections import sagemaker_endpoint_name as sagemaker_endpoint_name
from hyperpod_dpd.config.names import is_unresolved
from hyperpod_dpd.errors import Issue

if TYPE_CHECKING:
    from hyperpod_dpd.config.endpoint_fields import EndpointFields

def longest_request_seconds(endpoint: EndpointFields) -> float | None:
    """``max_model_len`` (or the catalogue model's context) tokens at ``slo.tpot_ms``, plus ``slo.ttft_ms``; None when
    neither the length nor the model is known."""
    tokens = endpoint.max_model_len
    if tokens is None:
        known = model_by_name(endpoint.model.name)
        tokens = known.max_context if known else None
    if tokens is None:
        return None
    return (tokens * endpoint.slo.tpot_ms + endpoint.slo.ttft_ms) / 1000


def drain_seconds(endpoint: EndpointFields) -> int | None:
    """``rollout.drain_seconds``, else the longest request plus the DNS TTL (whole seconds, rounded up); None when
    it cannot be derived (``hpdpd rollout promote`` then refuses blue/green until it is set)."""
    if endpoint.rollout.drain_seconds is not None:
        return endpoint.rollout.drain_seconds
    longest = longest_request_seconds(endpoint)
    return None if longest is None else math.ceil(longest) + DNS_TTL_SECONDS


def rollout_issues(endpoint: EndpointFields, path: str) -> Iterator[Issue]:
    """A per-generation SageMaker endpoint name must stay within SageMaker's 63 characters."""
    base = endpoint.sagemaker_endpoint_name
    if not base or is_unresolved(base) or endpoint.rollout.fixed_sagemaker_endpoint_name:
        return
    rendered = sagemaker_endpoint_name(base, endpoint.generation, fixed=False) or ""
    if len(rendered) > SAGEMAKER_NAME_MAX:
        room = SAGEMAKER_NAME_MAX - (len(rendered) - len(base))
        yield Issue(join(path, "sagemaker_endpoint_name"), base,
                    f"each IEC generation renders '<name>-<generation>' ({len(rendered)} characters here, "
                    f"'{rendered}'), and SageMaker endpoint names have at most {SAGEMAKER_NAME_MAX}: use at most "
                    f"{room} characters, or set rollout.fixed_sagemaker_endpoint_name: true (then 'hpdpd rollout "
                    "promote' can only replace the serving generation in place)")


def duplicate_name_issues(endpoint: EndpointFields, earlier: list[EndpointFields], path: str) -> Iterator[Issue]:
    """Two endpoints of one environment (one account and Region) may not share a SageMaker endpoint name."""
    base = endpoint.sagemaker_endpoint_name
    if not base or is_unresolved(base):
        return
    for index, other in enumerate(earlier):
        if other.sagemaker_endpoint_name and other.sagemaker_endpoint_name.lower() == base.lower():
            yield Issue(join(path, "sagemaker_endpoint_name"), base,
                        f"also the name of endpoints[{index}] ({other.name}); SageMaker endpoint names are unique "
                        "per account and Region, regardless of case")
            return
