"""What an endpoint adds to the pods the operator creates, beyond the worker: tolerations, the LMCache mode and pod
template annotations. These are ``InferenceEndpointConfig`` fields newer than the vendored CRD (operator 3.3); the operator
release of each is in :data:`hyperpod_dpd.catalogue.operator.IEC_EXTENSION_FIELDS`.

Tolerations default to the taints of the instance groups the endpoint's prefill and decode roles run on, so a tainted
HyperPod group can host an endpoint without repeating its taints; an explicit list replaces them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.config.endpoint_sections import ANNOTATIONS_MAX_BYTES as ANNOTATIONS_MAX_BYTES  # re-exported
from hyperpod_dpd.config.endpoint_sections import BLOCKING_EFFECTS as BLOCKING_EFFECTS
from hyperpod_dpd.config.endpoint_sections import TOLERATIONS_RELEASE as TOLERATIONS_RELEASE
from hyperpod_dpd.config.endpoint_sections import LmCacheConfig as LmCacheConfig
from hyperpod_dpd.config.endpoint_sections import PodAnnotations as PodAnnotations
from hyperpod_dpd.config.endpoint_sections import Toleration as Toleration
from hyperpod_dpd.config.endpoint_sections import taint_text as taint_text
from hyperpod_dpd.config.hyperpod import InstanceGroup, Taint

if TYPE_CHECKING:
    from hyperpod_dpd.catalogue.operator import DpdRole
    from hyperpod_dpd.config.endpoint_fields import EndpointFields
    from hyperpod_dpd.config.hyperpod import HyperPodConfig

# -- tolerations from the instance groups ------------------------------------------------------------------------------

def role_groups(endpoint: EndpointFields, hyperpod: HyperPodConfig, role: DpdRole) -> tuple[InstanceGroup, ...]:
    """The groups a role's pods can land on: its ``instance_group``, else every group of that role."""
    name = endpoint.role(role).instance_group
    if name is not None:
        return tuple(g for g in hyperpod.instance_groups if g.name == name)
    return hyperpod.groups(role)


@dataclass(frozen=True)
class GroupTaint:
    role: DpdRole
    group: InstanceGroup
    taint: Taint


def group_taints(endpoint: EndpointFields, hyperpod: HyperPodConfig) -> Iterator[GroupTaint]:
    """Every taint of the groups the prefill and decode roles run on, prefill first."""
    for role in DPD_ROLES:
        for group in role_groups(endpoint, hyperpod, role):
            for taint in group.taints:
                yield GroupTaint(role, group, taint)


def derived_tolerations(endpoint: EndpointFields, hyperpod: HyperPodConfig) -> tuple[Toleration, ...]:
    """One toleration per distinct taint of the endpoint's groups, in the order the groups list them."""
    found: dict[tuple[str, ...], Toleration] = {}
    for item in group_taints(endpoint, hyperpod):
        toleration = Toleration.for_taint(item.taint)
        found.setdefault(tuple(toleration.manifest().values()), toleration)
    return tuple(found.values())


# -- the IEC fields beyond the vendored CRD ----------------------------------------------------------------------------

@dataclass(frozen=True)
class IecExtension:
    """One extension field an endpoint sets: its IEC path, its config key, the configured value and the manifest value."""

    path: str
    key: str
    value: Any
    manifest: Any


def iec_extensions(endpoint: EndpointFields) -> tuple[IecExtension, ...]:
    """The fields newer than the vendored CRD that ``endpoint`` renders (empty settings render nothing)."""
    found: list[IecExtension] = []
    if endpoint.pod_annotations:
        annotations = dict(endpoint.pod_annotations)
        found.append(IecExtension("spec.kubernetes.podTemplateAnnotations", "pod_annotations", annotations, annotations))
    if endpoint.tolerations:
        tolerations = [t.manifest() for t in endpoint.tolerations]
        found.append(IecExtension("spec.tolerations", "tolerations", tolerations, tolerations))
    if endpoint.lmcache is not None:
        found.append(IecExtension("spec.lmcache", "lmcache.mode", endpoint.lmcache.mode, {"mode": endpoint.lmcache.mode}))
    # model_cache (hyperpod_dpd.config.endpoint_cache): the weights cache pinned to the pods' nodes, the image cache
    selectors: dict[str, dict[str, str]] = {role: endpoint.node_selector(role) for role in DPD_ROLES}
    found.extend(IecExtension(*row) for row in endpoint.model_cache.extensions(selectors))
    return tuple(found)
