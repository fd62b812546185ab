"""What an endpoint adds to the pods the operator creates, beyond the worker: tolerations, the LMCache mode and pod
template annotations. These are ``InferenceEndpointConfig`` fields newer than the vendored CRD (operator 3.3); the operator
release of each is in :data:`hyperpod_dpd.catalogue.operator.IEC_EXTENSION_FIELDS`.

Tolerations default to the taints of the instance groups the endpoint's prefill and decode roles run on, so a tainted
HyperPod group can host an endpoint without repeating its taints; an explicit list replaces them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, field_validator, model_validator

from hyperpod_dpd.catalogue.operator import DPD_ROLES, IEC_EXTENSION_FIELDS
from hyperpod_dpd.config.base import Model
from hyperpod_dpd.config.hyperpod import InstanceGroup, Taint, TaintEffect, TaintKey
from hyperpod_dpd.config.names import label_key_problem, label_value_problem

if TYPE_CHECKING:
    from hyperpod_dpd.config.endpoints import DpdRole, EndpointConfig
    from hyperpod_dpd.config.hyperpod import HyperPodConfig

# Taints that keep pods off a node (PreferNoSchedule only discourages the scheduler).
BLOCKING_EFFECTS: tuple[str, ...] = ("NoSchedule", "NoExecute")
ANNOTATIONS_MAX_BYTES = 256 * 1024  # Kubernetes: all annotations of an object together (TotalAnnotationSizeLimitB)
TOLERATIONS_RELEASE = IEC_EXTENSION_FIELDS["spec.tolerations"].introduced  # the operator release that added them


class Toleration(Model):
    """A Kubernetes toleration of the endpoint's prefill and decode pods (``spec.tolerations``)."""

    key: TaintKey | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: TaintEffect | None = None  # None: every effect

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None) -> str | None:
        problem = None if value is None else label_value_problem("value", value)
        if problem:
            raise ValueError(f"must be a Kubernetes taint value ({problem})")
        return value

    @model_validator(mode="after")
    def _operator(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator 'Exists' matches any value: leave 'value' out, or use operator 'Equal'")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("operator 'Equal' needs a 'key' (only 'Exists' may leave it out, to tolerate every taint)")
        return self

    @classmethod
    def for_taint(cls, taint: Taint) -> Toleration:
        """The toleration that matches exactly ``taint``: ``Exists`` for a taint without a value, else ``Equal``."""
        if taint.value is None:
            return cls(key=taint.key, operator="Exists", effect=taint.effect)
        return cls(key=taint.key, operator="Equal", value=taint.value, effect=taint.effect)

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' matching rule: same effect (or any), same key (or any, with ``Exists``), same value if ``Equal``."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key is None:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or (self.value or "") == (taint.value or "")

    def manifest(self) -> dict[str, str]:
        return {name: value for name, value in (("key", self.key), ("operator", self.operator), ("value", self.value),
                                                ("effect", self.effect)) if value is not None}


def taint_text(taint: Taint) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as ``kubectl taint`` writes it."""
    return f"{taint.key}{'=' + taint.value if taint.value is not None else ''}:{taint.effect}"


class LmCacheConfig(Model):
    """LMCache inside vLLM (``InProcess``) or as a server sidecar next to it (``MultiProcess``, LMCache 0.5.0+)."""

    mode: Literal["InProcess", "MultiProcess"]


def _annotations(value: dict[str, str]) -> dict[str, str]:
    for key in value:
        problem = label_key_problem(key)
        if problem:
            raise ValueError(problem.replace("label key", "annotation key", 1))
    size = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
    if size > ANNOTATIONS_MAX_BYTES:
        raise ValueError(f"annotations total {size} bytes; Kubernetes allows {ANNOTATIONS_MAX_BYTES} per object")
    return value


PodAnnotations = Annotated[dict[str, str], AfterValidator(_annotations)]


# -- tolerations from the instance groups ------------------------------------------------------------------------------

def role_groups(endpoint: EndpointConfig, hyperpod: HyperPodConfig, role: DpdRole) -> tuple[InstanceGroup, ...]:
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


def group_taints(endpoint: EndpointConfig, hyperpod: HyperPodConfig) -> Iterator[GroupTaint]:
    """Every taint of the groups the prefill and decode roles run on, prefill first."""
    for role in DPD_ROLES:
        for group in role_groups(endpoint, hyperpod, role):
            for taint in group.taints:
                yield GroupTaint(role, group, taint)


def derived_tolerations(endpoint: EndpointConfig, hyperpod: HyperPodConfig) -> tuple[Toleration, ...]:
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


def iec_extensions(endpoint: EndpointConfig) -> tuple[IecExtension, ...]:
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
    return tuple(found)
