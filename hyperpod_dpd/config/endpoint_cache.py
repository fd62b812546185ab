"""An endpoint's ``model_cache`` section: the operator's host-local caches that shorten a cold start.

``model_cache`` mirrors the IEC's ``spec.modelCacheConfig`` (operator 3.3; sources in
:mod:`hyperpod_dpd.catalogue.caches`):

* ``weights_cache``: the operator pre-populates the model's weights on each eligible node's local NVMe
  (``host_path``), so a pod on that node loads them locally instead of from S3, FSx or the Hugging Face Hub. With
  ``pin_to_groups`` (the default) the cache is pinned with node affinity to the nodes the endpoint's prefill and decode
  pods can land on (their instance groups' labels), which needs operator 3.5; ``pin_to_groups: false`` renders the
  3.3 fields alone and leaves the choice of nodes to the operator.
* ``image_cache``: the operator pre-pulls the worker image onto the target nodes (a ``ModelImageCache`` resource and
  its DaemonSet).

The operator releases are gated by the rows of :data:`hyperpod_dpd.catalogue.operator.IEC_EXTENSION_FIELDS` (the
endpoint checks refuse each field below its release, one line naming ``operator.version``); this module checks what
the CRD cannot: the instance type has local NVMe, and the host path is absolute and normal.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import Field, field_validator

from hyperpod_dpd.catalogue.caches import (
    DEFAULT_WEIGHTS_HOST_PATH,
    HOST_PATH_MAX,
    IMAGE_CACHE_PATH,
    LOCAL_NVME_GB,
    WEIGHTS_CACHE_AFFINITY_PATH,
    WEIGHTS_CACHE_PATH,
    local_nvme_gb,
)
from hyperpod_dpd.config.base import Model, join
from hyperpod_dpd.errors import Issue

# One rendered extension field: (IEC path, config key, the value as configured, the manifest value).
CacheField = tuple[str, str, Any, Any]


class WeightsCacheConfig(Model):
    """``modelCacheConfig.weightsCache``: weights on the nodes' local NVMe."""

    enabled: bool = True
    host_path: str = Field(default=DEFAULT_WEIGHTS_HOST_PATH, min_length=1, max_length=HOST_PATH_MAX)
    pin_to_groups: bool = True  # node affinity on the prefill and decode groups' labels (operator 3.5)

    @field_validator("host_path")
    @classmethod
    def _host_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path on the node, such as {DEFAULT_WEIGHTS_HOST_PATH}")
        normal = posixpath.normpath(value)
        if normal != value or "/../" in f"{value}/" or value.startswith("//"):  # normpath keeps a leading '//'
            raise ValueError(f"must be a normal absolute path (no '.', '..', '//' or trailing '/'): {normal!r}")
        if normal == "/":
            raise ValueError("must not be the node's root directory")
        return value

    def manifest(self) -> dict[str, Any]:
        return {"enabled": True, "hostPath": self.host_path}


class ImageCacheConfig(Model):
    """``modelCacheConfig.imageCache``: the worker image pre-pulled onto the target nodes."""

    enabled: bool = True

    def manifest(self) -> dict[str, Any]:
        return {"enabled": True}


class ModelCacheConfig(Model):
    """``model_cache``: both caches are off unless their section is given (and ``enabled``)."""

    weights_cache: WeightsCacheConfig | None = None
    image_cache: ImageCacheConfig | None = None

    @property
    def weights(self) -> WeightsCacheConfig | None:
        return self.weights_cache if self.weights_cache is not None and self.weights_cache.enabled else None

    @property
    def image(self) -> ImageCacheConfig | None:
        return self.image_cache if self.image_cache is not None and self.image_cache.enabled else None

    def extensions(self, selectors: Mapping[str, Mapping[str, str]]) -> tuple[CacheField, ...]:
        """The IEC fields this section renders, parents first; ``selectors`` are the prefill and decode pods' node
        selectors (role -> labels), which the weights cache's node affinity repeats."""
        found: list[CacheField] = []
        weights = self.weights
        if weights is not None:
            found.append((WEIGHTS_CACHE_PATH, "model_cache.weights_cache", weights.host_path, weights.manifest()))
            if weights.pin_to_groups:
                affinity = node_affinity(selectors)
                found.append((WEIGHTS_CACHE_AFFINITY_PATH, "model_cache.weights_cache.pin_to_groups", True, affinity))
        if self.image is not None:
            found.append((IMAGE_CACHE_PATH, "model_cache.image_cache", True, self.image.manifest()))
        return tuple(found)

    def issues(self, instance_type: str, path: str) -> Iterator[Issue]:
        """What the CRD cannot check: the weights cache needs local NVMe on the endpoint's instance type."""
        if self.weights is not None and not local_nvme_gb(instance_type):
            yield Issue(join(path, "weights_cache"), instance_type,
                        f"the weights cache lives on the node's local NVMe, and {instance_type} has no NVMe instance "
                        f"store (types with one: {', '.join(LOCAL_NVME_GB)})")


# What to do instead when the operator release is too old for a field (hyperpod_dpd.config.endpoint_checks)
RELEASE_HINTS: Mapping[str, str] = {
    "model_cache.weights_cache.pin_to_groups": "; or set it to false to cache the weights without node affinity "
                                               "(operator 3.3 and later)",
}


def node_affinity(selectors: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Required node affinity matching any of ``selectors`` (one ORed term per distinct selector, its labels ANDed)."""
    terms: list[dict[str, Any]] = []
    for labels in selectors.values():
        term = {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(labels.items())]}
        if term["matchExpressions"] and term not in terms:
            terms.append(term)
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
