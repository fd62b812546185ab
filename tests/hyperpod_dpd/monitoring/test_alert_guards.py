"""No alert of the rule file can be silently blind: every series an alert reads (the companions' own evidence
included) is watched by a "metrics missing" companion (``signals.unobserved``) that fires when requests flow and the
series is not there, unless the series is listed in :data:`MAY_BE_ABSENT` with the reason no companion can tell it
missing from healthy. Read from the expressions themselves, parsed by promql-parser: which catalogue metric each
selector names, on which role's pods (``pod_name``); how the companions behave on data is promtool's job
(test_rule_engine.py, rule_scenarios.py)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import promql_parser
import pytest

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.monitoring.alerts import BLIND_FOR, rule_groups
from hyperpod_dpd.monitoring.metrics import METRICS, POD, ROLE_POD_PATTERN
from tests.paths import FIXTURE_CONFIG_DIR

# Series whose absence is a healthy state: a companion on them would fire on every endpoint that works.
MAY_BE_ABSENT = {
    "errors": "model_errors_total has no series for a status code before its first error; the error ratio counts a "
              "missing one as 0 (or on() vector(0)), as AWS's panel does",
}
ROLES = {pattern: role for role, pattern in ROLE_POD_PATTERN.items()}
# How a selector names a catalogue metric: the series (or its [:_] pattern) of any part of it.
SERIES = {m.part_pattern(p) or m.part_series(p): key for key, m in METRICS.items() if m.source.prometheus
          for p in ("bucket", "count", "sum")}
ANYWHERE = "anywhere"  # a selector without the endpoint's labels: a node metric


@dataclass(frozen=True)
class Read:
    """One catalogue metric on one role's pods (``None``: an endpoint selector without a role; :data:`ANYWHERE`: a
    selector without the endpoint's labels)."""

    metric: str
    role: str | None


@dataclass(frozen=True)
class Companion:
    role: str
    evidence: frozenset[Read]  # what shows that requests flow
    watched: frozenset[Read]  # what must be there while they do


def _children(node: Any) -> Iterator[Any]:
    for name in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(node, name, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield child
    yield from getattr(node, "args", None) or ()


def _reads(node: Any) -> set[Read]:
    if isinstance(node, promql_parser.VectorSelector):
        labels = {m.name: m.value for m in node.matchers.matchers}
        series = node.name or labels["__name__"]
        assert series in SERIES, f"{series} is no catalogue metric"
        scope = "namespace" in labels and "resource_name" in labels
        return {Read(SERIES[series], ROLES[labels[POD]] if POD in labels else None if scope else ANYWHERE)}
    return {r for child in _children(node) for r in _reads(child)}


def _unparen(node: Any) -> Any:
    return _unparen(node.expr) if isinstance(node, promql_parser.ParenExpr) else node


def _companions(expr: str) -> list[Companion] | None:
    """The terms of a companion (``label_replace((requests > 0) unless on() (watched > 0), "role", ...)``, joined by
    ``or``); None when the expression is anything else."""
    def terms(node: Any) -> list[Any]:
        node = _unparen(node)
        if isinstance(node, promql_parser.BinaryExpr) and str(node.op) == "or":
            return terms(node.lhs) + terms(node.rhs)
        return [node]

    found = []
    for term in terms(promql_parser.parse(expr)):
        if not (isinstance(term, promql_parser.Call) and term.func.name == "label_replace"):
            return None
        inner, role = _unparen(term.args[0]), term.args[2].val
        if not (isinstance(inner, promql_parser.BinaryExpr) and str(inner.op) == "unless"):
            return None
        found.append(Companion(role, frozenset(_reads(inner.lhs)), frozenset(_reads(inner.rhs))))
    return found


def _covered(read: Read, watched: set[Read]) -> bool:
    both = {Read(read.metric, role) for role in ROLE_POD_PATTERN}
    return read in watched or (read.role is None and both <= watched)


def unguarded(document: dict[str, Any]) -> dict[str, set[Read]]:
    """Per endpoint group: the series its alerts and the node alerts read that no companion of the group watches."""
    groups = {g["name"]: g["rules"] for g in document["groups"]}
    nodes = groups.pop("hyperpod-dpd-nodes")
    found = {}
    for name, rules in groups.items():
        companions = [c for r in rules for c in _companions(r["expr"]) or ()]
        watched = {read for c in companions for read in c.watched}
        read = {r for rule in [*rules, *nodes] for r in _reads(promql_parser.parse(rule["expr"]))}
        found[name] = {r for r in read if r.metric not in MAY_BE_ABSENT and not _covered(r, watched)}
    return found


@pytest.fixture(scope="module")
def two_endpoints(base_configs: dict[str, dict[str, Any]]) -> EnvironmentConfig:
    data = copy.deepcopy(base_configs["dev"])
    data["endpoints"].append({**copy.deepcopy(data["endpoints"][0]), "name": "llama-small", "namespace": "llm-small"})
    # (a node pair per endpoint: two endpoints cannot share the one prefill and one decode node)
    data["hyperpod"]["instance_groups"] = [{**g, "count": 2} if g["name"] in ("prefill", "decode") else g
                                           for g in data["hyperpod"]["instance_groups"]]
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)


