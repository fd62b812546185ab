"""The toolkit's own error types: one clear line per problem, never a jsii trace."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Missing(enum.Enum):
    """The value of a key that is absent (as opposed to present with the value null)."""

    MISSING = "missing"

    def __repr__(self) -> str:
        return "missing"


MISSING = Missing.MISSING
MAX_VALUE_WIDTH = 80


def _literal(value: Any) -> str:
    """A value as the YAML author would recognise it: ``null``, ``true``/``false``, ``missing`` for an absent key;
    strings quoted, so the string ``'null'`` and the value ``null`` stay apart."""
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def render_value(value: Any) -> str:
    """Short rendering of a bad value for error messages: strings quoted, ``null`` for a null value, ``missing`` for
    an absent key (:data:`MISSING`), ``true``/``false`` for booleans."""
    text = _literal(value)
    return text if len(text) <= MAX_VALUE_WIDTH else text[:MAX_VALUE_WIDTH - 3] + "..."


@dataclass(frozen=True)
class Issue:
    """One problem at one field path. ``value`` is :data:`MISSING` when the key is absent."""

    path: str
    value: Any
    message: str

    def render(self, source: str | None = None) -> str:
        where = f"{source}: " if source else ""
        return f"{where}{self.path}: {render_value(self.value)}: {self.message}"


class HpdpdError(Exception):
    """Base class of every error the toolkit raises on purpose."""


class ConfigError(HpdpdError):
    """A configuration (file or typed props) is invalid.

    ``str(error)`` is one line per issue: ``<file>: <field.path>: <value>: <what is allowed>``.
    """

    def __init__(self, source: str | None, issues: list[Issue]):
        if not issues:
            raise ValueError("ConfigError needs at least one issue")
        self.source = source
        self.issues = list(issues)
        super().__init__("\n".join(i.render(source) for i in self.issues))

    @classmethod
    def single(cls, source: str | None, path: str, value: Any, message: str) -> ConfigError:
        return cls(source, [Issue(path, value, message)])


class ConfigWarning(UserWarning):
    """A configuration is valid but will probably not do what its author wants."""
