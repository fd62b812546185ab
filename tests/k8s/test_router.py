"""EndpointRouter: the stable client Service, NetworkPolicies, PodDisruptionBudgets and the optional Ingress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cdk8s
import pytest
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.k8s.router import EndpointRouter

Manifest = dict[str, Any]
Find = Callable[[list[Manifest], str, str], Manifest]
CERT = "arn:aws:acm:us-west-2:111111111111:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab"


def _router(synth: Callable[..., list[Manifest]], endpoint: EndpointConfig) -> list[Manifest]:
    return synth(lambda chart: EndpointRouter(chart, "Router", endpoint=endpoint))


@pytest.fixture(scope="module")
def plain_endpoint(make_endpoint: Callable[..., EndpointConfig]) -> EndpointConfig:
    return make_endpoint(namespace="llm")


@pytest.fixture(scope="module")
def plain(synth: Callable[..., list[Manifest]], plain_endpoint: EndpointConfig) -> list[Manifest]:
    return _router(synth, plain_endpoint)


@pytest.fixture(scope="module")
def exposed_endpoint(make_endpoint: Callable[..., EndpointConfig]) -> EndpointConfig:
    return make_endpoint(
        namespace="llm",
        prefill={"max_unavailable": 2}, decode={"max_unavailable": 0},
        router={"client_namespaces": ["apps", "batch"], "allowed_cidrs": ["10.192.0.0/16"],
                "router_pod_labels": {"app.kubernetes.io/name": "llama-router"},
                "ingress": {"host": "llama.example.com", "certificate_arn": CERT, "scheme": "internet-facing"}})


@pytest.fixture(scope="module")
def exposed(synth: Callable[..., list[Manifest]], exposed_endpoint: EndpointConfig) -> list[Manifest]:
    return _router(synth, exposed_endpoint)


def test_default_objects_are_a_client_service_two_policies_and_two_budgets(plain: list[Manifest]) -> None:
    assert sorted((m["kind"], m["metadata"]["namespace"], m["metadata"]["name"]) for m in plain) == [
        ("NetworkPolicy", "hyperpod-inference-system", "llama-llm-router"),
        ("NetworkPolicy", "llm", "llama-dpd-workers"),
        ("PodDisruptionBudget", "llm", "llama-decode"),
        ("PodDisruptionBudget", "llm", "llama-prefill"),
        ("Service", "llm", "llama"),
    ]


def test_client_service_is_a_stable_alias_of_the_operators_router_service(
        plain: list[Manifest], plain_endpoint: EndpointConfig, find: Find) -> None:
    service = find(plain, "Service", "llama")
    assert service["spec"] == {
        "type": "ExternalName",
        "externalName": f"{plain_endpoint.resource_name}-llm-routing-service.hyperpod-inference-system.svc.cluster.local",
        "ports": [{"name": "http", "port": 443, "protocol": "TCP"}]}


def test_router_policy_admits_only_the_endpoint_namespace_by_default(
        plain: list[Manifest], plain_endpoint: EndpointConfig, find: Find) -> None:
    spec = find(plain, "NetworkPolicy", "llama-llm-router")["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app": f"{plain_endpoint.resource_name}-llm-router"}}
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [{
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "llm"}}}],
        "ports": [{"port": 443, "protocol": "TCP"}]}]


def test_worker_policy_admits_the_router_namespace_the_other_role_and_metrics(plain: list[Manifest], find: Find) -> None:
    dpd_pods = {"matchExpressions": [{"key": "inference.sagemaker.aws.amazon.com/dpd-role", "operator": "In",
                                      "values": ["prefill", "decode"]}]}
    spec = find(plain, "NetworkPolicy", "llama-dpd-workers")["spec"]
    assert spec["podSelector"] == dpd_pods
    assert spec["ingress"] == [{"from": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hyperpod-inference-system"}}},
        {"podSelector": dpd_pods},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hyperpod-observability"}}},
    ]}]


def test_budgets_cover_each_role_one_pod_at_a_time_by_default(plain: list[Manifest], find: Find) -> None:
    for role in ("prefill", "decode"):
        assert find(plain, "PodDisruptionBudget", f"llama-{role}")["spec"] == {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"inference.sagemaker.aws.amazon.com/dpd-role": role}}}


def test_declared_client_namespaces_cidrs_and_router_labels_shape_the_router_policy(
        exposed: list[Manifest], find: Find) -> None:
    spec = find(exposed, "NetworkPolicy", "llama-llm-router")["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "llama-router"}}
    assert spec["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "batch"}}},
        {"ipBlock": {"cidr": "10.192.0.0/16"}},
    ]
    workers = find(exposed, "NetworkPolicy", "llama-dpd-workers")["spec"]["ingress"][0]["from"]
    assert workers[-1] == {"ipBlock": {"cidr": "10.192.0.0/16"}}


def test_budgets_take_per_role_max_unavailable(exposed: list[Manifest], find: Find) -> None:
    assert find(exposed, "PodDisruptionBudget", "llama-prefill")["spec"]["maxUnavailable"] == 2
    assert find(exposed, "PodDisruptionBudget", "llama-decode")["spec"]["maxUnavailable"] == 0


def test_alb_ingress_exposes_the_router_service_with_an_acm_certificate(
        exposed: list[Manifest], exposed_endpoint: EndpointConfig, find: Find) -> None:
    ingress = find(exposed, "Ingress", "llama-llm")
    assert ingress["metadata"]["namespace"] == "hyperpod-inference-system"
    assert ingress["metadata"]["annotations"] == {
        "alb.ingress.kubernetes.io/scheme": "internet-facing",
        "alb.ingress.kubernetes.io/target-type": "ip",
        "alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS": 443}]',
        "alb.ingress.kubernetes.io/backend-protocol": "HTTP",
        "alb.ingress.kubernetes.io/healthcheck-path": "/health",
        "alb.ingress.kubernetes.io/group.name": "hpdpd-llm-llama",
        "alb.ingress.kubernetes.io/certificate-arn": CERT,
    }
    assert ingress["spec"] == {
        "ingressClassName": "alb",
        "tls": [{"hosts": ["llama.example.com"]}],
        "rules": [{"host": "llama.example.com", "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": exposed_endpoint.router_service_name, "port": {"number": 443}}}}]}}]}


def test_other_ingress_classes_use_a_tls_secret_and_no_alb_annotations(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig], find: Find) -> None:
    endpoint = make_endpoint(router={"allowed_cidrs": ["10.0.0.0/8"], "ingress": {
        "host": "llama.internal.example.com", "class_name": "nginx", "tls_secret_name": "llama-tls"}})
    ingress = find(_router(synth, endpoint), "Ingress", "llama-default")
    assert "annotations" not in ingress["metadata"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["llama.internal.example.com"], "secretName": "llama-tls"}]


def test_network_policies_can_be_left_out(synth: Callable[..., list[Manifest]],
                                          make_endpoint: Callable[..., EndpointConfig]) -> None:
    manifests = _router(synth, make_endpoint(router={"network_policy": False}))
    assert sorted(m["kind"] for m in manifests) == ["PodDisruptionBudget", "PodDisruptionBudget", "Service"]


def test_client_service_name_survives_a_new_generation(synth: Callable[..., list[Manifest]],
                                                        make_endpoint: Callable[..., EndpointConfig], find: Find) -> None:
    # GIVEN two generations of one endpoint (PD_BUFFER_SIZE changed)
    old, new = make_endpoint(), make_endpoint(pd_buffer_size=17179869184)
    old_service = find(_router(synth, old), "Service", "llama")
    new_service = find(_router(synth, new), "Service", "llama")
    # THEN clients keep the Service name while it points at the new IEC's router
    assert old_service["spec"]["externalName"] != new_service["spec"]["externalName"]
    assert new_service["spec"]["externalName"].startswith(new.resource_name)


def test_router_attributes_expose_the_created_objects(make_endpoint: Callable[..., EndpointConfig]) -> None:
    router = EndpointRouter(cdk8s.Testing.chart(), "Router", endpoint=make_endpoint())
    assert router.client_service.name == "llama"
    assert router.router_policy is not None and router.worker_policy is not None
    assert (router.prefill_budget.name, router.decode_budget.name) == ("llama-prefill", "llama-decode")
    assert router.ingress is None
