"""Typed overrides of an ``InferenceEndpointConfig``: set a spec field the toolkit does not model yet, by JSON pointer
(``/spec/kvCacheSpec/enableL2Cache``), checked against the CRD's ``openAPIV3Schema`` before anything joins the manifest.

* :func:`override_issues`: a pointer the schema does not declare is refused with its name and the fields allowed
  there; a value of the wrong shape (type, enum, pattern, bounds, undeclared nested fields) is refused with the
  schema's message. The schema is the one the manifest validation uses (the vendored CRD plus the extension fields
  of later operators, :mod:`hyperpod_dpd.k8s.extensions`).
* :func:`rendered_at`: whether the toolkit renders a value at a pointer already: such a field is set through the
  typed configuration, where its checks run (replicas against the groups' capacity, the fields that name the IEC's
  generation), so an override of it is refused.
* :func:`apply_overrides`: writes the values into a rendered manifest, creating missing parent objects; an array
  element must exist already (or ``-`` appends one).

Used by :meth:`hyperpod_dpd.k8s.endpoint.DisaggregatedEndpoint.add_override` and the endpoint's ``overrides:``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema

from hyperpod_dpd.catalogue.operator import IEC_EXTENSION_FIELDS
from hyperpod_dpd.config.endpoint_kv import pointer_problem
from hyperpod_dpd.errors import Issue
from hyperpod_dpd.k8s.extensions import IEC_V1
from hyperpod_dpd.k8s.validation import crd_schemas, unknown_fields


def tokens(pointer: str) -> list[str]:
    """``/spec/a~1b/c`` -> ``["spec", "a/b", "c"]`` (RFC 6901 unescaping)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _dotted(parts: list[str]) -> str:
    return ".".join(parts) or "<root>"


def schema_at(pointer: str, schema: Mapping[str, Any] | None = None) -> tuple[Mapping[str, Any] | None, Issue | None]:
    """The sub-schema at ``pointer`` (None below a free-form object), or the issue naming the undeclared part."""
    node: Mapping[str, Any] = schema if schema is not None else crd_schemas()[IEC_V1]
    walked: list[str] = []
    for token in tokens(pointer):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return None, None  # the CRD declares anything below as free-form
        if node.get("type") == "array":
            if token != "-" and not token.isdigit():  # noqa: S105 - a JSON pointer token, not a secret
                return None, Issue(pointer, token, f"{_dotted(walked)} is a list; index it with a number or '-'")
            node = node.get("items") or {}
        else:
            properties = node.get("properties")
            extra = node.get("additionalProperties")
            if properties is not None and token in properties:
                node = properties[token]
            elif isinstance(extra, Mapping):
                node = extra
            elif properties is None and extra is None and node.get("type") == "object":
                return None, None  # a free-form object (the API server validates it)
            else:
                allowed = ", ".join(sorted(properties or {})) or "none"
                return None, Issue(pointer, token, f"is not a field of {_dotted(walked)} in the InferenceEndpointConfig "
                                                   f"CRD schema; allowed there: {allowed}")
        walked.append(token)
    return node, None


def override_issues(pointer: str, value: Any) -> Iterator[Issue]:
    """Why ``value`` cannot go at ``pointer`` of an IEC: a malformed or undeclared path, or a value the schema
    refuses."""
    problem = pointer_problem(pointer)
    if problem:
        yield Issue(pointer, pointer, problem)
        return
    schema, issue = schema_at(pointer)
    if issue is not None:
        yield issue
        return
    if schema is None:
        return
    for error in sorted(jsonschema.Draft7Validator(schema).iter_errors(value), key=lambda e: list(map(str, e.path))):
        where = "/".join([pointer, *map(str, error.absolute_path)])
        yield Issue(where, error.instance, f"the CRD schema refuses it: {error.message}")
    for extra in unknown_fields(value, schema, ()):
        yield Issue(f"{pointer}/{extra.path.replace('.', '/')}", extra.value, extra.message)


# IEC fields a typed setting of the endpoint owns even where it renders nothing (an empty list, an unset section): an
# override at, below or above one would skip that setting's checks (managed vLLM flags, the DPD environment that names
# the generation) or its operator release (the IEC_EXTENSION_FIELDS rows, gated on operator.version).
TYPED_FIELDS: Mapping[str, str] = {
    "/spec/worker/args": "args", "/spec/worker/environmentVariables": "environment",
    "/spec/pdSpec/prefillSpec/args": "prefill.args", "/spec/pdSpec/decodingSpec/args": "decode.args",
    **{"/" + field.path.replace(".", "/"): field.path for field in IEC_EXTENSION_FIELDS.values()},
}


def typed_field(pointer: str) -> str | None:
    """The typed setting that owns the IEC field at ``pointer`` (or one inside or around it), else None."""
    for owned, setting in TYPED_FIELDS.items():
        if pointer == owned or pointer.startswith(f"{owned}/") or owned.startswith(f"{pointer}/"):
            return setting
    return None


def rendered_at(manifest: Mapping[str, Any], pointer: str) -> bool:
    """Whether ``manifest`` holds a value at ``pointer``; ``-`` appends to the list before it, so it counts as that
    list's value."""
    node: Any = manifest
    if pointer.endswith("/-"):
        pointer = pointer[:-2]
    for token in tokens(pointer):
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        elif isinstance(node, Mapping) and token in node:
            node = node[token]
        else:
            return False
    return True


def apply_overrides(manifest: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``manifest`` with each ``{pointer: value}`` set; ``ValueError`` when a list element is missing."""
    out = copy.deepcopy(manifest)
    for pointer, value in overrides.items():
        *parents, last = tokens(pointer)
        node: Any = out
        for depth, token in enumerate(parents):
            if isinstance(node, list):
                index = int(token) if token.isdigit() else -1
                if not 0 <= index < len(node):
                    raise ValueError(f"{pointer}: {_dotted(parents[:depth])} has no element {token} to set a field in")
                node = node[index]
            else:  # a missing parent: a list where the schema declares an array ('/spec/tags/-' appends to [])
                if token not in node:
                    schema, _ = schema_at("".join(f"/{t.replace('~', '~0').replace('/', '~1')}"
                                                  for t in parents[:depth + 1]))
                    node[token] = [] if (schema or {}).get("type") == "array" else {}
                node = node[token]
        if isinstance(node, list):
            if last == "-":
                node.append(copy.deepcopy(value))
            elif last.isdigit() and int(last) < len(node):
                node[int(last)] = copy.deepcopy(value)
            else:
                raise ValueError(f"{pointer}: {_dotted(parents)} has {len(node)} elements; set an existing index or "
                                 "'-' to append")
        else:
            node[last] = copy.deepcopy(value)
    return out
