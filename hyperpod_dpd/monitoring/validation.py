"""Offline checks of what :mod:`hyperpod_dpd.monitoring` generates, run on every synth and export:

* a Prometheus rule file: its shape (``groups[].rules[]`` with alert/expr/for/labels/annotations, as Prometheus's
  ``rulefmt`` accepts) and every expression through :func:`promql_problems`;
* PromQL, lexically: balanced and well-nested brackets, label matchers ``name op "value"`` with compilable
  regular expressions, durations in ranges, and only known functions (the test suite also parses every expression
  with the ``promql-parser`` package);
* a Grafana dashboard against Grafana's dashboard JSON schema (vendored from grafana/grafana-foundation-sdk, see
  ``schemas/SOURCES.md``), plus unique panel ids and PromQL in every Prometheus target.

Each raises :class:`MonitoringError` with one line per problem.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import jsonschema

from hyperpod_dpd.errors import HpdpdError


class MonitoringError(HpdpdError):
    """A generated rule file, expression or dashboard is malformed."""

    def __init__(self, what: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{what}: " + "; ".join(problems))


_DURATION = r"^([0-9]+(ms|s|m|h|d|w|y))+$"
_LABEL_MAP = {"type": "object", "propertyNames": {"pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"},
              "additionalProperties": {"type": "string"}}
RULE_FILE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["groups"],
    "properties": {"groups": {"type": "array", "minItems": 1, "items": {
        "type": "object", "additionalProperties": False, "required": ["name", "rules"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "interval": {"type": "string", "pattern": _DURATION},
            "rules": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "required": ["alert", "expr"],
                "properties": {
                    "alert": {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"},
                    "expr": {"type": "string", "minLength": 1},
                    "for": {"type": "string", "pattern": _DURATION},
                    "keep_firing_for": {"type": "string", "pattern": _DURATION},
                    "labels": _LABEL_MAP,
                    "annotations": _LABEL_MAP}}}}}}},
}

# PromQL functions and aggregation operators (prometheus.io/docs/prometheus/latest/querying/functions/, operators/).
FUNCTIONS = frozenset("""
abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week day_of_year
days_in_month delta deriv exp floor histogram_avg histogram_count histogram_fraction histogram_quantile
histogram_stddev histogram_stdvar histogram_sum holt_winters double_exponential_smoothing hour idelta increase irate
label_join label_replace ln log2 log10 minute month predict_linear rate resets round scalar sgn sort sort_desc
sort_by_label sort_by_label_desc sqrt time timestamp vector year avg_over_time min_over_time max_over_time
sum_over_time count_over_time quantile_over_time stddev_over_time stdvar_over_time last_over_time present_over_time
mad_over_time acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh deg pi rad
sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
""".split())
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
                       "and", "or", "unless", "atan2", "inf", "nan"})
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:[0-9]+(?:ms|s|m|h|d|w|y))+(?![A-Za-z0-9_:]))
  | (?P<number>0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<ident>[a-zA-Z_][a-zA-Z0-9_:]*)
  | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=,:@])
  | (?P<open>[({\[])
  | (?P<close>[)}\]])
""", re.VERBOSE)
_PAIRS = {")": "(", "}": "{", "]": "["}


def _tokens(expr: str) -> Iterator[tuple[str, str, int]]:
    position = 0
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        if match is None:
            raise MonitoringError("PromQL", [f"unexpected character {expr[position]!r} at {position} in {expr!r}"])
        kind = match.lastgroup or ""
        if kind != "space":
            yield kind, match.group(), position
        position = match.end()


def promql_tokens(expr: str) -> list[tuple[str, str, int]]:
    """The tokens of one PromQL expression as ``(kind, text, position)``, spaces left out; kinds are the group names
    of the lexer (``string``, ``duration``, ``number``, ``ident``, ``op``, ``open``, ``close``). Raises
    :class:`MonitoringError` on a character PromQL has no token for."""
    return list(_tokens(expr))


GROUPING_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})  # take label lists
KEYWORDS = _KEYWORDS