@pytest.fixture(scope="module")
def document(two_endpoints: EnvironmentConfig) -> dict[str, Any]:
    return rule_groups(two_endpoints)


def _rules(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for g in document["groups"] for r in g["rules"]]


def test_every_series_an_alert_reads_is_watched_by_a_companion(document: dict[str, Any]) -> None:
    # GIVEN the rule file of two endpoints WHEN the series of every expression are read
    assert all(_reads(promql_parser.parse(r["expr"])) for r in _rules(document))  # nothing escapes the reading
    # THEN each one, the companions' evidence included, is watched in every endpoint's group
    assert unguarded(document) == {"hyperpod-dpd-llama-3-3-70b": set(), "hyperpod-dpd-llama-small": set()}


def test_without_the_tpot_companion_the_tpot_alert_is_reported_blind(document: dict[str, Any]) -> None:
    # GIVEN the rule file as it was before DpdTpotMetricsMissing (the TPOT alert alone on its histogram)
    stripped = copy.deepcopy(document)
    for group in stripped["groups"]:
        group["rules"] = [r for r in group["rules"] if r["alert"] != "DpdTpotMetricsMissing"]
    # THEN the decoder's TPOT histogram is reported unwatched in both endpoints' groups
    assert list(unguarded(stripped).values()) == [{Read("tpot", "decode")}] * 2


@pytest.mark.parametrize("companion", ["DpdTtftMetricsMissing", "DpdKvTransferMetricsMissing",
                                       "DpdRequestErrorsMetricsMissing", "DpdTpotMetricsMissing",
                                       "DpdPrefillQueueMetricsMissing", "DpdFallbackRatioMetricsMissing",
                                       "DpdGpuXidMetricsMissing", "DpdGpuEccMetricsMissing"])
def test_each_companion_is_the_only_watch_on_its_series(document: dict[str, Any], companion: str) -> None:
    # GIVEN the rule file without one companion THEN something it watches is reported (none is redundant, and the
    # check is not vacuous)
    stripped = copy.deepcopy(document)
    for group in stripped["groups"]:
        group["rules"] = [r for r in group["rules"] if r["alert"] != companion]
    assert all(unguarded(stripped).values())


def test_a_companion_is_a_warning_named_after_what_it_leaves_blind(document: dict[str, Any]) -> None:
    rules = _rules(document)
    signals = [r for r in rules if _companions(r["expr"]) is None]
    companions = [r for r in rules if _companions(r["expr"]) is not None]
    assert {r["alert"] for r in companions} == {r["alert"] for r in rules if r["alert"].endswith("MetricsMissing")}
    for rule in companions:
        assert (rule["labels"]["severity"], rule["for"]) == ("warning", BLIND_FOR), rule["alert"]
        for term in _companions(rule["expr"]) or ():
            # requests are shown by another series than the one watched, on the pods the role label names
            assert term.evidence and not {r.metric for r in term.evidence} & {r.metric for r in term.watched}
            assert {r.role for r in term.evidence} == {term.role}, rule["alert"]
            # AND the operator reads which alert is blind: every signal alert that reads a watched series
            blind = {s["alert"] for s in signals if _reads(promql_parser.parse(s["expr"])) & term.watched}
            assert blind and all(name in rule["annotations"]["description"] for name in blind), rule["alert"]
