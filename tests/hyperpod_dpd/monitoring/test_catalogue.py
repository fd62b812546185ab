"""The metric catalogue, the alert rules and the dashboard built from it: one name per metric everywhere, AWS's names
where AWS's own HyperPod set-up uses the metric, thresholds from the configuration, valid rules and Grafana JSON."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.config.alerts import DEFAULT_TPOT_MS, DEFAULT_TTFT_MS
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.monitoring import METRICS
from hyperpod_dpd.monitoring.alerts import (
    LOG_ALARMS,
    alertmanager_definition,
    all_rules,
    endpoint_targets,
    node_rules,
    rule_groups,
    rules_yaml,
)
from hyperpod_dpd.monitoring.dashboard import render as render_dashboard
from hyperpod_dpd.monitoring.dashboard import rows
from hyperpod_dpd.monitoring.export import main as export_main
from hyperpod_dpd.monitoring.export import write_dashboards
from hyperpod_dpd.monitoring.metrics import Matcher, selector
from hyperpod_dpd.monitoring.validation import (
    MonitoringError,
    check_dashboard,
    check_rule_file,
    dashboard_problems,
    promql_problems,
)
from tests.paths import FIXTURE_CONFIG_DIR

REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "aws-reference"  # AWS's files, see SOURCES.md there
AWS_DASHBOARD = REFERENCE / "inference.json"
AWS_RULES = REFERENCE / "alert-rules.yaml"
# How a query names a series: bare (``DCGM_FI_DEV_XID_ERRORS > 0``, ``x_bucket{...}``) or by a ``__name__`` regex.
BARE = re.compile(r'(?<![\w:"=~$.])([a-zA-Z_][a-zA-Z0-9_:]*)(?=\{|\[|\s*>|\s+offset|\s+or\s|\)|$)')
BY_NAME = re.compile(r'__name__=~"([^"]+)"')
NOT_SERIES = {"le", "pod_name", "Hostname", "gpu"}
DPD_ALERTS = {"DpdE2eTtftP99BoundAboveSlo", "DpdTpotP99AboveSlo", "DpdPrefillQueueHigh", "DpdKvTransferSlow",
              "DpdFallbackRatioHigh", "DpdRequestErrorsHigh", "DpdTtftMetricsMissing", "DpdKvTransferMetricsMissing",
              "DpdRequestErrorsMetricsMissing", "DpdTpotMetricsMissing", "DpdPrefillQueueMetricsMissing",
              "DpdFallbackRatioMetricsMissing", "DpdGpuXidMetricsMissing", "DpdGpuEccMetricsMissing"}


def _env(base: dict[str, Any], mutate: Any = None) -> EnvironmentConfig:
    data = copy.deepcopy(base)
    if mutate:
        mutate(data)
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)


@pytest.fixture(scope="module")
def dev_config(base_configs: dict[str, dict[str, Any]]) -> EnvironmentConfig:
    return _env(base_configs["dev"])


@pytest.fixture(scope="module")
def two_endpoints(base_configs: dict[str, dict[str, Any]]) -> EnvironmentConfig:
    """dev with its endpoint's objective set, and a second endpoint on the defaults."""
    def mutate(data: dict[str, Any]) -> None:
        first = data["endpoints"][0]
        first["slo"] = {"ttft_ms": 1500, "tpot_ms": 45}
        second = {**copy.deepcopy(first), "name": "llama-small", "namespace": "llm-small"}
        del second["slo"]
        data["endpoints"].append(second)
        data["alerts"] = {"prefill_queue_depth": 12, "kv_transfer_p99_ms": 250, "fallback_ratio": 0.5, "error_ratio": 0.1}
        # (a node pair per endpoint: two endpoints cannot share the one prefill and one decode node)
        data["hyperpod"]["instance_groups"] = [{**g, "count": 2} if g["name"] in ("prefill", "decode") else g
                                               for g in data["hyperpod"]["instance_groups"]]
    return _env(base_configs["dev"], mutate)


def _series(expr: str) -> set[str]:
    """The series an expression reads, as the catalogue renders them (a name, or its ``[:_]`` pattern)."""
    return {m for m in BARE.findall(BY_NAME.sub("", expr)) if m not in NOT_SERIES} | set(BY_NAME.findall(expr))


def _parts(metric: Any) -> set[str]:
    """How a query may name the metric: each series of a histogram (``_bucket``, ``_count``, ``_sum``) or the name."""
    return {metric.part_pattern(p) or metric.part_series(p) for p in ("bucket", "count", "sum")}


def _catalogue_series() -> set[str]:
    return {series for m in METRICS.values() if m.source.prometheus for series in _parts(m)}


def _dashboard_exprs(document: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in document["panels"] for t in p.get("targets", []) if "expr" in t]


