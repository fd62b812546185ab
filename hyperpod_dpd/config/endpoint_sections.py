"""The endpoint's smaller sections that sit beside checks of the same topic, as models only.

``endpoints[].ratio`` (the checks: :mod:`hyperpod_dpd.config.capacity`), ``image_versions``
(:mod:`hyperpod_dpd.config.endpoint_image`), ``tolerations``, ``lmcache`` and ``pod_annotations``
(:mod:`hyperpod_dpd.config.endpoint_pods`) and ``rollout`` (:mod:`hyperpod_dpd.config.endpoint_rollout`). They live
here, in the model layer, so that the endpoint model (:mod:`hyperpod_dpd.config.endpoint_fields`) imports nothing of
the checks over it; those modules re-export them. Sources are cited where each name is defined.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from hyperpod_dpd.catalogue.operator import IEC_EXTENSION_FIELDS, component_version_key
from hyperpod_dpd.config.base import Model
from hyperpod_dpd.config.hyperpod import Taint, TaintEffect, TaintKey
from hyperpod_dpd.config.names import label_key_problem, label_value_problem

# -- ratio (endpoints[].ratio) ----------------------------------------------------------------------------------------

# Prefill replicas per decode replica. platform.md §6 (from the DPD documentation and blog): start at 1:1 for balanced
# traffic, 2:1 or 3:1 for prefill-heavy traffic, and one decoder per endpoint with several prefillers. The default
# ceiling allows one step beyond 3:1 for prefill bursts under autoscaling; the floor keeps a prefiller per decoder.
DEFAULT_RATIO_MIN = 1.0
DEFAULT_RATIO_MAX = 4.0


class ReplicaRatio(Model):
    """``endpoints[].ratio``: the prefill replicas allowed per decode replica, ``min`` to ``max``."""

    min: float = Field(default=DEFAULT_RATIO_MIN, ge=0)
    max: float = Field(default=DEFAULT_RATIO_MAX, gt=0)

    @field_validator("max")
    @classmethod
    def _max(cls, value: float, info: ValidationInfo) -> float:
        low = info.data.get("min")
        if low is not None and value < low:
            raise ValueError(f"must be at least min ({low:g})")
        return value


DEFAULT_RATIO = ReplicaRatio()


# -- image versions (image_versions) ---------------------------------------------------------------------------------

def _release(value: str) -> str:
    try:
        component_version_key(value)
    except ValueError:
        raise ValueError("must be a release version such as '0.19.1' (MAJOR.MINOR.PATCH, optionally 'postN'; "
                         "release candidates and dev builds cannot lift a version requirement)") from None
    return value


ComponentVersion = Annotated[str, AfterValidator(_release)]


class ImageVersions(Model):
    """``image_versions``: what the endpoint's own image ships, for the checks that depend on it (a documented DPD
    image needs none: the catalogue knows its versions)."""

    vllm: ComponentVersion | None = None
    lmcache: ComponentVersion | None = None


# -- pod fields (tolerations, lmcache, pod_annotations) --------------------------------------------------------------

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


# -- rollout (endpoints[].rollout) -----------------------------------------------------------------------------------

SAGEMAKER_NAME_MAX = 63  # botocore sagemaker service-2, shape EndpointName: "max": 63
DNS_TTL_SECONDS = 5  # CoreDNS kubernetes plugin default TTL (above): lookups made just before the switch
MAX_DRAIN_SECONDS = 86_400


class RolloutConfig(Model):
    """How ``hpdpd rollout promote`` moves the endpoint to a new IEC generation."""

    # None: the endpoint's longest request (max_model_len x slo.tpot_ms + slo.ttft_ms), see drain_seconds().
    drain_seconds: int | None = Field(default=None, ge=0, le=MAX_DRAIN_SECONDS)
    # Keep sagemaker_endpoint_name as it is for every generation: blue/green is then refused (one name, two endpoints).
    fixed_sagemaker_endpoint_name: bool = False


def sagemaker_endpoint_name(base: str | None, generation: str, *, fixed: bool) -> str | None:
    """``spec.endpointName`` of the IEC of ``generation``: ``<base>-<generation>`` (``base`` when fixed; None without
    a base: no SageMaker endpoint)."""
    if not base:
        return None
    return base if fixed else f"{base}-{generation}"
