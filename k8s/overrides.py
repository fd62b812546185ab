"""Typed overrides of an ``InferenceEndpointConfig``: set a spec field the toolkit does not model yet, by JSON pointer
(``/spec/kvCacheSpec/enableL2Cache``), checked against the CRD's ``openAPIV3Schema`` before anything joins the manifest.

The checks that need no rendering are the configuration's (:mod:`hyperpod_dpd.config.endpoint_overrides`, re-exported
here): an environment file's ``overrides`` are refused when it loads, naming the file, the field path inside it, the
value and what the schema allows. This module is the Kubernetes side:

* :func:`rendered_at`: whether the toolkit renders a value at a pointer already: such a field is set through the
  typed configuration, where its checks run (replicas against the groups' capacity, the fields that name the IEC's
  generation), so an override of it is refused.
* :func:`apply_overrides`: writes the values into a rendered manifest, creating missing parent objects; an array
  element must exist already (or ``-`` appends one).

Used by :meth:`hyperpod_dpd.k8s.endpoint.DisaggregatedEndpoint.add_override` and the endpoint's ``overrides:``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hyperpod_dpd.config.endpoint_overrides import TYPED_FIELDS as TYPED_FIELDS  # re-exported: defined here before
from hyperpod_dpd.config.endpoint_overrides import override_issues as override_issues
from hyperpod_dpd.config.endpoint_overrides import schema_at, tokens
from hyperpod_dpd.config.endpoint_overrides import typed_field as typed_field
from hyperpod_dpd.config.endpoint_overrides import typed_message as typed_message


def _dotted(parts: list[str]) -> str:
    return ".".join(parts) or "<root>"


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