def promql_problems(expr: str) -> list[str]:
    """Lexical problems of one PromQL expression (empty when it looks well formed)."""
    try:
        tokens = list(_tokens(expr))
    except MonitoringError as exc:
        return exc.problems
    if not tokens:
        return ["empty expression"]
    problems: list[str] = []
    stack: list[tuple[str, int]] = []
    for index, (kind, text, position) in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ("", "", len(expr))
        if kind == "open":
            stack.append((text, index))
        elif kind == "close":
            if not stack or stack[-1][0] != _PAIRS[text]:
                problems.append(f"unbalanced {text!r} at {position}")
                continue
            opener, start = stack.pop()
            if opener == "{":
                problems += _matcher_problems(tokens[start + 1:index])
            elif opener == "[":
                problems += _range_problems(tokens[start + 1:index], position)
        elif kind == "ident" and following[1] == "(" and not _grouping(tokens, index):
            if text not in FUNCTIONS and text not in _KEYWORDS:
                problems.append(f"unknown function {text!r} at {position}")
    problems += [f"unclosed {opener!r}" for opener, _ in stack]
    return problems


def _grouping(tokens: list[tuple[str, str, int]], index: int) -> bool:
    """``by (le)``, ``on (x)``: a keyword's label list, not a call."""
    return tokens[index][1] in _KEYWORDS


def _matcher_problems(inner: list[tuple[str, str, int]]) -> list[str]:
    problems: list[str] = []
    parts: list[list[tuple[str, str, int]]] = []
    current: list[tuple[str, str, int]] = []
    for token in inner:
        if token[1] == ",":
            parts.append(current)
            current = []
        else:
            current.append(token)
    parts.append(current)
    if parts and not parts[-1] and len(parts) > 1:
        parts.pop()  # a trailing comma is allowed
    for part in parts:
        if not part and len(parts) == 1:
            continue  # {} is an empty selector, legal after a metric name
        shape = [kind for kind, _, _ in part]
        if shape != ["ident", "op", "string"] or part[1][1] not in ("=", "!=", "=~", "!~"):
            problems.append(f"bad label matcher {' '.join(t for _, t, _ in part)!r}")
            continue
        if part[1][1] in ("=~", "!~"):
            try:
                re.compile(part[2][1][1:-1].replace('\\"', '"'))
            except re.error as exc:
                problems.append(f"bad regular expression {part[2][1]}: {exc}")
    return problems


def _range_problems(inner: list[tuple[str, str, int]], position: int) -> list[str]:
    shape = [kind for kind, _, _ in inner]
    if shape in (["duration"], ["duration", "op", "duration"], ["duration", "op"]):
        return []
    return [f"range or subquery at {position} must be a duration such as [5m]"]


def check_rule_file(document: Any) -> None:
    """A Prometheus rule file (as a parsed YAML document): its schema, unique names, and every expression."""
    problems = _schema_problems(RULE_FILE_SCHEMA, document)
    if not problems:
        names = [g["name"] for g in document["groups"]]
        problems += [f"duplicate group {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
        for group in document["groups"]:
            alerts = [r["alert"] for r in group["rules"]]
            problems += [f"{group['name']}: duplicate alert {a!r}" for a in sorted({a for a in alerts if alerts.count(a) > 1})]
            for rule in group["rules"]:
                problems += [f"{group['name']}/{rule['alert']}: {p}" for p in promql_problems(rule["expr"])]
    if problems:
        raise MonitoringError("Prometheus rule file", problems)


@functools.cache
def dashboard_schema() -> dict[str, Any]:
    """Grafana's dashboard JSON schema (draft-07), vendored in ``schemas/``."""
    text = resources.files("hyperpod_dpd.monitoring").joinpath("schemas/grafana-dashboard.jsonschema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _schema_problems(schema: dict[str, Any], document: Any) -> list[str]:
    """One line per schema violation; for an ``anyOf`` (a panel or a row) the most relevant branch's reason."""
    problems = []
    for error in jsonschema.Draft7Validator(schema).iter_errors(document):
        while error.context:  # the branch that matched furthest into the document
            error = max(error.context, key=lambda e: len(e.absolute_path))
        problems.append(f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}")
    return problems


def dashboard_problems(dashboard: Any) -> list[str]:
    problems = _schema_problems(dashboard_schema(), dashboard)
    if problems:
        return problems
    panels = list(_panels(dashboard.get("panels", [])))
    ids = [p.get("id") for p in panels]
    problems += [f"duplicate panel id {i}" for i in sorted({i for i in ids if ids.count(i) > 1 and i is not None})]
    for panel in panels:
        for target in panel.get("targets", []):
            if "expr" in target:
                problems += [f"panel {panel.get('title')!r}: {p}" for p in promql_problems(target["expr"])]
    return problems


def check_dashboard(dashboard: Any) -> None:
    problems = dashboard_problems(dashboard)
    if problems:
        raise MonitoringError("Grafana dashboard", problems)
