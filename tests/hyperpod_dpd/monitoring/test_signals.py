"""The multi-series signals (every generation of an endpoint, the two-hop TTFT bound, "metrics missing") and the
thresholds an alert could never cross. How they behave on data is promtool's job (test_rule_engine.py); here: the
generation pattern against the configuration's own generation format, and the one-line errors."""

from __future__ import annotations

import copy
import re
from typing import Any

import promql_parser
import pytest

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.config.endpoints import GENERATION_LENGTH
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.monitoring.alerts import endpoint_targets, rule_groups
from hyperpod_dpd.monitoring.metrics import METRICS
from hyperpod_dpd.monitoring.signals import (
    endpoint_matchers,
    endpoint_resources,
    error_ratio,
    hop_error_ratio,
    ttft_bound_ms,
    unobserved,
)
from tests.paths import FIXTURE_CONFIG_DIR


def _env(base: dict[str, Any], **alerts: Any) -> EnvironmentConfig:
    data = copy.deepcopy(base)
    data["endpoints"].append({**copy.deepcopy(data["endpoints"][0]), "name": "llama-3-3-70b-small", "namespace": "llm-small",
                              "pd_buffer_size": 4294967296})
    data["alerts"] = alerts
    # (a node pair per endpoint: two endpoints cannot share the one prefill and one decode node)
    data["hyperpod"]["instance_groups"] = [{**g, "count": 2} if g["name"] in ("prefill", "decode") else g
                                           for g in data["hyperpod"]["instance_groups"]]
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)


def test_the_pattern_matches_every_generation_of_its_endpoint_and_no_other(base_configs: dict[str, Any]) -> None:
    # GIVEN two endpoints, one named with the other's name as a prefix
    config = _env(base_configs["dev"])
    first, second = config.endpoints
    # THEN each IEC name (this generation's) matches its own endpoint's pattern only; Prometheus anchors the pattern
    for endpoint in config.endpoints:
        assert re.fullmatch(r"[0-9a-f]+", endpoint.generation) and len(endpoint.generation) == GENERATION_LENGTH
    assert re.fullmatch(endpoint_resources(first.name), first.resource_name)
    assert re.fullmatch(endpoint_resources(second.name), second.resource_name)
    assert not re.fullmatch(endpoint_resources(first.name), second.resource_name)
    # AND another generation of the same endpoint matches too (it keeps serving during a rollout)
    assert re.fullmatch(endpoint_resources(first.name), f"{first.name}-{'f' * GENERATION_LENGTH}")
    assert first.generation != second.generation  # different pd_buffer_size: different generations


def test_no_rule_selects_one_generation(base_configs: dict[str, Any]) -> None:
    config = _env(base_configs["dev"])
    exprs = [r["expr"] for g in rule_groups(config)["groups"] for r in g["rules"]]
    for endpoint in config.endpoints:
        assert not any(endpoint.resource_name in e for e in exprs)


def test_a_name_that_is_not_a_dns_label_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a DNS label"):
        endpoint_resources("llama.*")


def test_the_composite_expressions_parse() -> None:
    # the real PromQL grammar (promql-parser, pinned in requirements-dev.txt)
    matchers = endpoint_matchers("llama-3-3-70b", "llm-serving")
    promql_parser.parse(ttft_bound_ms(*matchers))
    promql_parser.parse(unobserved("prefill", METRICS["kv_store"], *matchers))
    promql_parser.parse(unobserved("decode", METRICS["finished"], *matchers, requests=METRICS["ttfb"]))
    promql_parser.parse(unobserved("prefill", METRICS["waiting"], *matchers, seen="exists"))
    promql_parser.parse(unobserved("decode", (METRICS["ecc_dbe_volatile"], METRICS["ecc_dbe_aggregate"]), *matchers,
                                   seen="exists", anywhere=True))
    promql_parser.parse(error_ratio(*matchers))
    promql_parser.parse(hop_error_ratio("decode", *matchers))


def test_a_missing_series_is_never_its_own_evidence_of_traffic() -> None:
    # GIVEN vllm:request_success_total, the default evidence that requests flow, as the series watched
    matchers = endpoint_matchers("llama-3-3-70b", "llm-serving")
    # THEN it is refused: the companion could never fire
    with pytest.raises(ValueError, match="cannot show the requests that would find vllm:request_success_total"):
        unobserved("decode", METRICS["finished"], *matchers)
    # AND a gauge has no rate: it is watched by whether it exists
    with pytest.raises(ValueError, match="is not a counter or a histogram"):
        unobserved("prefill", METRICS["waiting"], *matchers)
    # AND a node metric watched anywhere carries none of the endpoint's labels, its traffic does
    expr = unobserved("decode", METRICS["xid"], *matchers, seen="exists", anywhere=True)
    assert "count(DCGM_FI_DEV_XID_ERRORS) > 0" in expr and 'namespace="llm-serving"' in expr


@pytest.mark.parametrize(("alerts", "line"), [
    # the configuration refuses both when it loads (hyperpod_dpd/config/alerts.py: lmcache:time_to_store's highest bucket is
    # 10 s; a share of requests never exceeds 1), before any rule is built
    ({"kv_transfer_p99_ms": 10000}, "dev.yaml: alerts.kv_transfer_p99_ms: 10000: Input should be less than 10000"),
    ({"fallback_ratio": 1}, "dev.yaml: alerts.fallback_ratio: 1: Input should be less than 1"),
    ({"error_ratio": 1}, "dev.yaml: alerts.error_ratio: 1: Input should be less than 1"),
])
def test_a_threshold_no_alert_could_cross_is_a_one_line_error(base_configs: dict[str, Any], alerts: dict[str, Any],
                                                              line: str) -> None:
    # GIVEN a threshold at or above what the metric can show WHEN it is loaded THEN one line names the field
    with pytest.raises(ConfigError) as raised:
        rule_groups(_env(base_configs["dev"], **alerts))
    (only,) = str(raised.value).splitlines()
    assert only.startswith(line)


def test_a_threshold_just_below_the_ceiling_is_accepted(base_configs: dict[str, Any]) -> None:
    config = _env(base_configs["dev"], kv_transfer_p99_ms=9999, fallback_ratio=0.99, error_ratio=0.99)
    exprs = {r["alert"]: r["expr"] for g in rule_groups(config)["groups"] for r in g["rules"]}
    assert exprs["DpdKvTransferSlow"].endswith("* 1000 > 9999")
    assert exprs["DpdRequestErrorsHigh"].endswith("> 0.99")
    assert len(endpoint_targets(config)) == 2
