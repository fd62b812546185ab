"""``hpdpd status`` and the endpoints' NetworkPolicies: the rendered policies against the live router and worker pods."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.k8s import defaults
from hyperpod_dpd.k8s.router import EndpointRouter
from hyperpod_dpd.ops import netpol
from hyperpod_dpd.ops.kube import IecStatus, KubeError
from hyperpod_dpd.ops.status import endpoint_rows

ENDPOINT = {"name": "llama", "namespace": "llm",
            "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models", "prefix": "llama", "region": "us-west-2"}},
            "instance_type": "ml.p5.48xlarge"}
ROUTER_NS = "hyperpod-inference-system"


@pytest.fixture(scope="module")
def endpoint() -> EndpointConfig:
    return parse_endpoint(copy.deepcopy(ENDPOINT), source="test")


@pytest.fixture(scope="module")
def policies(endpoint: EndpointConfig) -> list[dict[str, Any]]:
    """The endpoint's NetworkPolicies as rendered, labelled as EndpointChart labels every object."""
    chart = cdk8s.Chart(cdk8s.App(), "llama", labels={defaults.ENDPOINT_LABEL: endpoint.name})
    EndpointRouter(chart, "Router", endpoint=endpoint)
    return [m for m in chart.to_json() if m["kind"] == "NetworkPolicy"]


def _pod(name: str, namespace: str, labels: dict[str, str], *ports: int) -> dict[str, Any]:
    """A pod as the API lists it."""
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "main", "ports": [{"containerPort": p, "protocol": "TCP"} for p in ports]},
                                    {"name": "otel-collector"}]},
            "status": {"podIP": "10.1.0.9"}}


def _live(endpoint: EndpointConfig, *, router_labels: dict[str, str] | None = None, router_port: int = 8000) -> list[dict[str, Any]]:
    iec, role = endpoint.resource_name, defaults.DPD_ROLE_LABEL
    labels = router_labels or defaults.router_pod_labels(iec, endpoint.namespace)
    return [
        _pod(f"{iec}-llm-router-6f7c9d-abcde", ROUTER_NS, labels, router_port),
        _pod(f"prefill-{iec}-7d9f-x1", "llm", {role: "prefill"}, 8000),
        _pod(f"decode-{iec}-7d9f-y1", "llm", {role: "decode"}, 8000),
        _pod("llama-0a0a0a-llm-router-1-zzz", ROUTER_NS, {"app": "old"}, 9999),  # another generation's router
        _pod("prefill-llama-0a0a0a-1-q", "llm", {"other": "x"}, 1),               # another generation's prefill
    ]


def _warnings(endpoint: EndpointConfig, pods: list[dict[str, Any]], policies: list[dict[str, Any]]) -> list[str]:
    return netpol.endpoint_policy_warnings(endpoint=endpoint.name, namespace=endpoint.namespace,
                                           iec=endpoint.resource_name, pods=pods, policies=policies)


def test_pods_as_the_operator_labels_them_raise_no_warning(endpoint, policies) -> None:
    assert _warnings(endpoint, _live(endpoint), policies) == []


def test_router_pods_with_other_labels_are_named_with_the_fix(endpoint, policies) -> None:
    # GIVEN a router whose pods carry labels other than the assumed app=<iec>-<namespace>-router
    pods = _live(endpoint, router_labels={"app.kubernetes.io/name": "router", "pod-template-hash": "6f7c9d"})
    # THEN status says the router policy does not apply to them, and how to fix it
    assert _warnings(endpoint, pods, policies) == [
        f"NetworkPolicy {ROUTER_NS}/llama-llm-router selects app={endpoint.resource_name}-llm-router, but pod "
        f"{ROUTER_NS}/{endpoint.resource_name}-llm-router-6f7c9d-abcde has labels app.kubernetes.io/name=router, "
        "pod-template-hash=6f7c9d: the policy does not apply to it (set router.router_pod_labels to the router pods' "
        "labels)"]


def test_a_router_listening_on_another_port_is_named(endpoint, policies) -> None:
    # GIVEN a router container that declares 8080, not the assumed 8000
    (warning,) = _warnings(endpoint, _live(endpoint, router_port=8080), policies)
    # THEN status names the ports the policy admits and the one the container declares
    assert warning == (
        f"NetworkPolicy {ROUTER_NS}/llama-llm-router admits port 8000 of pod "
        f"{ROUTER_NS}/{endpoint.resource_name}-llm-router-6f7c9d-abcde, which declares container port 8080: a "
        "NetworkPolicy matches the container port, so traffic to it is dropped once enforced")


