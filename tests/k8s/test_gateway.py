"""k8s/gateway.py: the InferenceGatewayConfig rendered from the typed gateway section, validated against the schema
derived from AWS's CRD reference (k8s/crds/, labelled derived), and the refusal of a DPD endpoint behind it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from hyperpod_dpd.catalogue.gateway import GATEWAY_API_VERSION, GATEWAY_KIND
from hyperpod_dpd.config.endpoint_gateway import GatewayConfig, gateway_reference
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import ValidatedChart
from hyperpod_dpd.k8s.gateway import GatewayBackend, InferenceGateway, endpoint_backend
from hyperpod_dpd.k8s.validation import crd_schemas, manifest_issues

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gateway" / "gateway.yaml"
BACKENDS = [GatewayBackend("llama", "meta-llama/Llama-3.2-1B-Instruct", {"app": "vllm-llama"})]


@pytest.fixture(scope="module")
def endpoint() -> EndpointConfig:
    return EndpointConfig.model_validate(yaml.safe_load(FIXTURE.read_text())["endpoints"][0])


def _render(gateway: GatewayConfig, backends: list[GatewayBackend] = BACKENDS) -> dict[str, Any]:
    chart = ValidatedChart(cdk8s.App(), "Gateway", kubernetes_version="1.35", namespace="llm-serving")
    InferenceGateway(chart, "Gateway", gateway=gateway, name="llm-gateway", backends=backends)
    (manifest,) = chart.to_json()  # ValidatedChart validates against the derived CRD schema on every render
    return dict(manifest)


def test_the_fixture_gateway_renders_with_auth_on_and_validates_against_its_crd_schema(endpoint) -> None:
    # GIVEN the fixture endpoint's gateway section, with a backend of the documented example
    assert endpoint.gateway is not None
    namespace, name = gateway_reference(endpoint)
    # WHEN it is rendered
    manifest = _render(endpoint.gateway)
    # THEN an InferenceGatewayConfig with JWT auth, auto-issued TLS and the typed weights, valid for the schema
    assert (manifest["apiVersion"], manifest["kind"]) == (GATEWAY_API_VERSION, GATEWAY_KIND) in crd_schemas()
    assert (namespace, name) == (manifest["metadata"]["namespace"], manifest["metadata"]["name"])
    spec = manifest["spec"]
    assert spec["auth"]["jwt"]["provider"] == {
        "name": "jwt", "issuer": "https://issuer.example.com",
        "remoteJWKS": {"uri": "https://issuer.example.com/.well-known/jwks.json"}, "audiences": ["hpdpd-gateway"]}
    assert spec["tls"] == {}
    assert spec["bbr"] == {"enabled": False, "replicas": 2}
    assert spec["schedulers"][0]["weights"] == {"queue": 2, "kvCache": 2, "prefix": 3}
    assert manifest_issues(manifest, kubernetes_version="1.35") == []


def test_several_schedulers_turn_the_body_based_router_on_and_an_acm_certificate_is_passed(endpoint) -> None:
    arn = "arn:aws:acm:us-west-2:111111111111:certificate/0123abcd-4567-89ef-0123-456789abcdef"
    gateway = endpoint.gateway.model_copy(update={"tls": endpoint.gateway.tls.model_copy(update={"acm_certificate_arn": arn})})
    manifest = _render(gateway, [*BACKENDS, GatewayBackend("qwen", "Qwen/Qwen2.5-7B-Instruct", {"app": "qwen"})])
    assert manifest["spec"]["bbr"]["enabled"] is True
    assert manifest["spec"]["tls"] == {"acmArn": arn}


def test_the_derived_schema_refuses_unknown_fields_and_out_of_bound_weights(endpoint) -> None:
    manifest = _render(endpoint.gateway)
    bad = copy.deepcopy(manifest)
    bad["spec"]["schedulers"][0]["weights"]["queue"] = -1
    bad["spec"]["auth"]["jwt"]["provider"]["audience"] = "typo"
    issues = {(i.path, i.message.split(";")[0]) for i in manifest_issues(bad, kubernetes_version="1.35")}
    assert ("spec.schedulers[0].weights.queue", "-1 is less than the minimum of 0") in issues
    assert ("spec.auth.jwt.provider.audience", "is not a field of the CRD schema") in issues


@pytest.mark.parametrize(("gateway", "backends", "message"), [
    ({}, BACKENDS, r"auth.jwt: missing: is required while auth.enabled is true"),
    ({"auth": {"enabled": False}}, [], r"backends: 0: must be 1 to 100 schedulers"),
    ({"auth": {"enabled": False}}, [*BACKENDS, BACKENDS[0]], r"backends\[1\].name: 'llama': must be 1-63 characters and unique"),
    ({"auth": {"enabled": False}}, [GatewayBackend("m", "m", {})], r"model_selector: \{\}: must select"),
])
def test_bad_gateway_input_fails_before_anything_joins_the_tree(gateway, backends, message) -> None:
    chart = ValidatedChart(cdk8s.App(), "Gateway", kubernetes_version="1.35", namespace="llm-serving")
    with pytest.raises(ConfigError, match=message):
        InferenceGateway(chart, "Gateway", gateway=GatewayConfig.model_validate(gateway), name="g", backends=backends)
    assert chart.node.try_find_child("Gateway") is None


def test_auth_explicitly_off_renders_no_auth_section() -> None:
    manifest = _render(GatewayConfig.model_validate({"auth": {"enabled": False}}))
    assert "auth" not in manifest["spec"]


def test_a_dpd_endpoint_has_no_documented_backend(endpoint) -> None:
    with pytest.raises(ConfigError, match=r"routing.tier: 'gateway': cannot front a DPD endpoint: AWS documents no"):
        endpoint_backend(endpoint)