# -- one catalogue ------------------------------------------------------------------------------------------------------

def test_every_alert_and_panel_reads_only_catalogue_metrics(two_endpoints: EnvironmentConfig) -> None:
    # GIVEN the rules and the dashboard of an environment WHEN their expressions are read THEN every series in them is
    # a catalogue metric, and every metric they declare is the catalogue's object (not a copy with another name)
    catalogue = set(METRICS.values())
    rules, document = all_rules(two_endpoints), render_dashboard(two_endpoints)
    for rule in rules:
        assert set(rule.metrics) <= catalogue
        read = _series(rule.expr)
        assert read and read <= _catalogue_series(), rule.alert
        # the declared metrics are exactly the ones read
        assert read <= {s for m in rule.metrics for s in _parts(m)}, rule.alert
        assert all(_parts(m) & read for m in rule.metrics), rule.alert
    for expr in _dashboard_exprs(document):
        assert _series(expr) and _series(expr) <= _catalogue_series(), expr
    panel_metrics = {m for row in rows(two_endpoints) for panel in row.panels for m in panel.metrics}
    assert panel_metrics <= catalogue
    # AND every alerted metric is on the dashboard too
    assert {m for r in rules for m in r.metrics} | {a.metric for a in LOG_ALARMS} <= panel_metrics


def test_cloudwatch_panels_read_the_log_metrics_the_alarms_watch(dev_config: EnvironmentConfig) -> None:
    document = render_dashboard(dev_config)
    cloudwatch = {t["metricName"]: (t["namespace"], t["region"]) for p in document["panels"]
                  for t in p.get("targets", []) if "metricName" in t}
    assert cloudwatch == {a.metric.name: ("HyperPodDPD/hpdpd-dev", dev_config.region) for a in LOG_ALARMS}


def test_a_label_the_catalogue_does_not_list_is_refused() -> None:
    with pytest.raises(ValueError, match="vllm:num_requests_waiting has no label endpoint"):
        selector(METRICS["waiting"], Matcher("endpoint", "x"))
    with pytest.raises(ValueError, match="is a CloudWatch metric"):
        selector(METRICS["buffer_overflow"])


def test_names_match_aws_reference_where_they_overlap() -> None:
    # GIVEN AWS's own HyperPod inference dashboard and alert rules
    dashboard_text, rules = AWS_DASHBOARD.read_text(), yaml.safe_load(AWS_RULES.read_text())
    aws_rules = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    # THEN every catalogue metric that cites them appears there under the same name
    for metric in METRICS.values():
        if "inference.json" in metric.reference:
            assert f"{metric.series}{{" in dashboard_text, metric.name
        if "alert-rules.yaml" in metric.reference:
            alert = metric.reference.rsplit("alert ", 1)[1]
            assert metric.name in aws_rules[alert]["expr"], metric.name
            assert set(metric.labels) <= set(re.findall(r"\$labels\.(\w+)", json.dumps(rules))), metric.name
    # AND the GPU rules keep AWS's alert names and expressions
    ours = {r.alert: r for r in node_rules()}
    for name in ("GPUXidError", "GPUMemoryErrorDetected"):
        assert ours[name].expr == aws_rules[name]["expr"]
    # AND the inference labels the alerts filter on are the ones AWS's dashboard filters on
    for label in ("namespace", "resource_name", "status", "pod_name", "cluster_id", "resource_type"):
        assert re.search(rf"\b{label}[=~!]", dashboard_text) or f"({label}" in dashboard_text or\
            f", {label})" in dashboard_text, label


# -- alert rules --------------------------------------------------------------------------------------------------------

def test_each_endpoint_has_every_dpd_signal_with_its_own_thresholds(two_endpoints: EnvironmentConfig) -> None:
    groups = {g["name"]: g["rules"] for g in rule_groups(two_endpoints)["groups"]}
    assert set(groups) == {"hyperpod-dpd-llama-3-3-70b", "hyperpod-dpd-llama-small", "hyperpod-dpd-nodes"}
    first, second = endpoint_targets(two_endpoints)
    for target, (ttft, tpot) in ((first, (1500, 45)), (second, (DEFAULT_TTFT_MS, DEFAULT_TPOT_MS))):
        rules = {r["alert"]: r for r in groups[f"hyperpod-dpd-{target.name}"]}
        assert set(rules) == DPD_ALERTS
        # every generation of the endpoint's IEC, never one generation's hash
        scope = f'namespace="{target.namespace}",resource_name=~"{target.name}-[0-9a-f]{{6}}"'
        assert all(scope in r["expr"] and target.resource_name not in r["expr"] for r in rules.values())
        assert rules["DpdE2eTtftP99BoundAboveSlo"]["expr"].endswith(f"> {ttft}")
        assert rules["DpdE2eTtftP99BoundAboveSlo"]["expr"].count("histogram_quantile(0.995") == 2
        assert rules["DpdTpotP99AboveSlo"]["expr"].endswith(f"* 1000 > {tpot}")
        assert rules["DpdPrefillQueueHigh"]["expr"].endswith("> 12")
        assert rules["DpdKvTransferSlow"]["expr"].endswith("* 1000 > 250")
        assert rules["DpdFallbackRatioHigh"]["expr"].endswith("> 0.5")
        assert rules["DpdRequestErrorsHigh"]["expr"].endswith(") > 0) > 0.1")
        assert rules["DpdRequestErrorsHigh"]["labels"]["severity"] == "critical"
        assert {r["labels"]["endpoint"] for r in rules.values()} == {target.name}
        assert {r["labels"]["severity"] for r in rules.values()} <= {"critical", "warning"}
    assert {r["alert"] for r in groups["hyperpod-dpd-nodes"]} == {"GPUXidError", "GPUMemoryErrorDetected"}


