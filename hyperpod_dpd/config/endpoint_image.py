"""What an endpoint's worker image can run: the vLLM and LMCache versions it ships, and the routing strategy and
LMCache mode that need newer ones.

The versions come from the catalogue for the documented DPD images (:data:`~hyperpod_dpd.catalogue.operator.
DPD_WORKER_IMAGES`), from the tag of an ``lmcache/vllm-openai`` image for LMCache, or from ``image_versions``, where
the user states what an image of their own ships. A feature gated on a version the image is known not to have is
refused, with the fix; so is one whose version nobody knows (fail safe: the user states it in ``image_versions``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from hyperpod_dpd.catalogue.operator import (
    DPD_WORKER_IMAGES,
    KVAWARE_MIN_LMCACHE,
    KVAWARE_MIN_VLLM,
    LMCACHE_MULTIPROCESS_MINIMUM,
    at_least,
    component_version_key,
    image_lmcache_version,
    image_vllm_version,
)
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_sections import ComponentVersion as ComponentVersion  # re-exported: the model
from hyperpod_dpd.config.endpoint_sections import ImageVersions as ImageVersions
from hyperpod_dpd.config.names import is_unresolved
from hyperpod_dpd.errors import Issue

if TYPE_CHECKING:
    from hyperpod_dpd.config.endpoint_fields import EndpointFields


def _versions(e: EndpointFields) -> tuple[str | None, str | None]:
    """The (vLLM, LMCache) versions of the endpoint's image: stated, else from the catalogue or the tag."""
    stated = e.image_versions or ImageVersions()
    image = e.worker_image
    return (stated.vllm or image_vllm_version(image), stated.lmcache or image_lmcache_version(image))


_NAMES = {"vllm": "vLLM", "lmcache": "LMCache"}


def _fix(component: str, minimum: str) -> str:
    key = component.lower()
    return (f"an image with {component} {minimum} or later and image_versions.{key} saying so "
            f"(image_versions: {{{key}: \"{minimum}\"}})")


def image_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    """Known-bad image choices: ``image_versions`` that contradict the catalogue, ``kvaware`` on an image whose vLLM or
    LMCache is too old or unknown, ``lmcache.mode: MultiProcess`` on an image whose LMCache is too old or unknown."""
    image = e.worker_image
    stated = e.image_versions
    if stated is not None and image in DPD_WORKER_IMAGES:
        contradictions = [
            Issue(join(path, f"image_versions.{component}"), value,
                  f"{image} is a documented DPD image that ships {_NAMES[component]} {known} (SageMaker HyperPod DPD "
                  "page); remove image_versions, or set image to the image that ships this version")
            for component, known in (("vllm", image_vllm_version(image)), ("lmcache", image_lmcache_version(image)))
            if (value := getattr(stated, component)) is not None and known is not None
            and component_version_key(value) != component_version_key(known)]
        if contradictions:  # the catalogue's versions decide; a contradiction is reported alone
            yield from contradictions
            return
    vllm, lmcache = _versions(e)
    which = "a CDK token" if is_unresolved(image) else image
    if e.routing.strategy == "kvaware":
        # The kvaware matrix (catalogue.operator.KVAWARE_MIN_VLLM): vLLM and LMCache both gate it; one line says all.
        gates = (("vLLM", vllm, KVAWARE_MIN_VLLM), ("LMCache", lmcache, KVAWARE_MIN_LMCACHE))
        old = [f"{name} {version}" for name, version, minimum in gates if version is not None and not at_least(version, minimum)]
        unknown = [name for name, version, _ in gates if version is None]
        if old or unknown:
            found = [f"{which} ships {' and '.join(old)}"] if old else []
            if unknown:
                found.append(f"hyperpod-dpd cannot tell which {' or '.join(unknown)} {which} ships")
            example = ", ".join(f'{name.lower()}: "{minimum}"' for name, _, minimum in gates)
            yield Issue(join(path, "routing.strategy"), "kvaware",
                        f"needs vLLM {KVAWARE_MIN_VLLM} and LMCache {KVAWARE_MIN_LMCACHE} or later (AWS 'KV caching "
                        f"and intelligent routing' version matrix), but {', and '.join(found)}; use strategy "
                        "'prefixaware', 'session' or 'roundrobin', or an image that ships them with image_versions "
                        f"saying so (image_versions: {{{example}}})")
    if e.lmcache is not None and e.lmcache.mode == "MultiProcess":
        # sagemaker-hyperpod-cli #464: the LMCache server sidecar of MultiProcess needs LMCache 0.5.0 or later.
        if lmcache is None:
            yield Issue(join(path, "lmcache.mode"), "MultiProcess",
                        f"needs LMCache {LMCACHE_MULTIPROCESS_MINIMUM} or later, and hyperpod-dpd cannot tell which "
                        f"LMCache {which} ships; use mode 'InProcess', or "
                        f"{_fix('LMCache', LMCACHE_MULTIPROCESS_MINIMUM)}")
        elif not at_least(lmcache, LMCACHE_MULTIPROCESS_MINIMUM):
            yield Issue(join(path, "lmcache.mode"), "MultiProcess",
                        f"needs LMCache {LMCACHE_MULTIPROCESS_MINIMUM} or later, but {which} ships LMCache "
                        f"{lmcache}; use mode 'InProcess', or {_fix('LMCache', LMCACHE_MULTIPROCESS_MINIMUM)}")


def image_warnings(e: EndpointFields, path: str) -> list[Issue]:
    """An image that is not a documented DPD image may work (it must ship LMCache, NIXL and the EFA libfabric
    provider, which hyperpod-dpd cannot see): a warning, never an error."""
    image = e.worker_image
    if is_unresolved(image) or image in DPD_WORKER_IMAGES:
        return []
    return [Issue(join(path, "image"), image,
                  "is not a documented DPD image (it must ship LMCache, NIXL and the EFA libfabric provider); "
                  f"documented: {', '.join(DPD_WORKER_IMAGES)}")]