def test_worker_pods_without_the_role_label_are_named(endpoint, policies) -> None:
    pods = _live(endpoint)
    pods[1]["metadata"]["labels"] = {"role": "prefill"}
    (warning,) = _warnings(endpoint, pods, policies)
    assert warning.startswith("NetworkPolicy llm/llama-dpd-workers selects inference.sagemaker.aws.amazon.com/dpd-role "
                              f"In (prefill,decode), but pod llm/prefill-{endpoint.resource_name}-7d9f-x1 has labels role=prefill")


def test_policies_of_other_endpoints_are_not_judged(endpoint, policies) -> None:
    foreign = copy.deepcopy(policies)
    for policy in foreign:
        policy["metadata"]["labels"][defaults.ENDPOINT_LABEL] = "other"
    assert _warnings(endpoint, _live(endpoint, router_port=8080), foreign) == []


def test_the_endpoint_label_agrees_with_the_charts() -> None:
    assert netpol.ENDPOINT_LABEL == defaults.ENDPOINT_LABEL


# ---- the call site in hpdpd status -------------------------------------------------------------------------------


@dataclass
class FakeKube:
    """The calls status makes: the IEC's state, then pods and NetworkPolicies per namespace (``kube.call``)."""

    documents: dict[str, list[dict[str, Any]]]
    error: KubeError | None = None
    asked: list[str] = field(default_factory=list)
    timeout: tuple[float, float] = (1.0, 1.0)

    def unavailable(self) -> str | None:
        return None

    def iec_status(self, *, name: str, namespace: str) -> IecStatus:
        return IecStatus(state="DeploymentComplete")

    def call(self, what: str, request: Callable[[Any], Any], *, permission: str | None = None,
             expect: str = "object") -> Any:
        assert expect == "list", what  # status only lists here: the shape the API server's list answers have
        self.asked.append(what)
        if self.error:
            raise self.error
        return {"items": self.documents.get(what, [])}


def _kube(endpoint: EndpointConfig, policies: list[dict[str, Any]], **live: Any) -> FakeKube:
    pods = _live(endpoint, **live)
    return FakeKube({
        f"list pods in namespace {ns}": [p for p in pods if p["metadata"]["namespace"] == ns] for ns in ("llm", ROUTER_NS)} | {
        f"list networkpolicies in namespace {ns}": [p for p in policies if p["metadata"]["namespace"] == ns]
        for ns in ("llm", ROUTER_NS)})


def test_status_warns_about_a_live_router_the_policy_misses(endpoint, policies) -> None:
    # GIVEN a reachable cluster whose router pods declare another port
    kube = _kube(endpoint, policies, router_port=8080)
    warnings: list[str] = []
    # WHEN status reads the endpoint
    (row,) = endpoint_rows(None, (endpoint,), kube, warnings)  # type: ignore[arg-type]
    # THEN it read pods and policies of both namespaces, and the warning names the endpoint
    assert row.iec_state == "DeploymentComplete"
    assert sorted(kube.asked) == sorted(f"list {w} in namespace {ns}" for w in ("pods", "networkpolicies")
                                        for ns in ("llm", ROUTER_NS))
    assert len(warnings) == 1 and warnings[0].startswith("endpoint llama: NetworkPolicy hyperpod-inference-system/")
    assert "declares container port 8080" in warnings[0]


def test_status_is_quiet_when_the_pods_match(endpoint, policies) -> None:
    warnings: list[str] = []
    endpoint_rows(None, (endpoint,), _kube(endpoint, policies), warnings)  # type: ignore[arg-type]
    assert warnings == []


def test_an_unreadable_policy_list_is_a_warning_and_a_missing_api_is_not(endpoint, policies) -> None:
    denied = _kube(endpoint, policies)
    denied.error = KubeError("list networkpolicies: 403 Forbidden", "access_denied")
    warnings: list[str] = []
    endpoint_rows(None, (endpoint,), denied, warnings)  # type: ignore[arg-type]
    assert warnings == ["endpoint llama: could not check its NetworkPolicies (list networkpolicies: 403 Forbidden)"]
    missing = _kube(endpoint, policies)
    missing.error = KubeError("404", "error", not_found=True)
    warnings = []
    endpoint_rows(None, (endpoint,), missing, warnings)  # type: ignore[arg-type]
    assert warnings == []


def test_endpoints_without_policies_are_not_checked(policies) -> None:
    endpoint = parse_endpoint({**copy.deepcopy(ENDPOINT), "router": {"network_policy": False}}, source="test")
    kube = _kube(endpoint, policies, router_port=8080)
    warnings: list[str] = []
    endpoint_rows(None, (endpoint,), kube, warnings)  # type: ignore[arg-type]
    assert (warnings, kube.asked) == ([], [])