def test_rule_file_is_a_valid_prometheus_rule_file_and_every_expression_parses(two_endpoints: EnvironmentConfig) -> None:
    document = yaml.safe_load(rules_yaml(two_endpoints))
    check_rule_file(document)
    for group in document["groups"]:
        for rule in group["rules"]:
            promql_parser.parse(rule["expr"])  # the real PromQL grammar (pinned in requirements-dev.txt)
            assert re.fullmatch(r"\d+m", rule["for"])
            assert set(rule["annotations"]) == {"summary", "description"}


@pytest.mark.parametrize(("document", "message"), [
    ({}, "'groups' is a required property"),
    ({"groups": [{"name": "g", "rules": [{"alert": "A"}]}]}, "'expr' is a required property"),
    ({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "for": "five"}]}]}, "does not match"),
    ({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "labels": {"a": 1}}]}]}, "is not of type 'string'"),
    ({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up"}, {"alert": "A", "expr": "up"}]}]}, "duplicate alert"),
    ({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "sum(rate(x[5m])"}]}]}, "unclosed '('"),
])
def test_a_malformed_rule_file_is_refused(document: dict[str, Any], message: str) -> None:
    with pytest.raises(MonitoringError, match=re.escape(message)):
        check_rule_file(document)


@pytest.mark.parametrize(("expr", "problem"), [
    ("sum(rate(x[5m]))", None),
    ('histogram_quantile(0.99, sum by (le) (rate(a:b_bucket{x="1",y=~"p-.*"}[5m]))) * 1000 > 5', None),
    ("x > 0 or y > y offset 5m", None),
    ("sum(rate(x[5m])", "unclosed '('"),
    ("sum(rate(x[5m)))", "unbalanced ')'"),
    ('x{a="1"', "unclosed '{'"),
    ('x{a=1}', "bad label matcher"),
    ('x{a=~"("}', "bad regular expression"),
    ("rate(x[five])", "must be a duration"),
    ("rates(x[5m])", "unknown function 'rates'"),
    ("", "empty expression"),
    ("x ? 1", "unexpected character"),
])
def test_promql_check_finds_lexical_mistakes(expr: str, problem: str | None) -> None:
    problems = promql_problems(expr)
    if problem is None:
        assert problems == []
        promql_parser.parse(expr)
    else:
        assert any(problem in p for p in problems), problems


def test_alertmanager_definition_routes_every_alert_to_the_topic() -> None:
    definition = yaml.safe_load(alertmanager_definition("arn:aws:sns:us-west-2:111111111111:alerts", "us-west-2"))
    config = yaml.safe_load(definition["alertmanager_config"])
    (receiver,) = config["receivers"]
    assert config["route"]["receiver"] == receiver["name"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"] == "arn:aws:sns:us-west-2:111111111111:alerts"
    assert sns["sigv4"] == {"region": "us-west-2"}  # AMP requires the Region
    assert not {"api_url", "http_config"} & set(sns)  # AMP refuses both


# -- dashboard ----------------------------------------------------------------------------------------------------------

def test_dashboard_validates_against_grafanas_schema(two_endpoints: EnvironmentConfig) -> None:
    document = render_dashboard(two_endpoints)
    assert dashboard_problems(document) == []
    # AND it survives a JSON round trip (what the export writes)
    assert dashboard_problems(json.loads(json.dumps(document))) == []
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
    for expr in _dashboard_exprs(document):
        promql_parser.parse(expr)
        assert 'resource_name=~"$endpoint-[0-9a-f]{6}"' in expr or expr.startswith("max by (Hostname, gpu)"), expr


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.pop("schemaVersion"), "'schemaVersion' is a required property"),
    (lambda d: d["panels"][1].update(gridPos={"h": 8, "w": 30, "x": 0, "y": 0}), "panels/1/gridPos/w: 30 is greater than the maximum of 24"),
    (lambda d: d.update(refresh=5), "refresh: 5 is not of type 'string'"),
    (lambda d: d["panels"][2].update(id=d["panels"][1]["id"]), "duplicate panel id"),
    (lambda d: d.update(colour="red"), "Additional properties are not allowed"),
])
def test_a_broken_dashboard_fails_the_schema_check(dev_config: EnvironmentConfig, mutate: Any, message: str) -> None:
    document = render_dashboard(dev_config)
    mutate(document)
    with pytest.raises(MonitoringError, match=re.escape(message)):
        check_dashboard(document)


