"""The ``openAPIV3Schema`` of the vendored CRDs (``k8s/crds/``, sources in ``k8s/crds/SOURCES.md``), read as data.

The configuration checks an endpoint's ``overrides`` against it when its file loads
(:mod:`hyperpod_dpd.config.endpoint_overrides`), without cdk8s; the manifest validation
(:mod:`hyperpod_dpd.k8s.validation`) uses the same schemas, so the two cannot disagree.

* :func:`crd_schemas`: ``(apiVersion, kind)`` -> schema, the IEC ``v1`` one extended by :func:`extend_schema` with
  the fields of later operators (:data:`hyperpod_dpd.catalogue.operator.IEC_EXTENSION_FIELDS`), and only those.
* :func:`undeclared` / :func:`unknown_fields`: the fields a value holds that the schema does not declare (the API
  server would prune them without a word).
* :func:`field_path`: ``spec.worker.args[0]``, keys that hold dots or slashes quoted (``requests['nvidia.com/gpu']``).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from hyperpod_dpd.catalogue.operator import IEC_EXTENSION_FIELDS, CrdField
from hyperpod_dpd.catalogue.operator_api import IEC_API_VERSION, IEC_KIND
from hyperpod_dpd.config.base import join
from hyperpod_dpd.errors import Issue

IEC_V1 = (IEC_API_VERSION, IEC_KIND)
# The k8s package's data (hyperpod_dpd/k8s is the repository's k8s/), read as files: importing hyperpod_dpd.k8s would
# start cdk8s, which the configuration never needs.
CRD_DIR = Path(__file__).resolve().parents[1] / "k8s" / "crds"
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def field_path(parts: Iterable[Any], prefix: str = "") -> str:
    """``spec.worker.args[0]`` (below ``prefix`` when given); keys that contain dots or slashes are quoted:
    ``requests['nvidia.com/gpu']``."""
    out = prefix
    for part in parts:
        if isinstance(part, str) and not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]"
        else:
            out = join(out, part)
    return out or "<root>"


def extend_schema(schema: Mapping[str, Any], fields: Mapping[str, CrdField] = IEC_EXTENSION_FIELDS) -> dict[str, Any]:
    """A copy of an IEC ``openAPIV3Schema`` that declares ``fields`` too.

    Raises ``ValueError`` when a field's parent is not an object of the schema, or when the schema declares the field
    already: then the vendored CRD is newer than the table assumes, and the row should go.
    """
    extended = copy.deepcopy(dict(schema))
    for field in fields.values():
        *parents, name = field.path.split(".")
        node = extended
        for part in parents:
            node = node.get("properties", {}).get(part)
            if not isinstance(node, dict) or node.get("type") != "object":
                raise ValueError(f"{field.path}: the CRD schema has no object at {part!r} to extend")
        properties = node.setdefault("properties", {})
        if field.declared:
            if name not in properties:
                raise ValueError(f"{field.path}: marked declared, but the vendored CRD does not declare it")
            continue
        if name in properties:
            raise ValueError(f"{field.path}: the vendored CRD declares it already (operator {field.introduced} "
                             "field); remove it from IEC_EXTENSION_FIELDS")
        properties[name] = copy.deepcopy(dict(field.schema))
    return extended


def extend_schemas(schemas: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The vendored CRD schemas with the IEC ``v1`` schema extended by the table (the version hyperpod-dpd renders)."""
    extended = dict(schemas)
    if IEC_V1 in extended:
        extended[IEC_V1] = extend_schema(extended[IEC_V1])
    return extended


@functools.lru_cache(maxsize=1)
def crd_schemas() -> Mapping[tuple[str, str], Mapping[str, Any]]:
    """``(apiVersion, kind)`` -> ``openAPIV3Schema`` of every version of every vendored CRD (IEC ``v1`` extended)."""
    schemas: dict[tuple[str, str], Mapping[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        # libyaml's loader when PyYAML has it: the vendored CRD is ~450 KB, ten times faster to parse in C
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        for crd in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):  # noqa: S506 - a safe loader
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    # The IEC fields of later operators that hyperpod-dpd renders (hyperpod_dpd.k8s.extensions), and only those.
    return extend_schemas(schemas)


def undeclared(value: Any, schema: Mapping[str, Any],
               path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], list[str]]]:
    """``(path of the key, the fields declared beside it)`` for each key of ``value`` the schema does not declare."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is None and not isinstance(extra, dict):
            return  # a free-form object (e.g. metadata), validated by the API server itself
        for key, item in value.items():
            if properties is not None and key in properties:
                yield from undeclared(item, properties[key], (*path, key))
            elif isinstance(extra, dict):
                yield from undeclared(item, extra, (*path, key))
            else:
                yield (*path, key), sorted(properties or {})
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from undeclared(item, schema["items"], (*path, index))


def unknown_fields(value: Any, schema: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[Issue]:
    """Fields the schema does not declare; Kubernetes would drop them without a word."""
    for where, allowed in undeclared(value, schema, path):
        yield Issue(field_path(where), where[-1], f"is not a field of the CRD schema; allowed here: {', '.join(allowed)}")
