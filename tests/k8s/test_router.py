"""EndpointRouter: the stable client Service, NetworkPolicies, PodDisruptionBudgets and the optional Ingress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.config.network import CreateVpc, ExistingSubnet, ExistingVpc, NetworkConfig
from hyperpod_dpd.k8s import defaults
from hyperpod_dpd.k8s.router import EndpointRouter, load_balancer_cidrs

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


DPD_PODS = {"matchExpressions": [{"key": "inference.sagemaker.aws.amazon.com/dpd-role", "operator": "In",
                                  "values": ["prefill", "decode"]}]}
PREFILL_PODS = {"matchExpressions": [{"key": "inference.sagemaker.aws.amazon.com/dpd-role", "operator": "In",
                                      "values": ["prefill"]}]}


NOT_DPD_PODS = {"matchExpressions": [{"key": "inference.sagemaker.aws.amazon.com/dpd-role", "operator": "DoesNotExist"}]}


def _namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}


def _clients(name: str) -> dict[str, Any]:
    """A client namespace's pods other than DPD workers."""
    return {**_namespace(name), "podSelector": NOT_DPD_PODS}


# What both roles send outside the endpoint: DNS to CoreDNS, HTTPS anywhere, the observability add-on.
COMMON_EGRESS = [
    {"to": [{**_namespace("kube-system"), "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
     "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
    {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443, "protocol": "TCP"}]},
    {"to": [_namespace("hyperpod-observability")]},
]


def test_router_policy_isolates_the_router_and_admits_its_flows(
        synth: Callable[..., list[Manifest]], plain_endpoint: EndpointConfig, find: Find) -> None:
    # GIVEN the default endpoint rendered with the VPC CIDR as the load balancer's addresses
    manifests = synth(lambda chart: EndpointRouter(chart, "Router", endpoint=plain_endpoint,
                                                   load_balancer_cidrs=["10.192.0.0/16"]))
    spec = find(manifests, "NetworkPolicy", "llama-llm-router")["spec"]
    # THEN the router pods are isolated both ways
    assert spec["podSelector"] == {"matchLabels": {"app": f"{plain_endpoint.resource_name}-llm-router"}}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # AND the endpoint namespace's clients (not its workers) and the load balancer reach the container port (not the
    # Service's 443), the prefill pods every port (their PD proxy reports, on a port the operator does not document), metrics collection
    # any port
    assert spec["ingress"] == [
        {"from": [_clients("llm"), {"ipBlock": {"cidr": "10.192.0.0/16"}}], "ports": [{"port": 8000, "protocol": "TCP"}]},
        {"from": [{**_namespace("llm"), "podSelector": PREFILL_PODS}]},
        {"from": [_namespace("hyperpod-observability")]},
    ]
    # AND the router sends to the endpoint's workers, DNS, HTTPS and the observability add-on only
    assert spec["egress"] == [{"to": [{**_namespace("llm"), "podSelector": DPD_PODS}]}, *COMMON_EGRESS]


def test_worker_policy_admits_the_router_namespace_the_other_role_and_metrics(plain: list[Manifest], find: Find) -> None:
    spec = find(plain, "NetworkPolicy", "llama-dpd-workers")["spec"]
    assert spec["podSelector"] == DPD_PODS
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [{"from": [
        _namespace("hyperpod-inference-system"), {"podSelector": DPD_PODS}, _namespace("hyperpod-observability")]}]
    # AND they send to each other, to the operator's namespace (the router's undocumented report ports) on every port
    assert spec["egress"] == [
        {"to": [{"podSelector": DPD_PODS}]},
        {"to": [_namespace("hyperpod-inference-system")]},
        *COMMON_EGRESS]


def test_kvaware_routing_opens_the_lmcache_controller_port_of_the_router(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig], find: Find) -> None:
    # kvaware on an image that states the vLLM and LMCache it needs (the documented images' vLLM is too old)
    endpoint = make_endpoint(namespace="llm", routing={"strategy": "kvaware"}, invocation_path="v1/completions",
                             image="123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-dpd:0.19.1",
                             image_versions={"vllm": "0.19.1", "lmcache": "0.4.3"})
    manifests = _router(synth, endpoint)
    router = find(manifests, "NetworkPolicy", "llama-llm-router")["spec"]
    assert {"from": [{**_namespace("llm"), "podSelector": DPD_PODS}],
            "ports": [{"port": 9000, "protocol": "TCP"}]} in router["ingress"]
    # AND the workers' egress to the operator's namespace, already on every port, needs no change
    workers = find(manifests, "NetworkPolicy", "llama-dpd-workers")["spec"]
    assert workers["egress"][1] == {"to": [_namespace("hyperpod-inference-system")]}


