"""Rendering of command results: a table for people, stable JSON for pipelines."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

OUTPUT_FORMATS = ("table", "json")


def print_json(data: Any, stream: TextIO | None = None) -> None:
    json.dump(data, stream or sys.stdout, indent=2, sort_keys=False, default=str)
    (stream or sys.stdout).write("\n")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None,
                stream: TextIO | None = None) -> None:
    """A plain-text table (rich renders it when the output is a terminal)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    Console(file=stream or sys.stdout, width=160, soft_wrap=False).print(table)


# ---- shared by the operations commands (preflight, status, wait, smoke) -------------------------------------------

STATUS_STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def escape_cell(value: Any) -> str:
    """A table cell with rich markup escaped, so AWS messages containing ``[...]`` print verbatim."""
    from rich.markup import escape

    return "" if value is None else escape(str(value))


def status_label(status: str) -> str:
    """``PASS`` / ``WARN`` / ``FAIL`` coloured for terminals (plain text elsewhere)."""
    style = STATUS_STYLES.get(status.lower(), "")
    label = escape_cell(status.upper())
    return f"[{style}]{label}[/{style}]" if style else label


def environment_arguments(parser: Any) -> None:
    """``--env NAME`` (reads ``config/NAME.yaml`` through the typed loader) and ``--config-dir``."""
    parser.add_argument("--env", required=True, metavar="NAME", help="environment: reads <config-dir>/NAME.yaml")
    parser.add_argument("--config-dir", default=None, metavar="DIR",
                        help="directory of environment files (default: $HPDPD_CONFIG_DIR, else ./config)")


def load_environment_from_args(args: Any) -> Any:
    """The typed environment named by ``--env``; a bad or unknown file raises ``ConfigError`` (one line per problem).

    The configuration package (pydantic) is imported here, not at parse time, so ``hpdpd --help`` stays fast.
    """
    from hyperpod_dpd.config.loader import config_dir, load_environment

    return load_environment(args.env, config_dir(args.config_dir))


# ---- the command's deadline (hyperpod_dpd/ops/deadline.py) ---------------------------------------------------------------


def _seconds(text: str, *, zero: bool) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not zero):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number of seconds {'of 0 or more' if zero else 'above 0'}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds greater than 0 (a bad value is argparse's one-line usage error)."""
    return _seconds(text, zero=False)


def non_negative_seconds(text: str) -> float:
    """An argparse type: 0 or more seconds."""
    return _seconds(text, zero=True)


def timeout_argument(parser: Any, *, default: float, what: str) -> None:
    """``--timeout SECONDS``: the command's deadline (every AWS and Kubernetes call, retries included, ends by then)."""
    parser.add_argument("--timeout", type=positive_seconds, default=default, metavar="SECONDS",
                        help=f"{what}; every AWS and Kubernetes call, its retries included, ends by then "
                             f"(default {default:g})")


def command_deadline(seconds: float, option: str = "--timeout") -> Any:
    """The command's :class:`~hyperpod_dpd.ops.deadline.Deadline`, started now."""
    from hyperpod_dpd.ops.deadline import Deadline

    return Deadline(seconds=seconds, option=option)
