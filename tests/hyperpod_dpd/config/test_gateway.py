"""routing.tier and endpoints[].gateway: what the configuration accepts and refuses, each refusal one line
(docs/gateway.md). The environment is tests/fixtures/gateway/gateway.yaml."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from hyperpod_dpd.catalogue.gateway import GATEWAY_MINIMUM_ADDON_VERSION, SCORING_WEIGHTS
from hyperpod_dpd.config import endpoint_gateway_checks, parse_environment
from hyperpod_dpd.config.endpoint_gateway import GatewayConfig, ScoringWeights, gateway_reference
from hyperpod_dpd.config.endpoint_gateway_checks import gateway_environment_issues, load_balancer_zones
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "gateway" / "gateway.yaml"
JWT = {"issuer": "https://issuer.example.com", "jwks_uri": "https://issuer.example.com/jwks", "audiences": ["a"]}


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return yaml.safe_load(FIXTURE.read_text())


def _load(data: dict[str, Any]) -> Any:
    return parse_environment(data, name="gateway", source="gateway.yaml", base_dir=FIXTURE.parent)


def _endpoint(data: dict[str, Any], **routing: Any) -> Any:
    """The fixture's endpoint as a model only (its checks not run), with ``routing`` overrides."""
    raw = copy.deepcopy(data["endpoints"][0])
    raw["routing"] = {**raw["routing"], **routing}
    return EndpointConfig.model_validate(raw)


def test_a_dpd_endpoint_behind_the_gateway_is_refused_in_one_line_with_the_reason(data) -> None:
    # GIVEN the fixture: a DPD endpoint with routing.tier gateway, on add-on v2.0.0-eksbuild.2, two AZs, JWT auth
    # WHEN it is loaded
    with pytest.raises(ConfigError) as raised:
        _load(data)
    # THEN one line refuses the combination, says AWS documents none, and offers the DPD router
    text = str(raised.value)
    assert len(text.splitlines()) == 1
    assert text.startswith("gateway.yaml: endpoints[0].routing.tier: 'gateway': cannot front a DPD endpoint: AWS "
                           "documents no DPD endpoint behind the Inference Gateway")
    assert text.endswith("; use routing.tier: dpd-router")


def test_gateway_with_intelligent_routing_fails_in_one_line_naming_both_fields(data, monkeypatch) -> None:
    # (once a DPD endpoint may sit behind the gateway; until then that refusal comes first, alone)
    monkeypatch.setattr(endpoint_gateway_checks, "DPD_BEHIND_GATEWAY_DOCUMENTED", True)
    # GIVEN the fixture's endpoint also asking for the operator's intelligent routing (routing.strategy)
    mutated = copy.deepcopy(data)
    mutated["endpoints"][0]["routing"]["strategy"] = "prefixaware"
    # WHEN it is loaded
    with pytest.raises(ConfigError) as raised:
        _load(mutated)
    # THEN exactly one line, naming routing.tier and routing.strategy and the upstream rule
    assert str(raised.value) == (
        "gateway.yaml: endpoints[0].routing.tier: 'gateway': and routing.strategy ('prefixaware', the operator's "
        "intelligentRoutingSpec) are mutually exclusive (AWS: inferenceGateway.enabled and "
        "intelligentRoutingSpec.enabled cannot be set together); remove routing.strategy, or use routing.tier: "
        "dpd-router")


def test_the_default_tier_is_the_dpd_router_and_the_sample_dpd_endpoint_still_loads(data) -> None:
    # GIVEN the fixture without the gateway (tier and section removed, the v1 add-on of operator 3.7)
    mutated = copy.deepcopy(data)
    endpoint = mutated["endpoints"][0]
    endpoint["routing"].pop("tier")
    endpoint.pop("gateway")
    mutated["operator"].pop("addon_version")
    # WHEN it is loaded THEN it is accepted, on the DPD router
    env = _load(mutated)
    assert env.endpoints[0].routing.tier == "dpd-router"


def test_a_gateway_section_without_the_gateway_tier_is_refused(data) -> None:
    endpoint = _endpoint(data, tier="dpd-router")
    problems = endpoint.issues(None, "endpoints[0]")
    assert [(p.path, p.message) for p in problems] == [
        ("endpoints[0].gateway", "applies only with routing.tier: gateway")]


