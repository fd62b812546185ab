"""Checks of an endpoint's KV cache tiers (``kv_cache``, docs/kv-cache.md) against the operator release and the
environment: the L2 backends an operator release does not honour are refused (hyperpod_dpd.catalogue.kv_tiers), the
managed ``tieredstorage`` tier needs the cluster's tiered storage, and a production environment must accept that tier's
caveats explicitly (shared by every deployment of the cluster, not encrypted at rest)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.kv_tiers import CACHING_PAGE_URL, L1_OFF_RELEASE, L2_BACKEND_FACTS, backend_refusal
from hyperpod_dpd.catalogue.operator import OPERATOR_RELEASES, supports
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_kv import KvCacheConfig, L2CacheConfig
from hyperpod_dpd.errors import Issue

if TYPE_CHECKING:
    from hyperpod_dpd.config.endpoint_fields import EndpointFields

KV_CACHE_POINTER = "/spec/kvCacheSpec"  # the IEC field kv_cache renders (an override's JSON pointer)
CAVEATS = ("the managed tiered-storage L2 is shared by every deployment of the HyperPod cluster, with no isolation "
           f"between them, and its KV data is not encrypted at rest ({CACHING_PAGE_URL})")


def kv_owned(pointer: str) -> bool:
    """Whether an override's JSON pointer writes ``spec.kvCacheSpec``, which ``kv_cache`` renders."""
    return pointer == KV_CACHE_POINTER or pointer.startswith(f"{KV_CACHE_POINTER}/")


def kv_cache_of(e: EndpointFields) -> KvCacheConfig:
    """The endpoint's tiers: ``kv_cache``, else ``l1_cache`` alone (no L2)."""
    return e.kv_cache if e.kv_cache is not None else KvCacheConfig(l1=e.l1_cache)


def kv_issues(e: EndpointFields, operator: str, root: Any, path: str) -> Iterator[Issue]:
    """Errors of ``kv_cache``; ``root`` is the environment, or None for an endpoint built in Python (then the
    cluster and production checks are left to the environment that deploys it)."""
    if e.kv_cache is not None and "l1_cache" in e.model_fields_set:
        yield Issue(join(path, "l1_cache"), e.l1_cache,
                    "is replaced by kv_cache.l1; set one of l1_cache and kv_cache, not both")
    if not kv_cache_of(e).l1 and operator in OPERATOR_RELEASES and not supports(operator, L1_OFF_RELEASE):
        key = "kv_cache.l1" if e.kv_cache is not None else "l1_cache"
        yield Issue(join(path, key), False, f"is ignored by operator {operator}: enableL1Cache false is honoured from "
                                            f"operator {L1_OFF_RELEASE} on (L1 stays on); raise operator.version")
    if root is not None:  # an environment's endpoint: kvCacheSpec is kv_cache's, where the checks below run
        for pointer in e.overrides:
            if kv_owned(pointer):
                yield Issue(join(path, f"overrides[{pointer!r}]"), e.overrides[pointer],
                            "spec.kvCacheSpec is rendered from kv_cache (l1, l2.backend, l2.url); set it there, where "
                            "the cluster's tiered storage and a production environment's acceptance of the managed "
                            "tier's caveats are checked (enableL2Cache alone turns on the managed tier)")
    l2 = e.kv_cache.l2 if e.kv_cache is not None else None
    if l2 is None:
        return
    where = join(path, "kv_cache.l2.backend")
    why = backend_refusal(l2.backend, operator)
    if why:
        yield Issue(where, l2.backend, why)
        return
    if root is not None:
        yield from _environment_issues(l2, root, path)


def _environment_issues(l2: L2CacheConfig, root: Any, path: str) -> Iterator[Issue]:
    if L2_BACKEND_FACTS[l2.backend].cluster_tiered_storage:
        tiered = root.hyperpod.tiered_storage
        if tiered is None or not tiered.provides_memory:
            now = ("is not set" if tiered is None else "is disabled" if not tiered.enabled
                   else "gives it 0% of instance memory")
            yield Issue(join(path, "kv_cache.l2.backend"), l2.backend,
                        f"needs the cluster's tiered storage, but hyperpod.tiered_storage {now}; set "
                        "hyperpod.tiered_storage.memory_percent (TieredStorageConfig, mode Enable): its daemon on "
                        "every node is the tier's storage")
    if getattr(root, "production", False) and l2.backend == "tieredstorage" and not l2.accept_shared_unencrypted:
        yield Issue(join(path, "kv_cache.l2.accept_shared_unencrypted"), l2.accept_shared_unencrypted,
                    f"a production endpoint must accept the tier's caveats explicitly: {CAVEATS}; set it to true "
                    "to accept them, or leave kv_cache.l2 out (L1 stays on)")


def kv_warnings(e: EndpointFields, path: str = "") -> list[Issue]:
    """The tiered-storage caveats, unless accepted (a production environment refuses them unaccepted)."""
    l2 = e.kv_cache.l2 if e.kv_cache is not None else None
    if l2 is None or l2.backend != "tieredstorage" or l2.accept_shared_unencrypted:
        return []
    return [Issue(join(path, "kv_cache.l2.backend"), l2.backend,
                  f"{CAVEATS}; do not use it for tenants that must not read each other's prompts, or set "
                  "kv_cache.l2.accept_shared_unencrypted: true to accept this")]
