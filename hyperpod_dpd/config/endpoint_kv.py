"""``kv_cache`` of an endpoint: the L1 (CPU memory) and L2 (shared) KV cache tiers, rendered as the IEC's
``spec.kvCacheSpec`` (facts and sources: :mod:`hyperpod_dpd.catalogue.kv_tiers`; docs/kv-cache.md).

A model of the endpoint's section only; the checks against the operator release and the cluster's tiered storage are
in :mod:`hyperpod_dpd.config.endpoint_kv_checks`. ``l1_cache`` (the older field) keeps working; an endpoint sets one
of ``l1_cache`` and ``kv_cache``, not both.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator, model_validator

from hyperpod_dpd.catalogue.kv_tiers import L2_BACKEND_FACTS, L2Backend
from hyperpod_dpd.config.base import Model

_REDIS_SCHEMES = ("redis://", "rediss://")
# A JSON pointer (RFC 6901) into the IEC's spec: '/spec/<field>/...', each token non-empty, '~' only as ~0 or ~1.
OVERRIDE_ROOT = "/spec/"
_POINTER = re.compile(r"(/([^/~]|~[01])+)+")


def pointer_problem(path: str) -> str | None:
    """Why ``path`` is not a JSON pointer into the IEC's spec (``/spec/kvCacheSpec/enableL2Cache``), or None."""
    if not path.startswith(OVERRIDE_ROOT) or not _POINTER.fullmatch(path):
        return (f"must be a JSON pointer into the IEC's spec such as '/spec/kvCacheSpec/enableL2Cache' (starting "
                f"'{OVERRIDE_ROOT}', '~' written ~0 and '/' inside a name ~1)")
    return None


def _override_paths(value: dict[str, Any]) -> dict[str, Any]:
    for path in value:
        problem = pointer_problem(path)
        if problem:
            raise ValueError(f"{path!r} {problem}")
    return value


# ``overrides``: IEC fields the toolkit does not model yet, by JSON pointer. The paths and values are checked against the
# CRD's openAPIV3Schema when the endpoint is built (hyperpod_dpd.k8s.overrides) and applied after the spec renders.
IecOverrides = Annotated[dict[str, Any], AfterValidator(_override_paths)]


class L2CacheConfig(Model):
    """``kvCacheSpec.l2CacheSpec``: the backend and, for ``redis``, its URL (``l2CacheLocalUrl``)."""

    backend: L2Backend
    url: str | None = Field(default=None, min_length=1)
    # The managed tier is shared by every deployment of the cluster, with no isolation, and its KV data is not
    # encrypted at rest (the caching page). A production environment must say it accepts that (endpoint_kv_checks).
    accept_shared_unencrypted: bool = False

    @field_validator("backend", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value  # the CRD's pattern is case-insensitive

    @model_validator(mode="after")
    def _url(self) -> L2CacheConfig:
        facts = L2_BACKEND_FACTS[self.backend]
        if facts.needs_url and self.url is None:
            raise ValueError(f"backend '{self.backend}' needs 'url' (l2CacheLocalUrl, such as redis://host:6379)")
        if not facts.needs_url and self.url is not None:
            raise ValueError(f"backend '{self.backend}' takes no 'url' (l2CacheLocalUrl is not needed for it)")
        if self.url is not None and not self.url.startswith(_REDIS_SCHEMES):
            raise ValueError(f"'url' must start with {' or '.join(_REDIS_SCHEMES)}")
        return self


class KvCacheConfig(Model):
    """``kv_cache``: ``l1`` is CPU-memory offload on the prefiller (``enableL1Cache``); ``l2`` a tier shared across
    nodes (``enableL2Cache`` + ``l2CacheSpec``), absent by default."""

    l1: bool = True
    l2: L2CacheConfig | None = None
