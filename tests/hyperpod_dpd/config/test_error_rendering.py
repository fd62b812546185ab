"""Error rendering (hyperpod_dpd.errors) is bounded by construction: a value that is huge, deep, shared many times or
contains itself renders in a few characters and a few microseconds, and every issue stays on one line."""

from __future__ import annotations

import time
from typing import Any

import pytest

from hyperpod_dpd.errors import (
    MAX_RENDERED_ISSUES,
    MAX_VALUE_WIDTH,
    MISSING,
    ConfigError,
    Issue,
    Verbatim,
    render_value,
)


def _shared(width: int, levels: int) -> list[Any]:
    """A list that references the level below ``width`` times, ``levels`` deep: width^levels leaves, one object each."""
    value: list[Any] = ["lol"] * width
    for _ in range(levels - 1):
        value = [value] * width
    return value


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def _itself() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _mapping_itself() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


@pytest.mark.parametrize(("value", "start"), [
    (_shared(9, 9), "[[[[[[[[[...], [...],"),  # 387 million leaves behind nine objects; depth 8 is shown
    (_deep(100_000), "[[[[[[[[[...]]]]]]]]]"),  # far deeper than Python's recursion limit
    (_itself(), "[1, [...]]"),
    (_mapping_itself(), "{'a': 1, 'self': {...}}"),
    ("x" * 10_000_000, "'xxxxxxxx"),
    (10 ** 5000, "<a number of 16610 bits>"),  # beyond Python's 4,300-digit str() limit
    (list(range(1_000_000)), "[0, 1, 2, 3,"),
], ids=["shared 9^9", "100,000 deep", "a list in itself", "a mapping in itself", "a 10 MB string",
        "a 5,000-digit number", "a million items"])
def test_any_value_renders_bounded(value: Any, start: str) -> None:
    # WHEN a hostile value is rendered for an error line
    began = time.perf_counter()
    text = render_value(value)
    seconds = time.perf_counter() - began
    # THEN it is short, starts as the value does, and costs next to nothing whatever the value's real size
    assert text.startswith(start), text
    assert len(text) <= MAX_VALUE_WIDTH and seconds < 0.05, (len(text), seconds)


@pytest.mark.parametrize(("value", "text"), [
    (MISSING, "missing"), (None, "null"), (True, "true"), (False, "false"), ("null", "'null'"), (3, "3"),
    (Verbatim("1:30"), "1:30"), ([1, "a", None], "[1, 'a', null]"), ({"k": [True]}, "{'k': [true]}"),
    ((1, 2), "[1, 2]"),
])
def test_values_render_as_the_yaml_author_recognises_them(value: Any, text: str) -> None:
    assert render_value(value) == text


def test_a_long_value_is_cut_with_an_ellipsis() -> None:
    text = render_value({"key": "v" * 200})
    assert len(text) == MAX_VALUE_WIDTH and text.endswith("...") and text.startswith("{'key': 'vvv")


def test_an_issue_stays_on_one_line_whatever_its_key_and_message_hold() -> None:
    # GIVEN an issue whose path and message carry line breaks and a huge text (keys and names come from the file)
    issue = Issue("tags.a\nb", "v", "bad\nvalue " + "x" * 10_000)
    # WHEN it is rendered THEN it is one bounded line, the breaks escaped
    line = issue.render("dev.yaml")
    assert "\n" not in line and line.startswith("dev.yaml: tags.a\\nb: 'v': bad\\nvalue xxx") and len(line) < 2_400


def test_a_config_error_lists_a_bounded_number_of_issues_and_keeps_them_all() -> None:
    # GIVEN far more problems than a reader can use
    issues = [Issue(f"tags.k{i}", i, "bad") for i in range(MAX_RENDERED_ISSUES + 50)]
    error = ConfigError("dev.yaml", issues)
    # THEN the text shows the first ones and counts the rest; the error still holds every issue
    lines = str(error).splitlines()
    assert len(lines) == MAX_RENDERED_ISSUES + 1 and lines[-1] == "dev.yaml: ... and 50 more problems"
    assert error.issues == issues
