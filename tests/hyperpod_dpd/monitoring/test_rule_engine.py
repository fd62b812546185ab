"""The alert rules through Prometheus's own rule engine: ``promtool check rules`` over every environment (the
fixtures', a two-endpoint variant, and the user's ``config/``), and ``promtool test rules`` with seeded failures and
healthy series for every alert (:mod:`tests.hyperpod_dpd.monitoring.rule_scenarios`). Without promtool these tests fail and
name ``make setup-system``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, list_environments, load_all, parse_environment
from hyperpod_dpd.monitoring.alerts import endpoint_targets, rule_groups, rules_yaml
from hyperpod_dpd.monitoring.metrics import METRICS, quantile_ms
from hyperpod_dpd.monitoring.signals import INVOCATIONS
from tests.hyperpod_dpd.monitoring import promtool
from tests.hyperpod_dpd.monitoring.rule_scenarios import (
    RANGE_SELECTOR,
    TTFB_BUCKETS_MS,
    duration_minutes,
    scenarios,
    settled_eval_time,
    two_hop_scenario,
    unit_tests,
)
from tests.paths import FIXTURE_CONFIG_DIR, USER_CONFIG_DIR

FIXTURE_ENVIRONMENTS = list_environments(FIXTURE_CONFIG_DIR)


def _two_endpoints(base: dict[str, Any]) -> EnvironmentConfig:
    """dev with its own objective and thresholds, and a second endpoint on the defaults in another namespace."""
    data = copy.deepcopy(base)
    first = data["endpoints"][0]
    first["slo"] = {"ttft_ms": 1500, "tpot_ms": 45}
    data["endpoints"].append({**copy.deepcopy(first), "name": "llama-small", "namespace": "llm-small"})
    del data["endpoints"][1]["slo"]
    data["alerts"] = {"prefill_queue_depth": 12, "kv_transfer_p99_ms": 250, "fallback_ratio": 0.5, "error_ratio": 0.1}
    # (a node pair per endpoint: two endpoints cannot share the one prefill and one decode node)
    data["hyperpod"]["instance_groups"] = [{**g, "count": 2} if g["name"] in ("prefill", "decode") else g
                                           for g in data["hyperpod"]["instance_groups"]]
    return parse_environment(data, name="two-endpoints", source="two-endpoints.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)


@pytest.fixture(scope="module")
def environments(base_configs: dict[str, dict[str, Any]]) -> dict[str, EnvironmentConfig]:
    loaded = {c.name: c for c in load_all(FIXTURE_CONFIG_DIR, FIXTURE_ENVIRONMENTS)}
    return {**loaded, "two-endpoints": _two_endpoints(base_configs["dev"])}


@pytest.fixture(scope="module")
def written(environments: dict[str, EnvironmentConfig], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every environment's rule file and its promtool unit-test file, generated from the same rule objects."""
    folder = tmp_path_factory.mktemp("promtool")
    for name, config in environments.items():
        text = rules_yaml(config)
        (folder / f"{name}.rules.yaml").write_text(text)
        document = unit_tests(yaml.safe_load(text), f"{name}.rules.yaml", scenarios(config))
        (folder / f"{name}.test.yaml").write_text(yaml.safe_dump(document, sort_keys=False, width=1000))
    return folder