def test_network_policy_ports_and_labels_are_pinned() -> None:
    # Undocumented operator facts (k8s/defaults.py has the source or the assumption of each): a change must be
    # deliberate, because a wrong port cuts a flow once the VPC CNI enforces the policies.
    assert (defaults.ROUTER_CONTAINER_PORT, defaults.ROUTER_PD_PROXY_PORT, defaults.LMCACHE_CONTROLLER_PORT) == (8000, 7500, 9000)
    assert (defaults.LMCACHE_PEER_INIT_PORT, defaults.LMCACHE_PEER_ALLOC_PORT) == (7300, 7400)
    assert (defaults.DNS_NAMESPACE, defaults.DNS_POD_LABELS, defaults.DNS_PORT) == ("kube-system", {"k8s-app": "kube-dns"}, 53)
    assert (defaults.HTTPS_PORT, defaults.ANYWHERE) == (443, "0.0.0.0/0")
    assert defaults.router_pod_labels("llama-9b9be6", "llm") == {"app": "llama-9b9be6-llm-router"}


def test_the_load_balancer_sends_from_the_vpc_cidr_of_a_created_or_adopted_network() -> None:
    created = NetworkConfig(gpu_availability_zone="us-west-2a",
                            create=CreateVpc(availability_zones=("us-west-2a", "us-west-2b"), cidr="10.50.0.0/16"))
    subnet = {"availability_zone": "us-west-2a"}
    adopted = NetworkConfig(gpu_availability_zone="us-west-2a", existing=ExistingVpc(
        vpc_id="vpc-0a1b2c3d4e5f60718", cidr="10.20.0.0/16",
        private_subnets=(ExistingSubnet(subnet_id="subnet-0a1b2c3d4e5f60001", **subnet),
                         ExistingSubnet(subnet_id="subnet-0a1b2c3d4e5f60002", availability_zone="us-west-2b")),
        gpu_subnet=ExistingSubnet(subnet_id="subnet-0a1b2c3d4e5f60003", **subnet)))
    # THEN the VPC CIDR, never the GPU subnet's block where HyperPod nodes and their pods live
    assert load_balancer_cidrs(created) == ("10.50.0.0/16",)
    assert load_balancer_cidrs(adopted) == ("10.20.0.0/16",)


def test_budgets_cover_each_role_one_pod_at_a_time_by_default(plain: list[Manifest], find: Find) -> None:
    for role in ("prefill", "decode"):
        assert find(plain, "PodDisruptionBudget", f"llama-{role}")["spec"] == {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"inference.sagemaker.aws.amazon.com/dpd-role": role}}}


def test_declared_client_namespaces_cidrs_and_router_labels_shape_the_router_policy(
        exposed: list[Manifest], find: Find) -> None:
    spec = find(exposed, "NetworkPolicy", "llama-llm-router")["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "llama-router"}}
    assert spec["ingress"][0]["from"] == [_clients("apps"), _clients("batch"), {"ipBlock": {"cidr": "10.192.0.0/16"}}]
    # AND the workers do not take the declared CIDRs: a load balancer reaches the router, never a worker
    workers = find(exposed, "NetworkPolicy", "llama-dpd-workers")["spec"]["ingress"][0]["from"]
    assert not [peer for peer in workers if "ipBlock" in peer]


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
        # no max_model_len: the model's 131072-token context at 100 ms TPOT drains longer than the ALB's 3600 s most
        "alb.ingress.kubernetes.io/target-group-attributes": "deregistration_delay.timeout_seconds=3600",
    }
    assert ingress["spec"] == {
        "ingressClassName": "alb",
        "tls": [{"hosts": ["llama.example.com"]}],
        "rules": [{"host": "llama.example.com", "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": exposed_endpoint.router_service_name, "port": {"number": 443}}}}]}}]}


@pytest.mark.parametrize(("changes", "seconds"), [
    ({"rollout": {"drain_seconds": 90}}, 90),  # the configured drain
    # 8192 tokens x 50 ms + 1 s TTFT = 410.6 s, rounded up, plus CoreDNS's 5 s TTL
    ({"max_model_len": 8192, "slo": {"ttft_ms": 1000, "tpot_ms": 50}}, 416),
])
def test_the_alb_drains_old_targets_as_long_as_the_rollout_does(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig], find: Find,
        changes: dict[str, Any], seconds: int) -> None:
    # GIVEN an ALB Ingress and a drain that is configured, or derived from the longest request (plus the DNS TTL)
    endpoint = make_endpoint(**changes, router={"allowed_cidrs": ["10.0.0.0/8"], "ingress": {"host": "llama.example.com"}})
    # WHEN it is rendered
    annotations = find(_router(synth, endpoint), "Ingress", "llama-default")["metadata"]["annotations"]
    # THEN the ALB keeps the old router's connections open for that long after the backend is re-pointed
    assert endpoint.drain_seconds == seconds
    assert annotations["alb.ingress.kubernetes.io/target-group-attributes"] == \
        f"deregistration_delay.timeout_seconds={seconds}"


def test_the_router_label_assumption_is_one_fact(make_endpoint: Callable[..., EndpointConfig]) -> None:
    # GIVEN the chart's label assumption and the one the rollout uses to widen and narrow the router policy
    endpoint = make_endpoint(namespace="llm")
    # THEN they agree, for the configured generation and for any other
    for iec in (endpoint.resource_name, "llama-0ld000"):
        assert endpoint.router_pod_labels_for(iec) == defaults.router_pod_labels(iec, "llm")


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
