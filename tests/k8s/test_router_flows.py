"""The router chart's NetworkPolicies against the flows of a DPD endpoint, evaluated as Kubernetes (and the VPC CNI)
enforce them: every flow the endpoint needs passes, and the flows it must not have are dropped.

Addresses as in a created VPC: the VPC CIDR 10.192.0.0/16 (load balancers, EKS ENIs, system nodes' pods) and the GPU
subnet 10.1.0.0/16 (HyperPod nodes and their pods), the EKS Service CIDR 172.20.0.0/16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE, OBSERVABILITY_NAMESPACE
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.k8s import defaults
from hyperpod_dpd.k8s.router import EndpointRouter
from hyperpod_dpd.ops.netpol import Cluster, ContainerPort, External, Flow, Pod

Manifest = dict[str, Any]
VPC_CIDR = "10.192.0.0/16"
TP = 8  # tensor-parallel ranks of a p5.48xlarge endpoint: one LMCache side-channel port pair per rank
# LMCache's bidirectional cache probe (pd_bidirectional): the prefiller queries the decoder on pd_peer_query_port, one
# per rank, example [7500, 7501, ...] (LMCache docs/source/api_reference/configurations.rst, pd_peer_query_port).
PEER_QUERY_PORT = 7500
# Proxy ports LMCache itself uses for the senders' reports: its PD example configs' pd_proxy_port (7500, the chart's
# ROUTER_PD_PROXY_PORT) and the --proxy-port default of its disaggregation proxy (8500, LMCache
# examples/disagg_prefill/disagg_proxy_server.py); the operator's own is undocumented.
PROXY_PORTS = (defaults.ROUTER_PD_PROXY_PORT, 8500)


def _policies(synth: Callable[..., list[Manifest]], endpoint: EndpointConfig) -> list[Manifest]:
    manifests = synth(lambda chart: EndpointRouter(chart, "Router", endpoint=endpoint, load_balancer_cidrs=[VPC_CIDR]))
    return [m for m in manifests if m["kind"] == "NetworkPolicy"]


@pytest.fixture(scope="module")
def endpoint(make_endpoint: Callable[..., EndpointConfig]) -> EndpointConfig:
    return make_endpoint(namespace="llm", router={"client_namespaces": ["llm", "apps"]})


@pytest.fixture(scope="module")
def kvaware(make_endpoint: Callable[..., EndpointConfig]) -> EndpointConfig:
    # kvaware on an image that states the vLLM and LMCache it needs (the documented images' vLLM is too old)
    return make_endpoint(namespace="llm", routing={"strategy": "kvaware"}, invocation_path="v1/completions",
                         router={"client_namespaces": ["llm", "apps"]},
                         image="123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-dpd:0.19.1",
                         image_versions={"vllm": "0.19.1", "lmcache": "0.4.3"})


@pytest.fixture(scope="module")
def cluster(synth: Callable[..., list[Manifest]], endpoint: EndpointConfig) -> Cluster:
    return Cluster(_policies(synth, endpoint))


def _pods(endpoint: EndpointConfig) -> dict[str, Pod]:
    router_labels = defaults.router_pod_labels(endpoint.resource_name, endpoint.namespace)
    role = defaults.DPD_ROLE_LABEL
    model = (ContainerPort(defaults.MODEL_PORT, defaults.MODEL_PORT_NAME),)
    return {
        "router": Pod(f"{endpoint.resource_name}-llm-router-0", INFERENCE_NAMESPACE, router_labels, "10.192.8.10",
                      (ContainerPort(defaults.ROUTER_CONTAINER_PORT),)),
        "prefill": Pod(f"prefill-{endpoint.resource_name}-0", "llm", {role: "prefill"}, "10.1.0.10", model),
        "decode": Pod(f"decode-{endpoint.resource_name}-0", "llm", {role: "decode"}, "10.1.0.20", model),
        "client": Pod("chat-frontend", "llm", {"app": "chat"}, "10.1.3.3"),
        "other client": Pod("batch-job", "apps", {"app": "batch"}, "10.1.3.4"),
        "stranger": Pod("tenant-b", "other", {"app": "x"}, "10.1.9.9", (ContainerPort(5432),)),
        "stranger on a system node": Pod("tenant-c", "other", {"app": "y"}, "10.192.40.4"),
        "operator": Pod("hyperpod-inference-controller-manager-0", INFERENCE_NAMESPACE,
                        {"control-plane": "controller-manager"}, "10.192.8.20"),
        "collector": Pod("otel-collector-0", OBSERVABILITY_NAMESPACE, {"app": "otel"}, "10.192.9.9"),
        "coredns": Pod("coredns-0", "kube-system", {"k8s-app": "kube-dns"}, "10.192.7.7"),
    }


LOAD_BALANCER = External("10.192.0.44", "the operator's load balancer (VPC address)")
API_SERVICE = External("172.20.0.1", "kubernetes Service ClusterIP")
API_ENI = External("10.192.1.5", "EKS control-plane ENI")
S3 = External("52.218.128.10", "S3 (through the gateway endpoint)")
INTERNET = External("203.0.113.9", "an internet host")


def _needed(p: dict[str, Pod]) -> list[tuple[str, Flow]]:
    router, prefill, decode = p["router"], p["prefill"], p["decode"]
    flows = [
        ("client -> router container port", Flow(p["client"], router, defaults.ROUTER_CONTAINER_PORT)),
        ("declared client namespace -> router", Flow(p["other client"], router, defaults.ROUTER_CONTAINER_PORT)),
        ("load balancer -> router", Flow(LOAD_BALANCER, router, defaults.ROUTER_CONTAINER_PORT)),
        ("router -> prefill", Flow(router, prefill, defaults.MODEL_PORT)),
        ("router -> decode", Flow(router, decode, defaults.MODEL_PORT)),
        ("prefill -> router PD proxy", Flow(prefill, router, defaults.ROUTER_PD_PROXY_PORT)),
        ("collector -> prefill metrics", Flow(p["collector"], prefill, defaults.MODEL_PORT)),
        ("collector -> decode metrics", Flow(p["collector"], decode, defaults.MODEL_PORT)),
        ("collector -> router metrics", Flow(p["collector"], router, defaults.ROUTER_CONTAINER_PORT)),
        ("prefill sidecar -> collector", Flow(prefill, p["collector"], 4317)),
        ("router sidecar -> collector", Flow(router, p["collector"], 4317)),
    ]
    for name, pod in (("prefill", prefill), ("decode", decode), ("router", router)):
        flows += [
            (f"{name} -> kube-apiserver (ClusterIP)", Flow(pod, API_SERVICE, defaults.HTTPS_PORT)),
            (f"{name} -> kube-apiserver (ENI)", Flow(pod, API_ENI, defaults.HTTPS_PORT)),
            (f"{name} -> DNS/UDP", Flow(pod, p["coredns"], defaults.DNS_PORT, "UDP")),
            (f"{name} -> DNS/TCP", Flow(pod, p["coredns"], defaults.DNS_PORT, "TCP")),
            (f"{name} -> S3", Flow(pod, S3, defaults.HTTPS_PORT)),
        ]
    for rank in range(TP):
        flows += [
            (f"prefill -> decode LMCache init port, rank {rank}", Flow(prefill, decode, defaults.LMCACHE_PEER_INIT_PORT + rank)),
            (f"prefill -> decode LMCache alloc port, rank {rank}", Flow(prefill, decode, defaults.LMCACHE_PEER_ALLOC_PORT + rank)),
        ]
        flows.append((f"prefill -> decode LMCache cache query port, rank {rank}",
                      Flow(prefill, decode, PEER_QUERY_PORT + rank)))
    return flows


def _forbidden(p: dict[str, Pod]) -> list[tuple[str, Flow]]:
    router, prefill, decode = p["router"], p["prefill"], p["decode"]
    return [
        ("another namespace's pod -> worker", Flow(p["stranger"], prefill, defaults.MODEL_PORT)),
        ("another namespace's pod -> router", Flow(p["stranger"], router, defaults.ROUTER_CONTAINER_PORT)),
        ("client -> worker, bypassing the router", Flow(p["client"], decode, defaults.MODEL_PORT)),
        ("internet -> worker", Flow(INTERNET, prefill, defaults.MODEL_PORT)),
        ("internet -> router", Flow(INTERNET, router, defaults.ROUTER_CONTAINER_PORT)),
        ("load balancer -> worker", Flow(LOAD_BALANCER, decode, defaults.MODEL_PORT)),
        ("load balancer -> router, another port", Flow(LOAD_BALANCER, router, 9090)),
        ("client -> router PD proxy port", Flow(p["client"], router, defaults.ROUTER_PD_PROXY_PORT)),
        ("decode -> router serving port", Flow(decode, router, defaults.ROUTER_CONTAINER_PORT)),
        ("decode -> router admin port", Flow(decode, router, 9090)),
        ("decode -> router PD proxy (only senders report)", Flow(decode, router, defaults.ROUTER_PD_PROXY_PORT)),
        ("decode -> router LMCache controller without kvaware", Flow(decode, router, defaults.LMCACHE_CONTROLLER_PORT)),
        ("worker -> another namespace's pod", Flow(prefill, p["stranger"], 5432)),
        ("router -> another namespace's pod", Flow(router, p["stranger"], 5432)),
        ("worker -> internet over plain HTTP", Flow(decode, INTERNET, 80)),
        ("router -> internet over plain HTTP", Flow(router, INTERNET, 80)),
        ("worker -> DNS elsewhere than CoreDNS", Flow(prefill, External("8.8.8.8"), defaults.DNS_PORT, "UDP")),
    ]


def test_every_flow_of_a_dpd_endpoint_is_admitted(cluster: Cluster, endpoint: EndpointConfig) -> None:
    # GIVEN the router chart's policies and the pods of one endpoint WHEN each needed flow is evaluated
    blocked = [name for name, flow in _needed(_pods(endpoint)) if not cluster.allows(flow)]
    # THEN none is blocked
    assert blocked == []


def test_flows_the_endpoint_does_not_need_are_dropped(cluster: Cluster, endpoint: EndpointConfig) -> None:
    admitted = [name for name, flow in _forbidden(_pods(endpoint)) if cluster.allows(flow)]
    assert admitted == []


def test_both_workloads_are_isolated_both_ways(cluster: Cluster, endpoint: EndpointConfig) -> None:
    # The matrix above proves something only if the router and the workers are selected for ingress and egress.
    pods = _pods(endpoint)
    for name in ("router", "prefill", "decode"):
        assert not cluster.allows(Flow(INTERNET, pods[name], 1)), name
        assert not cluster.allows(Flow(pods[name], INTERNET, 1)), name


@pytest.mark.parametrize("port", PROXY_PORTS)
def test_the_prefillers_reports_reach_the_router_on_whichever_proxy_port_the_operator_chose(
        cluster: Cluster, endpoint: EndpointConfig, port: int) -> None:
    # GIVEN the operator's PD proxy on a port the docs do not name: LMCache's example value or its own proxy's default.
    # A dropped report does not fail: the sender's ZMQ PUSH queues to its high-water mark, then blocks the prefiller.
    pods = _pods(endpoint)
    # WHEN a prefill pod reports a finished transfer THEN the policies admit it (its egress and the router's ingress)
    assert cluster.allows(Flow(pods["prefill"], pods["router"], port))
    # AND only the senders report: the decoder, a client and another namespace's pod are still dropped there
    assert not cluster.allows(Flow(pods["decode"], pods["router"], port))
    assert not cluster.allows(Flow(pods["client"], pods["router"], port))
    assert not cluster.allows(Flow(pods["stranger"], pods["router"], port))


def test_known_width_prefill_and_decode_reach_each_other_on_every_port(cluster: Cluster, endpoint: EndpointConfig) -> None:
    # LMCache's side channels run prefill -> decode only (the decoder binds, the prefiller connects), on ports the
    # operator does not document; the policy admits the endpoint's two roles to each other on every port, both ways,
    # so no undocumented port or transport connection cuts the KV path. Only the endpoint's own workers, though.
    pods = _pods(endpoint)
    for source, target in (("prefill", "decode"), ("decode", "prefill")):
        assert cluster.allows(Flow(pods[source], pods[target], 41234)), (source, target)
    assert not cluster.allows(Flow(pods["client"], pods["decode"], 41234))
    assert not cluster.allows(Flow(pods["prefill"], pods["stranger"], 5432))


def test_kvaware_routing_admits_the_workers_to_the_routers_lmcache_controller(
        synth: Callable[..., list[Manifest]], kvaware: EndpointConfig) -> None:
    # GIVEN a kvaware endpoint: LMCache on both roles reports its KV chunks to the router's controller
    cluster, pods = Cluster(_policies(synth, kvaware)), _pods(kvaware)
    port = defaults.LMCACHE_CONTROLLER_PORT
    # THEN prefill and decode reach it, a client or another namespace's pod does not, and the needed flows still pass
    assert cluster.allows(Flow(pods["prefill"], pods["router"], port))
    assert cluster.allows(Flow(pods["decode"], pods["router"], port))
    assert not cluster.allows(Flow(pods["client"], pods["router"], port))
    assert not cluster.allows(Flow(pods["stranger"], pods["router"], port))
    assert [name for name, flow in _needed(pods) if not cluster.allows(flow)] == []


def test_without_load_balancer_cidrs_only_declared_sources_reach_the_router(
        synth: Callable[..., list[Manifest]], endpoint: EndpointConfig) -> None:
    manifests = synth(lambda chart: EndpointRouter(chart, "Router", endpoint=endpoint))
    cluster, pods = Cluster([m for m in manifests if m["kind"] == "NetworkPolicy"]), _pods(endpoint)
    assert not cluster.allows(Flow(LOAD_BALANCER, pods["router"], defaults.ROUTER_CONTAINER_PORT))
    assert cluster.allows(Flow(pods["client"], pods["router"], defaults.ROUTER_CONTAINER_PORT))


def test_known_limit_a_pod_with_a_vpc_address_passes_as_the_load_balancer(cluster: Cluster, endpoint: EndpointConfig) -> None:
    # The VPC CNI gives pods VPC addresses and matches ipBlocks against them, so a pod on a node in the VPC CIDR
    # (e.g. a system node) reaches the router's container port like the load balancer does; pods on HyperPod nodes
    # (GPU subnet, a secondary CIDR) do not. docs/endpoints.md says so.
    pods = _pods(endpoint)
    assert cluster.allows(Flow(pods["stranger on a system node"], pods["router"], defaults.ROUTER_CONTAINER_PORT))
    assert not cluster.allows(Flow(pods["stranger on a system node"], pods["router"], 9090))
