"""``InferenceEndpointConfig`` fields newer than the vendored CRD (operator 3.3), driven by one table.

The table is :data:`hyperpod_dpd.catalogue.operator.IEC_EXTENSION_FIELDS` (JSON path, operator release, source,
schema shape); it lives in the catalogue so the configuration checks can gate the fields on ``operator.version``
without loading cdk8s. This module is its Kubernetes side:

* :func:`extension_patches` / :func:`apply_extensions` render the fields into a manifest with ``cdk8s.JsonPatch.add``
  (the generated classes have no such fields, and ``cdk8s.ApiObject(..., spec=...)`` is not available from Python);
* :func:`extend_schemas` (in :mod:`hyperpod_dpd.config.iec_schema`, which the configuration reads without cdk8s)
  adds exactly these fields, with their shapes, to the IEC schema the manifest validation uses, so anything else the
  vendored CRD does not declare is still rejected. Rows marked ``declared`` (fields the vendored CRD has, which an
  endpoint section renders by patch: ``spec.modelCacheConfig``) are checked to be declared and validated by the CRD's
  own schema.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import cdk8s

from hyperpod_dpd.catalogue.operator import IEC_EXTENSION_FIELDS, CrdField
from hyperpod_dpd.config.iec_schema import IEC_V1 as IEC_V1  # re-exported: defined here before
from hyperpod_dpd.config.iec_schema import extend_schema as extend_schema
from hyperpod_dpd.config.iec_schema import extend_schemas as extend_schemas


def extension_field(path: str) -> CrdField:
    """The table row of ``path``; a path outside the table is a programming error (it would fail validation)."""
    try:
        return IEC_EXTENSION_FIELDS[path]
    except KeyError:
        raise ValueError(f"{path!r} is not an IEC extension field; known: {', '.join(IEC_EXTENSION_FIELDS)}") from None


def _pointer(parts: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def extension_patches(manifest: Mapping[str, Any], values: Mapping[str, Any]) -> list[cdk8s.JsonPatch]:
    """``add`` operations that put each ``{dotted path: value}`` into ``manifest``, creating missing parent objects
    (``spec.kubernetes`` for ``spec.kubernetes.podTemplateAnnotations``). A value may sit inside an earlier one
    (``spec.modelCacheConfig.weightsCache.nodeAffinity`` after ``spec.modelCacheConfig.weightsCache``): the parents
    that earlier values add are not created again."""
    patches: list[cdk8s.JsonPatch] = []
    seen: dict[str, Any] = copy.deepcopy(dict(manifest))  # the manifest as the patches so far leave it
    for path, value in values.items():
        parts = extension_field(path).path.split(".")
        node: Any = seen
        for depth in range(1, len(parts)):
            child = node.get(parts[depth - 1]) if isinstance(node, dict) else None
            if not isinstance(child, dict):
                patches.append(cdk8s.JsonPatch.add(_pointer(parts[:depth]), {}))
                child = node[parts[depth - 1]] = {}
            node = child
        patches.append(cdk8s.JsonPatch.add(_pointer(parts), value))
        node[parts[-1]] = copy.deepcopy(value)
    return patches


def apply_extensions(manifest: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` with the extension fields ``values`` added (unchanged when there are none)."""
    patches = extension_patches(manifest, values)
    return dict(cdk8s.JsonPatch.apply(manifest, *patches)) if patches else manifest