def test_dashboard_draws_the_objectives_and_offers_every_endpoint(two_endpoints: EnvironmentConfig) -> None:
    document = render_dashboard(two_endpoints)
    panels = {p["title"]: p for p in document["panels"]}
    steps = panels["E2E TTFT (upper bound of the P99)"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == 1500  # the strictest slo.ttft_ms of the two endpoints
    assert panels["Decode latency (TPOT)"]["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 45
    (endpoint,) = [v for v in document["templating"]["list"] if v["name"] == "endpoint"]
    names = [t.name for t in endpoint_targets(two_endpoints)]
    # names, not patterns (Grafana escapes a multi-value variable's regex characters); "All" is one group
    assert endpoint["query"].split(",") == names
    assert endpoint["allValue"] == f"({'|'.join(names)})"


def test_export_writes_one_dashboard_per_environment_with_endpoints(tmp_path: Path, dev_config: EnvironmentConfig,
                                                                   base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN a stale dashboard of an environment that no longer has endpoints
    stale = tmp_path / "prod" / "dpd.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    prod = parse_environment(copy.deepcopy(base_configs["prod"]), name="prod", source="prod.yaml",
                             base_dir=FIXTURE_CONFIG_DIR.parent)
    # WHEN the dashboards are written
    written = write_dashboards(tmp_path, [dev_config, prod])
    # THEN dev's is valid Grafana JSON and prod's stale file is gone
    assert written == {"dev": tmp_path / "dev" / "dpd.json", "prod": None}
    check_dashboard(json.loads((tmp_path / "dev" / "dpd.json").read_text()))
    assert not stale.exists()
    assert export_main(["--out", str(tmp_path / "cli"), "--env", "dev"]) == 0
    assert (tmp_path / "cli" / "dev" / "dpd.json").is_file()


# -- configuration ------------------------------------------------------------------------------------------------------

def test_slo_and_alerts_default_when_left_out(dev_config: EnvironmentConfig) -> None:
    (endpoint,) = dev_config.endpoints
    assert (endpoint.slo.ttft_ms, endpoint.slo.tpot_ms) == (DEFAULT_TTFT_MS, DEFAULT_TPOT_MS)
    assert dev_config.alerts.enabled and dev_config.alerts.emails == () and dev_config.alerts.container_log_group is None


@pytest.mark.parametrize(("mutate", "line"), [
    (lambda d: d["endpoints"][0].update(slo={"ttft_ms": 0}), "endpoints[0].slo.ttft_ms: 0: Input should be greater than or equal to 1"),
    (lambda d: d["endpoints"][0].update(slo={"tpot_ms": "50"}), "endpoints[0].slo.tpot_ms: '50': must be a whole number, not a string"),
    (lambda d: d["endpoints"][0].update(slo={"ttft": 100}), "endpoints[0].slo.ttft: 'ttft': unknown key; allowed keys here: ttft_ms, tpot_ms"),
    (lambda d: d.update(alerts={"emails": ["oncall"]}), "alerts.emails[0]: 'oncall': must be an e-mail address"),
    (lambda d: d.update(alerts={"https_endpoints": ["http://x.example.com"]}), "alerts.https_endpoints[0]: 'http://x.example.com': must be an https:// URL"),
    (lambda d: d.update(alerts={"fallback_ratio": 1.5}), "alerts.fallback_ratio: 1.5: Input should be less than 1"),
    (lambda d: d.update(alerts={"error_ratio": 1}), "alerts.error_ratio: 1: Input should be less than 1"),
    (lambda d: d.update(alerts={"error_ratio": 0}), "alerts.error_ratio: 0: Input should be greater than 0"),
    (lambda d: d.update(alerts={"error_ratio": "5%"}), "alerts.error_ratio: '5%': must be a number, not a string"),
])
def test_bad_alert_settings_are_one_line_errors(base_configs: dict[str, dict[str, Any]], mutate: Any, line: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _env(base_configs["dev"], mutate)
    (only,) = str(raised.value).splitlines()  # one line, naming the field, its value and the rule
    assert only.startswith(f"dev.yaml: {line}")
