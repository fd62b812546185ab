"""A healthy DPD endpoint in a :class:`~tests.fakes.kube_api.FakeKube`, for tests to break one thing at a time."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube_api import FakeKube, node, pod

INFERENCE_NAMESPACE = "hyperpod-inference-system"
EFA_ENV = {"LMCACHE_NIXL_BACKENDS": '["LIBFABRIC"]', "FI_PROVIDER": "efa", "PYTHONHASHSEED": "0"}
# LMCache's retrieve line as the DPD documentation quotes it (one per TP rank); 0.2344 GiB in 25 ms: ~10 GB/s.
RETRIEVED = ("[Worker_TP0] [LMCache INFO] [req_id=cmpl-1] Retrieved 6035 out of 6035 required tokens (from 6035 "
             "total tokens). size: 0.2344 gb, cost 25.0000 ms, throughput: 9.3760 GB/s;")
STARTUP = "NIXL INFO    _api.py:369 Backend LIBFABRIC was instantiated\n'pd_role': 'receiver'\n"


def router_pod_name(iec: str, namespace: str) -> str:
    return f"{iec}-{namespace}-router-5c7d8-abcde"


def add_generation(fake: FakeKube, *, iec: str, namespace: str, endpoint: str, prefill_node: str = "p5-prefill-0",
                   decode_node: str = "p5-decode-0", state: str = "DeploymentComplete",
                   decoder_log: str = RETRIEVED, env: dict[str, str] | None = None) -> None:
    """One IEC generation with its pods, router and logs (nodes are added separately)."""
    env = EFA_ENV if env is None else env
    generation = iec.rsplit("-", 1)[-1]
    fake.iecs[(namespace, iec)] = {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
        "metadata": {"name": iec, "namespace": namespace, "creationTimestamp": f"2026-01-01T00:{len(fake.iecs):02d}:00Z",
                     "labels": {"hyperpod-dpd/endpoint": endpoint, "hyperpod-dpd/generation": generation}},
        "status": {"state": state, "conditions": [{"message": "DPD prefill and decode deployments are ready"}]}}
    prefill, decode = f"prefill-{iec}-6f9c-x1", f"decode-{iec}-7a8b-y1"
    router = router_pod_name(iec, namespace)
    fake.pods += [pod(prefill, namespace=namespace, node_name=prefill_node, role="prefill", env=env),
                  pod(decode, namespace=namespace, node_name=decode_node, role="decode", env=env),
                  pod(router, namespace=INFERENCE_NAMESPACE, node_name="system-0", gpus=0, efa=0,
                      container="router-container")]
    fake.logs[(namespace, prefill, f"prefill-{iec}")] = STARTUP.replace("receiver", "sender")
    fake.logs[(namespace, decode, f"decode-{iec}")] = STARTUP + decoder_log + "\n"
    fake.logs[(INFERENCE_NAMESPACE, router, "router-container")] = (
        "[INFO] Conditional routing: estimated_tokens=12, threshold=4096, disaggregate=False\n"
        "[INFO] Conditional routing: estimated_tokens=6750, threshold=4096, disaggregate=True\n"
        "[INFO] Conditional routing: estimated_tokens=6750, threshold=4096, disaggregate=True\n")


def healthy(fake: FakeKube, endpoint: Any, *, iec: str | None = None) -> FakeKube:
    """Two p5 nodes in one AZ (one per role, 8 GPUs and 32 EFA each), the endpoint's generation and its Service."""
    iec = iec or endpoint.resource_name
    fake.nodes = [node("p5-prefill-0", role="prefill"), node("p5-decode-0", role="decode"),
                  node("system-0", role="system", gpus=0, efa=0, instance_type="ml.m5.2xlarge")]
    add_generation(fake, iec=iec, namespace=endpoint.namespace, endpoint=endpoint.name)
    fake.services[(endpoint.namespace, endpoint.name)] = {
        "metadata": {"name": endpoint.name, "namespace": endpoint.namespace},
        "spec": {"type": "ExternalName",
                 "externalName": f"{iec}-{endpoint.namespace}-routing-service.{INFERENCE_NAMESPACE}.svc.cluster.local"}}
    return fake
