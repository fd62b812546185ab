"""pydantic's validation errors as the toolkit's one-line issues (``path: value: message``).

Its own module, below the models and the loader alike: the loader turns a whole environment's errors into issues, and
:func:`hyperpod_dpd.config.endpoints.parse_endpoint` one endpoint's, without the endpoint model importing the loader
(which imports the environment, which imports the endpoint model).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from hyperpod_dpd.config.yaml_safe import field_path
from hyperpod_dpd.errors import MISSING, Issue

__all__ = ["issues_from_validation"]


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg) if t is not type(None)]
    return [annotation]


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the model that sits at ``loc`` (used to say what an unknown key could have been)."""
    current: list[Any] = [model]
    for part in loc:
        following: list[Any] = []
        for candidate in current:
            if isinstance(part, int):
                origin = typing.get_origin(candidate)
                if origin in (tuple, list):
                    following.extend(_unwrap(typing.get_args(candidate)[0]))
            elif isinstance(candidate, type) and issubclass(candidate, BaseModel) and part in candidate.model_fields:
                following.extend(_unwrap(candidate.model_fields[part].annotation))
            elif typing.get_origin(candidate) is dict:
                following.extend(_unwrap(typing.get_args(candidate)[1]))
        current = following
    for candidate in current:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return list(candidate.model_fields)
    return None


def issues_from_validation(error: ValidationError, model: type[BaseModel]) -> list[Issue]:
    """Turn pydantic's errors into the toolkit's ``path: value: message`` issues."""
    issues = []
    items = error.errors(include_url=False)
    failed = [tuple(item["loc"]) for item in items]
    for item in items:
        loc = tuple(item["loc"])
        kind = item["type"]
        if kind == "too_short" and any(len(other) > len(loc) and other[:len(loc)] == loc for other in failed):
            continue  # pydantic counts only the items that validated: the item's own error is the one to report
        if kind == "extra_forbidden":
            allowed = _allowed_keys(model, loc[:-1]) or []
            # A misspelt key names the one it was meant to be (the closest allowed key, if any is close).
            meant = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            hint = f"; did you mean {meant[0]!r}?" if meant else ""
            issues.append(Issue(field_path(loc), loc[-1], f"unknown key; allowed keys here: {', '.join(allowed)}{hint}"))
        elif kind == "missing":
            issues.append(Issue(field_path(loc), MISSING, "is required"))
        else:
            message = item["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            issues.append(Issue(field_path(loc), item.get("input"), message))
    return issues
