"""An endpoint's ``overrides`` (IEC spec fields by JSON pointer) are checked against the CRD's ``openAPIV3Schema`` when
the environment file loads, before anything renders: each refusal is one line naming the file, the field path inside it
(``endpoints[0].overrides['/spec/metrics'].enabled``), the bad value and what the schema allows there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_overrides import override_issues
from hyperpod_dpd.errors import MISSING, ConfigError

SCHEMA = "(the InferenceEndpointConfig CRD schema)"


def _overrides(overrides: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"][0]["overrides"] = overrides
    return mutate


def _refusal(config_dir: Path, env: str = "dev") -> tuple[str, list[str]]:
    """The file the error names and its lines after that file."""
    with pytest.raises(ConfigError) as raised:
        load_environment(env, config_dir)
    source = raised.value.source or ""
    lines = str(raised.value).splitlines()
    assert all(line.startswith(f"{source}: ") for line in lines), lines
    return source, [line[len(source) + 2:] for line in lines]


@pytest.mark.parametrize(("overrides", "expected"), [
    # a wrong type at the pointer itself
    ({"/spec/metrics": "yes"},
     f"endpoints[0].overrides['/spec/metrics']: 'yes': must be of type object {SCHEMA}"),
    # a wrong type inside the value: the path goes on below the override's key
    ({"/spec/metrics": {"enabled": "yes"}},
     f"endpoints[0].overrides['/spec/metrics'].enabled: 'yes': must be of type boolean {SCHEMA}"),
    # a value outside an enum names the values allowed
    ({"/spec/loadBalancer/routingAlgorithm": "fastest"},
     "endpoints[0].overrides['/spec/loadBalancer/routingAlgorithm']: 'fastest': must be one of "
     f"'least_outstanding_requests', 'round_robin' {SCHEMA}"),
    # a number outside its bounds
    ({"/spec/loadBalancer/idleTimeoutSeconds": 5000},
     f"endpoints[0].overrides['/spec/loadBalancer/idleTimeoutSeconds']: 5000: must be at most 4000 {SCHEMA}"),
    # a pointer the schema does not declare names the fields declared there
    ({"/spec/loadBalancer/routingStrategy": "kvaware"},
     "endpoints[0].overrides['/spec/loadBalancer/routingStrategy']: 'routingStrategy': is not a field of "
     "spec.loadBalancer in the InferenceEndpointConfig CRD schema; allowed there: healthCheckPath, "
     "idleTimeoutSeconds, routingAlgorithm"),
    # an undeclared field inside the value (the API server would prune it without a word)
    ({"/spec/metrics": {"enabled": True, "intervalSeconds": 30}},
     "endpoints[0].overrides['/spec/metrics'].intervalSeconds: 'intervalSeconds': is not a field of spec.metrics in "
     "the InferenceEndpointConfig CRD schema; allowed there: enabled, metricsScrapeIntervalSeconds, modelMetrics"),
    # inside a list element, with its index
    ({"/spec/tags": [{"name": "team", "value": 7}]},
     f"endpoints[0].overrides['/spec/tags'][0].value: 7: must be of type string {SCHEMA}"),
])
def test_a_schema_invalid_override_is_one_line_naming_file_field_value_and_what_is_allowed(
        write_config: Callable[..., Path], overrides: dict[str, Any], expected: str) -> None:
    # GIVEN an environment file whose endpoint carries an override the CRD schema refuses
    config_dir = write_config(_overrides(overrides))
    # WHEN the file loads (nothing is rendered: the loader never reaches cdk8s)
    source, lines = _refusal(config_dir)
    # THEN it is refused in one line naming the file, the field path inside it, the value and what is allowed
    assert source.endswith("dev.yaml")
    assert lines == [expected]


def test_every_problem_of_one_override_value_is_its_own_line(write_config: Callable[..., Path]) -> None:
    # GIVEN one override whose value holds a wrong type, a number out of bounds and an undeclared field
    config_dir = write_config(_overrides({"/spec/metrics": {"enabled": "yes", "metricsScrapeIntervalSeconds": 1,
                                                            "port": 9000}}))
    # WHEN the file loads THEN each is one line at its own path below the override
    _, lines = _refusal(config_dir)
    assert lines == [
        f"endpoints[0].overrides['/spec/metrics'].enabled: 'yes': must be of type boolean {SCHEMA}",
        f"endpoints[0].overrides['/spec/metrics'].metricsScrapeIntervalSeconds: 1: must be at least 5 {SCHEMA}",
        "endpoints[0].overrides['/spec/metrics'].port: 'port': is not a field of spec.metrics in the "
        "InferenceEndpointConfig CRD schema; allowed there: enabled, metricsScrapeIntervalSeconds, modelMetrics",
    ]


def test_a_missing_required_field_names_it_as_missing() -> None:
    # GIVEN a tag without the value the CRD schema requires of every tag
    # WHEN the override is checked under its field path
    (issue,) = override_issues("/spec/tags", [{"name": "team"}], "endpoints[0].overrides['/spec/tags']")
    # THEN the issue is at the missing field, with the missing marker as its value
    assert (issue.path, issue.value) == ("endpoints[0].overrides['/spec/tags'][0].value", MISSING)
    assert issue.message == "is required by the InferenceEndpointConfig CRD schema"


def test_an_override_of_a_typed_setting_is_refused_at_load_whatever_its_value(write_config: Callable[..., Path]) -> None:
    # GIVEN the worker's vLLM args, which the endpoint's args own, overridden with a value of the wrong type too
    _, lines = _refusal(write_config(_overrides({"/spec/worker/args": "--max-model-len=8192"})))
    # THEN the one line points at the typed setting (set it there), not at the value's shape
    assert len(lines) == 1
    assert lines[0].startswith("endpoints[0].overrides['/spec/worker/args']: '--max-model-len=8192': is rendered "
                               "from the endpoint's typed configuration (args); set it there")


def test_a_bad_override_of_the_kv_tiers_is_one_line_pointing_at_kv_cache(write_config: Callable[..., Path]) -> None:
    # GIVEN an environment's override of spec.kvCacheSpec (kv_cache's) whose value the schema refuses as well
    _, lines = _refusal(write_config(_overrides({"/spec/kvCacheSpec/enableL2Cache": "yes"})))
    # THEN one line points at kv_cache, where the tiers are checked; the value's shape is not a second line
    assert len(lines) == 1
    assert lines[0].startswith("endpoints[0].overrides['/spec/kvCacheSpec/enableL2Cache']: 'yes': spec.kvCacheSpec "
                               "is rendered from kv_cache")


def test_an_override_the_schema_allows_loads_unchanged(write_config: Callable[..., Path]) -> None:
    # GIVEN overrides of fields the toolkit does not model, with values the schema allows
    overrides = {"/spec/loadBalancer/idleTimeoutSeconds": 120, "/spec/tags/-": {"name": "team", "value": "ml"}}
    # WHEN the file loads THEN it loads, the overrides as written
    config = load_environment("dev", write_config(_overrides(overrides)))
    assert config.endpoints[0].overrides == overrides
