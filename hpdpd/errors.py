"""The toolkit's own error types: one clear line per problem, never a jsii trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def render_value(value: Any) -> str:
    """Short, quoted rendering of a bad value for error messages."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class Issue:
    """One problem at one field path."""

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