@pytest.mark.parametrize(("operator", "message"), [
    ({"version": "3.7"}, 'add-on v1.8.0-eksbuild.1); set operator.version to "3.6" or later and '
                         f'operator.addon_version to "{GATEWAY_MINIMUM_ADDON_VERSION}" or later'),
    ({"version": "3.4", "addon_version": "v2.0.0-eksbuild.2"}, 'operator.version is "3.4", add-on v2.0.0-eksbuild.2'),
    ({"version": "3.7", "addon_version": "v2.0.0-eksbuild.1"}, "add-on v2.0.0-eksbuild.1)"),
])
def test_an_addon_or_operator_without_the_gateway_is_refused_naming_operator_version(data, operator, message) -> None:
    # GIVEN the fixture's environment on an add-on build or operator release below the gateway's
    mutated = copy.deepcopy(data)
    mutated["operator"] = {**mutated["operator"], **operator}
    mutated["operator"].pop("addon_version", None) if "addon_version" not in operator else None
    mutated["endpoints"][0]["routing"]["tier"] = "dpd-router"
    mutated["endpoints"][0].pop("gateway")
    env = _load(mutated)  # accepted on the DPD router
    # WHEN the gateway tier is checked against it
    gateway = _endpoint(data)
    problems = list(gateway_environment_issues(gateway, env, "endpoints[0]"))
    # THEN one line, on routing.tier, naming operator.version and what to set
    assert len(problems) == 1
    assert problems[0].path == "endpoints[0].routing.tier"
    assert "needs the Inference Gateway, which the add-on bundles from v2.0.0-eksbuild.2 with operator 3.6" in problems[0].message
    assert "operator.version" in problems[0].message and message in problems[0].message


def test_production_refuses_a_gateway_without_authentication(data) -> None:
    mutated = copy.deepcopy(data)
    mutated["endpoints"][0]["routing"]["tier"] = "dpd-router"
    mutated["endpoints"][0].pop("gateway")
    env = _load(mutated).model_copy(update={"production": True})
    open_gateway = EndpointConfig.model_validate({**copy.deepcopy(data["endpoints"][0]), "gateway": {"auth": {"enabled": False}}})
    problems = list(gateway_environment_issues(open_gateway, env, "endpoints[0]"))
    assert [(p.path, p.value) for p in problems] == [("endpoints[0].gateway.auth.enabled", False)]
    assert problems[0].message.startswith("a production gateway must authenticate requests")


def test_the_internal_load_balancer_zones_are_the_private_subnets_zones(data) -> None:
    env = _load({**copy.deepcopy(data), "endpoints": []})
    assert load_balancer_zones(env.network) == ("us-west-2a", "us-west-2b")


def test_gateway_reference_names_the_gateway_object_and_defaults_to_the_endpoint(data) -> None:
    # GIVEN the fixture's endpoint (gateway named llm-gateway) and one without a gateway section
    named = _endpoint(data)
    unnamed = EndpointConfig.model_validate({**copy.deepcopy(data["endpoints"][0]), "gateway": {"auth": {"jwt": JWT}}})
    # THEN (namespace, name): the configured name, or <endpoint>-gateway in the endpoint's namespace
    assert gateway_reference(named) == ("llm-serving", "llm-gateway")
    assert gateway_reference(unnamed) == ("llm-serving", "llama-3-3-70b-gateway")
    with pytest.raises(ConfigError, match="routing.tier: 'dpd-router': is not 'gateway'"):
        gateway_reference(_endpoint(data, tier="dpd-router").model_copy(update={"gateway": None}))


@pytest.mark.parametrize(("section", "message"), [
    ({"scheduler": "epp", "weights": {"lru": 1}}, "weights.lru is valid only with scheduler 'llm-d'"),
    ({"weights": {"queue": -1}}, "greater than or equal to 0"),
    ({"auth": {"jwt": {**JWT, "audiences": []}}}, "set 'audiences' or 'required_claims'"),
    ({"auth": {"jwt": {**JWT, "audiences": [f"a{i}" for i in range(9)]}}}, "at most 8 items"),
    ({"auth": {"jwt": {**JWT, "issuer": "http://issuer.example.com"}}}, "an https:// URL"),
    ({"auth": {"enabled": False, "jwt": JWT}}, "'jwt' is set but 'enabled' is false"),
    ({"scheduler": "istio"}, "'llm-d' or 'epp'"),
    ({"route_timeout": "30 seconds"}, "a Gateway API duration"),
])
def test_the_gateway_section_is_typed_with_the_crd_names_and_bounds(section, message) -> None:
    with pytest.raises(ValidationError, match=message):
        GatewayConfig.model_validate(section)


def test_every_weight_field_is_a_documented_weight() -> None:
    # GIVEN every weight set THEN the rendered names are exactly the CRD reference's
    weights = ScoringWeights.model_validate({k: 1 for k in ScoringWeights.model_fields})
    assert set(weights.manifest()) == set(SCORING_WEIGHTS)


def test_a_dpd_endpoint_with_a_strategy_is_refused_for_the_root_cause(data) -> None:
    # GIVEN the fixture's endpoint on the gateway tier with routing.strategy
    mutated = copy.deepcopy(data)
    mutated["endpoints"][0]["routing"]["strategy"] = "prefixaware"
    with pytest.raises(ConfigError) as raised:
        _load(mutated)
    # THEN the DPD refusal, which removing the strategy would not lift
    assert "cannot front a DPD endpoint" in str(raised.value) and "mutually exclusive" not in str(raised.value)
