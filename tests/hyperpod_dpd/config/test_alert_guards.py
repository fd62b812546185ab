"""The alert guards of an environment with endpoints (hyperpod_dpd/config/alerts.py): a production environment is refused
without its SLO alerts, its decoder buffer-overflow alarm or a subscriber unless a written reason opts out; any other
environment only warns, nobody subscribed included; a reason that describes a guard which is on is refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, load_environment, parse_environment
from hyperpod_dpd.errors import ConfigError
from tests.paths import ROOT

Mutation = Callable[[dict[str, Any]], None]
ONCALL = "oncall@example.com"


def _production(base: dict[str, Any]) -> dict[str, Any]:
    """The fixture dev environment (one endpoint, the observability add-on) made production, with every guard on:
    the add-on's container logs and a subscriber."""
    data = copy.deepcopy(base)
    data.update(production=True, removal_policy="retain", termination_protection=True)
    data["operator"]["observability"]["logging"] = True
    data["alerts"] = {"emails": [ONCALL]}
    return data


def _parse(data: dict[str, Any]) -> EnvironmentConfig:
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)


def _lines(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _parse(data)
    return str(caught.value).splitlines()


def test_a_production_environment_with_every_guard_is_accepted_without_warnings(base_configs) -> None:
    # GIVEN production with the add-on (SLO rules), its logs (the buffer alarm) and an e-mail subscriber
    env = _parse(_production(base_configs["dev"]))
    # THEN it loads, no guard is missing and nothing warns
    assert env.production and env.alerts.missing_guards(env) == {}
    assert [w.path for w in env.warnings() if w.path.startswith(("alerts", "operator"))] == []


PRODUCTION_REFUSALS: dict[str, tuple[Mutation, list[str]]] = {
    "no subscriber": (
        lambda d: d.pop("alerts"),
        ["alerts.emails: []: nobody receives the alerts: list alerts.emails or alerts.https_endpoints; a production "
         "environment with endpoints needs its alert subscription, or the reason it runs without in "
         "alerts.no_subscribers_reason (docs/configuration.md, 'alerts')"]),
    "the observability add-on off": (
        lambda d: d["operator"].__setitem__("observability", {"enabled": False}),
        ["operator.observability.enabled: false: the SLO alerts are Prometheus rules in the observability add-on's "
         "workspace, which exists only with the add-on: set operator.observability.enabled: true; a production "
         "environment with endpoints needs its SLO alerts, or the reason it runs without in "
         "alerts.no_slo_alerts_reason (docs/configuration.md, 'alerts')",
         "operator.observability.logging: false: the decoder buffer-overflow alarm reads the decoder's container "
         "logs: set operator.observability.logging: true (the add-on ships them to the cluster's log group) or "
         "alerts.container_log_group; a production environment with endpoints needs its decoder buffer-overflow "
         "alarm, or the reason it runs without in alerts.no_log_alarm_reason (docs/configuration.md, 'alerts')"]),
    "an endpoint without metrics": (
        lambda d: d["endpoints"][0].__setitem__("metrics", {"enabled": False}),
        ["endpoints[0].metrics.enabled: false: the SLO alerts read the endpoint's metrics, which the operator then does "
         "not scrape: set it to true; a production environment with endpoints needs its SLO alerts, or the reason it "
         "runs without in alerts.no_slo_alerts_reason (docs/configuration.md, 'alerts')"]),
    "the alerts switched off": (
        lambda d: d["alerts"].__setitem__("enabled", False),
        ["alerts.enabled: false: turns off the SLO alerts: remove alerts.enabled: false; a production environment "
         "with endpoints needs its SLO alerts, or the reason it runs without in alerts.no_slo_alerts_reason "
         "(docs/configuration.md, 'alerts')",
         "alerts.enabled: false: turns off the decoder buffer-overflow alarm: remove alerts.enabled: false; a "
         "production environment with endpoints needs its decoder buffer-overflow alarm, or the reason it runs "
         "without in alerts.no_log_alarm_reason (docs/configuration.md, 'alerts')"]),
    "a reason for a guard that is on": (
        lambda d: d["alerts"].__setitem__("no_subscribers_reason", "the platform team's router subscribes"),
        ["alerts.no_subscribers_reason: \"the platform team's router subscribes\": applies only without the alert "
         "subscription, which this environment has; remove it"]),
    "an empty reason": (
        lambda d: d["alerts"].update(emails=[], no_subscribers_reason="   "),
        ["alerts.no_subscribers_reason: '   ': must be a sentence (1-500 characters) saying why the guard is off"]),
}


@pytest.mark.parametrize("case", list(PRODUCTION_REFUSALS), ids=list(PRODUCTION_REFUSALS))
def test_a_production_environment_without_a_guard_is_refused_with_one_line_per_guard(case: str, base_configs) -> None:
    mutate, expected = PRODUCTION_REFUSALS[case]
    # GIVEN production with every guard, then one change
    data = _production(base_configs["dev"])
    mutate(data)
    # WHEN it is loaded, THEN each missing guard is one line naming the setting, its value, the fix and the opt-out
    assert _lines(data) == [f"dev.yaml: {line}" for line in expected]


def test_a_written_reason_opts_a_production_environment_out_of_each_guard(base_configs) -> None:
    # GIVEN production without the add-on and without a subscriber, and a reason for each missing guard
    data = _production(base_configs["dev"])
    data["operator"]["observability"] = {"enabled": False}
    data["alerts"] = {"no_slo_alerts_reason": "SLOs are watched by the serving team's own Prometheus",
                      "no_log_alarm_reason": "container logs go to the central log platform, which alarms on them",
                      "no_subscribers_reason": "the central alerting system subscribes to the topic"}
    # WHEN it is loaded, THEN it is accepted: the guards are off on purpose, with the reasons in the file
    env = _parse(data)
    assert set(env.alerts.missing_guards(env)) == {"no_slo_alerts_reason", "no_log_alarm_reason",
                                                   "no_subscribers_reason"}


def test_a_container_log_group_is_the_other_way_to_the_buffer_alarm(base_configs) -> None:
    data = _production(base_configs["dev"])
    data["operator"]["observability"]["logging"] = False
    data["alerts"]["container_log_group"] = "/platform/containers/llm-serving"
    env = _parse(data)
    assert "no_log_alarm_reason" not in env.alerts.missing_guards(env)


def test_another_environment_with_endpoints_only_warns(base_configs) -> None:
    # GIVEN the fixture dev (not production): the add-on without its logs, and nobody subscribed
    env = load_environment("dev")
    assert not env.production and env.endpoints and not env.operator.observability.logging
    assert not env.alerts.emails and not env.alerts.https_endpoints
    # THEN it loads, and warns once per missing guard: the buffer alarm, and the alerts that reach nobody
    warnings = [w.render("dev.yaml") for w in env.warnings() if w.path.startswith(("alerts", "operator"))]
    assert warnings == [
        "dev.yaml: operator.observability.logging: false: the decoder buffer-overflow alarm reads the decoder's "
        "container logs: set operator.observability.logging: true (the add-on ships them to the cluster's log group) "
        "or alerts.container_log_group; or give the reason it runs without in alerts.no_log_alarm_reason",
        "dev.yaml: alerts.emails: []: nobody receives the alerts: list alerts.emails or alerts.https_endpoints; or "
        "give the reason it runs without in alerts.no_subscribers_reason"]
    # AND a reason silences each warning
    data = copy.deepcopy(base_configs["dev"])
    data["alerts"] = {"no_log_alarm_reason": "a throw-away environment",
                      "no_subscribers_reason": "the team watches the dashboard, not the topic"}
    assert [w for w in _parse(data).warnings() if w.path.startswith(("alerts", "operator"))] == []


def test_an_environment_without_endpoints_has_no_alert_guard() -> None:
    # GIVEN the fixture prod without its operator and its on-call: production, no endpoints, no observability,
    # nobody subscribed
    data = yaml.safe_load((ROOT / "tests" / "fixtures" / "config" / "prod.yaml").read_text())
    data.pop("operator"), data.pop("alerts")
    env = parse_environment(data, name="prod", source="prod.yaml", base_dir=ROOT)
    assert env.production and not env.endpoints and not env.alerts.emails
    # THEN it loads and warns about nothing: no endpoint, no DPD alerts to guard (infra/monitoring.py builds none)
    assert [w for w in env.warnings() if w.path.startswith(("alerts", "operator"))] == []
