"""Checks of an endpoint's ``overrides`` (IEC spec fields by JSON pointer, ``/spec/kvCacheSpec/enableL2Cache``) against
the CRD's ``openAPIV3Schema`` (:mod:`hyperpod_dpd.config.iec_schema`), run when the configuration loads, before anything
renders; :mod:`hyperpod_dpd.k8s.overrides` applies them, and :meth:`DisaggregatedEndpoint.add_override` runs the same
checks for an override set in Python.

* :func:`override_issues`: a pointer the schema does not declare is refused with its name and the fields allowed
  there; a value of the wrong shape (type, enum, pattern, bounds, undeclared nested fields) is refused with its field
  path inside the override and what the schema allows there.
* :func:`typed_field`: the typed setting that owns a pointer (the vLLM args, the worker's environment, the fields of
  later operators): an override of it is refused, so that setting's checks and operator gating run.
* :func:`overrides_issues`: both, for every override of an endpoint, under its field path
  (``endpoints[0].overrides['/spec/metrics'].enabled``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jsonschema

from hyperpod_dpd.catalogue.operator import IEC_EXTENSION_FIELDS
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_kv import pointer_problem
from hyperpod_dpd.config.endpoint_kv_checks import kv_owned
from hyperpod_dpd.config.iec_schema import IEC_V1, crd_schemas, field_path, undeclared
from hyperpod_dpd.errors import MISSING, Issue

if TYPE_CHECKING:
    from hyperpod_dpd.config.endpoint_fields import EndpointFields

SCHEMA_NAME = "the InferenceEndpointConfig CRD schema"

# IEC fields a typed setting of the endpoint owns even where it renders nothing (an empty list, an unset section): an
# override at, below or above one would skip that setting's checks (managed vLLM flags, the DPD environment that names
# the generation) or its operator release (the IEC_EXTENSION_FIELDS rows, gated on operator.version).
TYPED_FIELDS: Mapping[str, str] = {
    "/spec/worker/args": "args", "/spec/worker/environmentVariables": "environment",
    "/spec/pdSpec/prefillSpec/args": "prefill.args", "/spec/pdSpec/decodingSpec/args": "decode.args",
    **{"/" + field.path.replace(".", "/"): field.path for field in IEC_EXTENSION_FIELDS.values()},
}


def tokens(pointer: str) -> list[str]:
    """``/spec/a~1b/c`` -> ``["spec", "a/b", "c"]`` (RFC 6901 unescaping)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _dotted(parts: list[str]) -> str:
    return ".".join(parts) or "<root>"


def typed_field(pointer: str) -> str | None:
    """The typed setting that owns the IEC field at ``pointer`` (or one inside or around it), else None (and None for
    a malformed pointer, which :func:`override_issues` refuses)."""
    if pointer_problem(pointer):
        return None
    for owned, setting in TYPED_FIELDS.items():
        if pointer == owned or pointer.startswith(f"{owned}/") or owned.startswith(f"{pointer}/"):
            return setting
    return None


def typed_message(typed: str | None) -> str:
    """Why an override of a field the endpoint's typed configuration renders (or owns: ``typed``) is refused."""
    return (f"is rendered from the endpoint's typed configuration{f' ({typed})' if typed else ''}; set it there, "
            "where its checks and operator release run (an override would bypass them and could patch in place a "
            "field that names the IEC's generation)")


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
                return None, Issue(pointer, token, f"is not a field of {_dotted(walked)} in {SCHEMA_NAME}; "
                                                   f"allowed there: {allowed}")
        walked.append(token)
    return node, None


def _listed(values: Any) -> str:
    return ", ".join(repr(v) for v in values)


def allowed(error: jsonschema.ValidationError) -> str:
    """What the schema allows where ``error`` refused a value, from the keyword that refused it."""
    expected, keyword = error.validator_value, error.validator
    words = {
        "type": lambda: f"must be of type {expected}" if isinstance(expected, str)
        else f"must be one of the types {', '.join(expected)}",
        "enum": lambda: f"must be one of {_listed(expected)}",
        "const": lambda: f"must be {expected!r}",
        "pattern": lambda: f"must match the pattern {expected!r}",
        "format": lambda: f"must be a {expected}",
        "minimum": lambda: f"must be at least {expected}",
        "maximum": lambda: f"must be at most {expected}",
        "exclusiveMinimum": lambda: f"must be greater than {expected}",
        "exclusiveMaximum": lambda: f"must be less than {expected}",
        "minLength": lambda: f"must hold at least {expected} characters",
        "maxLength": lambda: f"must hold at most {expected} characters",
        "minItems": lambda: f"must hold at least {expected} items",
        "maxItems": lambda: f"must hold at most {expected} items",
        "minProperties": lambda: f"must hold at least {expected} fields",
        "maxProperties": lambda: f"must hold at most {expected} fields",
    }
    rule = words.get(str(keyword))
    return f"{rule() if rule else error.message} ({SCHEMA_NAME})"


def override_issues(pointer: str, value: Any, field: str | None = None) -> Iterator[Issue]:
    """Why ``value`` cannot go at ``pointer`` of an IEC: a malformed or undeclared path, or a value the schema refuses.

    Issues are rooted at ``field`` (``endpoints[0].overrides['/spec/metrics']``, a place inside the value below it:
    ``...['/spec/metrics'].enabled``) when given, else at the pointer (``/spec/metrics/enabled``)."""
    def where(parts: Any) -> str:
        parts = list(parts)
        if field is not None:
            return field_path(parts, field)
        return "/".join([pointer, *map(str, parts)])

    problem = pointer_problem(pointer)
    if problem:
        yield Issue(field or pointer, pointer, problem)
        return
    schema, issue = schema_at(pointer)
    if issue is not None:
        yield Issue(field or issue.path, issue.value, issue.message)
        return
    if schema is None:
        return
    for error in sorted(jsonschema.Draft7Validator(schema).iter_errors(value), key=lambda e: list(map(str, e.path))):
        if error.validator == "required":  # the message names the missing field: "'name' is a required property"
            missing = [name for name in error.validator_value if name not in (error.instance or {})]
            for name in missing:
                yield Issue(where([*error.absolute_path, name]), MISSING, f"is required by {SCHEMA_NAME}")
            continue
        yield Issue(where(error.absolute_path), error.instance, allowed(error))
    for parts, declared in undeclared(value, schema):
        parent = field_path(parts[:-1], _dotted(tokens(pointer)))
        yield Issue(where(parts), parts[-1], f"is not a field of {parent} in {SCHEMA_NAME}; allowed there: "
                                             f"{', '.join(declared) or 'none'}")


def overrides_issues(e: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    """The endpoint's ``overrides`` against the CRD schema and the typed settings, each under
    ``<path>.overrides['<pointer>']``; ``root`` is the environment, or None for an endpoint built in Python. In an
    environment, a pointer into ``spec.kvCacheSpec`` is left to :func:`~hyperpod_dpd.config.endpoint_kv_checks.
    kv_issues`, which points at ``kv_cache`` (one line per override)."""
    for pointer, value in e.overrides.items():
        if root is not None and kv_owned(pointer):
            continue
        field = join(path, f"overrides[{pointer!r}]")
        typed = typed_field(pointer)
        if typed is not None:
            yield Issue(field, value, typed_message(typed))
        else:
            yield from override_issues(pointer, value, field)
