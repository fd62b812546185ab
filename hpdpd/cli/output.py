"""Rendering of command results: a table for people, stable JSON for pipelines."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence, TextIO

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
