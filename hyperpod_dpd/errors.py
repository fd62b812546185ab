"""The toolkit's own error types: one clear line per problem, never a jsii trace."""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class Missing(enum.Enum):
    """The value of a key that is absent (as opposed to present with the value null)."""

    MISSING = "missing"

    def __repr__(self) -> str:
        return "missing"


MISSING = Missing.MISSING
MAX_VALUE_WIDTH = 80
# Rendering is bounded by construction, whatever the value: at most this many containers deep (deeper ones print as
# [...] or {...}), and no container, string or repr is walked past the width budget. A value that holds itself (a list
# inside itself) prints [...] where it recurs, as Python's own repr does.
MAX_VALUE_DEPTH = 8
# An issue's field path and message are user-influenced (keys, names) and rendered on one line: capped and escaped.
MAX_PATH_WIDTH = 200
MAX_MESSAGE_WIDTH = 2000
# A ConfigError's text lists this many issues at most, then how many more there are (the issues stay complete).
MAX_RENDERED_ISSUES = 100


class Verbatim(str):
    """A value rendered as the file wrote it, without quotes: the text of a YAML scalar such as ``1:30`` that the
    loader refused before reading it as anything."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


class _Full(Exception):
    """The width budget is spent: stop walking the value."""


class _Writer:
    def __init__(self, budget: int) -> None:
        self.parts: list[str] = []
        self.left = budget

    def write(self, text: str) -> None:
        if len(text) >= self.left:
            self.parts.append(text[:self.left])
            self.left = 0
            raise _Full
        self.parts.append(text)
        self.left -= len(text)


def _scalar(value: Any, budget: int) -> str:
    """One non-container value, computed from at most ``budget`` characters of it where Python allows."""
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes)) and not isinstance(value, Verbatim):
        return repr(value[:budget])  # a truncated string: the writer cuts it before its closing quote
    try:
        text = repr(value)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return f"<a number of {value.bit_length()} bits>" if isinstance(value, int) else f"<{type(value).__name__}>"
    except Exception:  # a foreign object whose repr fails: the message must still be written
        return f"<{type(value).__name__}>"
    return text


def _write(value: Any, out: _Writer, depth: int, open_ids: set[int]) -> None:
    container = isinstance(value, (list, tuple, dict, set, frozenset))
    if not container:
        out.write(_scalar(value, out.left + 1))
        return
    is_dict = isinstance(value, dict)
    opening, closing = ("{", "}") if is_dict or isinstance(value, (set, frozenset)) else ("[", "]")
    if id(value) in open_ids or depth >= MAX_VALUE_DEPTH:
        out.write(f"{opening}...{closing}")
        return
    open_ids.add(id(value))
    out.write(opening)
    for index, item in enumerate(value.items() if is_dict else value):
        if index:
            out.write(", ")
        if is_dict:
            _write(item[0], out, depth + 1, open_ids)
            out.write(": ")
            _write(item[1], out, depth + 1, open_ids)
        else:
            _write(item, out, depth + 1, open_ids)
    out.write(closing)
    open_ids.discard(id(value))


def render_value(value: Any, width: int = MAX_VALUE_WIDTH) -> str:
    """Short rendering of a bad value for error messages: strings quoted, ``null`` for a null value, ``missing`` for
    an absent key (:data:`MISSING`), ``true``/``false`` for booleans, lists and mappings in flow style.

    Bounded by construction: it stops walking the value once ``width`` characters are written, so a huge or deeply
    nested value (a YAML alias bomb) costs no more than a short one, and a value that contains itself terminates.
    """
    out = _Writer(width + 1)
    try:
        _write(value, out, 0, set())
    except _Full:
        pass
    text = "".join(out.parts)
    return text if len(text) <= width else text[:width - 3] + "..."


def one_line(text: str, width: int) -> str:
    """``text`` on one line: line breaks and other control characters escaped, at most ``width`` characters."""
    cut = text[:width + 1]
    if not cut.isprintable():
        cut = "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)
    return cut if len(cut) <= width else cut[:width - 3] + "..."


@dataclass(frozen=True)
class Issue:
    """One problem at one field path. ``value`` is :data:`MISSING` when the key is absent."""

    path: str
    value: Any
    message: str

    def render(self, source: str | None = None) -> str:
        where = f"{one_line(source, MAX_PATH_WIDTH)}: " if source else ""
        return (f"{where}{one_line(self.path, MAX_PATH_WIDTH)}: {render_value(self.value)}: "
                f"{one_line(self.message, MAX_MESSAGE_WIDTH)}")


class HpdpdError(Exception):
    """Base class of every error the toolkit raises on purpose."""


class ConfigError(HpdpdError):
    """A configuration (file or typed props) is invalid.

    ``str(error)`` is one line per issue: ``<file>: <field.path>: <value>: <what is allowed>`` (the first
    :data:`MAX_RENDERED_ISSUES`, then one line saying how many more; ``issues`` holds them all).
    """

    def __init__(self, source: str | None, issues: list[Issue]):
        if not issues:
            raise ValueError("ConfigError needs at least one issue")
        self.source = source
        self.issues = list(issues)
        lines = [i.render(source) for i in self.issues[:MAX_RENDERED_ISSUES]]
        if len(self.issues) > MAX_RENDERED_ISSUES:
            lines.append(f"{source or 'configuration'}: ... and {len(self.issues) - MAX_RENDERED_ISSUES} more problems")
        super().__init__("\n".join(lines))

    @classmethod
    def single(cls, source: str | None, path: str, value: Any, message: str) -> ConfigError:
        return cls(source, [Issue(path, value, message)])


class ConfigWarning(UserWarning):
    """A configuration is valid but will probably not do what its author wants."""


# The exit status of a command that could not run because of its input (the CLI's and app.py's, docs/cli.md).
EXIT_BAD_INPUT = 2


@contextmanager
def exit_on_config_error() -> Iterator[None]:
    """The entry point of a CDK app that uses the toolkit: a :class:`HpdpdError` (a bad configuration file, bad props
    of a construct, an unknown model bucket) raised inside the block ends the program with the line the toolkit's own
    ``app.py`` prints, ``error: <file>: <field>: <value>: <what is allowed>`` (one line per issue), on stderr and
    exit status 2, instead of a Python traceback::

        with exit_on_config_error():
            config = load_environment("ml-dev")
            app = cdk.App(context=availability_zone_context(config))
            ServingStack(app, "Serving", config=config)
            app.synth()

    Anything else propagates unchanged: an error that is not the toolkit's is a bug and keeps its traceback.
    """
    try:
        yield
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