ENVIRONMENTS = [*FIXTURE_ENVIRONMENTS, "two-endpoints"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_promtool_accepts_every_fixture_rule_file(written: Path, env: str) -> None:
    # GIVEN an environment's rule file as AMP receives it WHEN Prometheus's own checker reads it THEN it passes
    result = promtool.run("check", "rules", f"{env}.rules.yaml", cwd=written)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_alert_fires_on_its_failure_and_stays_silent_when_healthy(written: Path, env: str,
                                                                        environments: dict[str, EnvironmentConfig]) -> None:
    # GIVEN seeded series for every alert of the environment, failing and healthy
    config = environments[env]
    cases = scenarios(config)
    alerts = {r["alert"] for g in rule_groups(config)["groups"] for r in g["rules"]}
    assert {c.alert for c in cases if c.firing} == alerts == {c.alert for c in cases if not c.firing}
    # WHEN promtool evaluates the rules over them THEN each fires exactly where expected, with its labels and text
    result = promtool.run("test", "rules", f"{env}.test.yaml", cwd=written)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_case_is_judged_before_its_alert_has_settled(written: Path, env: str) -> None:
    # GIVEN an environment's rules and its promtool cases
    rules = {r["alert"]: r for g in yaml.safe_load((written / f"{env}.rules.yaml").read_text())["groups"]
             for r in g["rules"]}
    tests = yaml.safe_load((written / f"{env}.test.yaml").read_text())["tests"]
    for case in tests:
        (check,) = case["alert_rule_test"]
        rule = rules[check["alertname"]]
        # THEN each is evaluated no earlier than its alert's `for` plus its longest range: a silent case proves
        # nothing before then
        needed = duration_minutes(rule.get("for", "0m")) + max((duration_minutes(r) for r in RANGE_SELECTOR.findall(rule["expr"])), default=0)
        assert duration_minutes(check["eval_time"]) >= needed, (case["name"], check["eval_time"], needed)


def test_settling_refuses_an_offset() -> None:
    # GIVEN a rule that looks back further than its ranges WHEN its settling time is asked THEN it is refused
    with pytest.raises(ValueError, match="offset"):
        settled_eval_time([{"alert": "X", "expr": "rate(x[5m] offset 1h) > 0", "for": "5m"}])


def test_settling_refuses_a_rule_that_outlasts_the_seeded_series() -> None:
    # GIVEN a rule that settles after the hour of seeded samples WHEN its settling time is asked THEN it is refused,
    # since a case judged after the series end would see no data and pass as silent
    with pytest.raises(ValueError, match="series end"):
        settled_eval_time([{"alert": "X", "expr": "rate(x[30m]) > 0", "for": "30m"}])


def test_the_two_hop_case_of_the_issue_fires(environments: dict[str, EnvironmentConfig], tmp_path: Path) -> None:
    # GIVEN dev's endpoint (objective 2,000 ms), a 1.9 s prefill hop and a 0.3 s decode first byte (client ~2.2 s)
    config = environments["dev"]
    (target,) = endpoint_targets(config)
    assert target.slo.ttft_ms == 2000
    case = two_hop_scenario(target, 1900, 300, fires=True, name="1.9 s prefill hop + 0.3 s decode first byte")
    (tmp_path / "rules.yaml").write_text(rules_yaml(config))
    document = unit_tests(rule_groups(config), "rules.yaml", [case])
    # AND one P99 over the requests of every pod of both roles (the old expression) computes 1,990 ms: no alert
    old = quantile_ms(METRICS["ttfb"], 0.99, *target.matchers, *INVOCATIONS, window="5m")
    settled = document["tests"][0]["alert_rule_test"][0]["eval_time"]
    document["tests"][0]["promql_expr_test"] = [{"expr": old, "eval_time": settled,
                                                 "exp_samples": [{"labels": "{}", "value": 1990}]}]
    (tmp_path / "issue.test.yaml").write_text(yaml.safe_dump(document, sort_keys=False, width=1000))
    # WHEN promtool evaluates THEN the bound (1997.5 + 498.75 ms with these buckets) fires
    assert case.firing[0].value == pytest.approx(2496.25)
    assert {1500, 2000, 250, 500} <= set(TTFB_BUCKETS_MS)
    result = promtool.run("test", "rules", "issue.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_rules_of_every_user_environment(tmp_path: Path) -> None:
    # GIVEN whatever config/ holds (nothing about its content is asserted) WHEN each rule file is checked THEN it passes
    configs = load_all(USER_CONFIG_DIR, list_environments(USER_CONFIG_DIR))
    assert configs, f"no environment in {USER_CONFIG_DIR}"
    for config in configs:
        path = tmp_path / f"{config.name}.rules.yaml"
        path.write_text(rules_yaml(config))
        result = promtool.run("check", "rules", path.name, cwd=tmp_path)
        assert result.returncode == 0, f"{config.name}: {result.stdout}{result.stderr}"


def test_without_promtool_the_tests_fail_and_name_the_set_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # GIVEN a PATH without promtool WHEN a test asks for it THEN it fails (not skips), naming make setup-system
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="make setup-system"):
        promtool.promtool()
