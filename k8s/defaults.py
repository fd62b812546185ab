"""Fixed values of the Kubernetes side: the worker container layout, pod sizing, and the operator's labels.

Figures come from the documented DPD example (SageMaker HyperPod DPD documentation) and the operator's naming (same page); endpoint-level
defaults (image, threshold, buffer, strategy) live in ``hyperpod_dpd.catalogue`` and ``hyperpod_dpd.config.endpoints``.
"""

from __future__ import annotations

from hyperpod_dpd.catalogue.operator import (  # noqa: F401 - the shared names, as the charts use them
    DPD_ROLE_LABEL,
    DPD_ROLES,
    ENDPOINT_LABEL,
    GENERATION_LABEL,
    GPU_RESOURCE,
    MANAGED_BY,
    MANAGED_BY_LABEL,
)
from hyperpod_dpd.config.endpoint_router import default_router_pod_labels

# The vLLM worker as in the documented example: the server listens on 8000 and reads the weights the operator mounts.
MODEL_PORT = 8000
MODEL_PORT_NAME = "http"
MODEL_VOLUME_NAME = "model-weights"
MODEL_MOUNT_PATH = "/opt/ml/model"
LISTEN_ALL = "0.0.0.0"  # noqa: S104 - vLLM must accept the operator's Nginx sidecar and the router
# Share of the host's vCPUs and memory a pod using all GPUs requests: the example asks 96 vCPU / 1024 GiB of
# ml.p5.48xlarge's 192 / 2048, leaving room for the operator's sidecars, the device plugins and the kubelet.
HOST_SHARE = 0.5

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def router_pod_labels(resource_name: str, namespace: str) -> dict[str, str]:
    """ASSUMPTION (undocumented): the router pods of an IEC carry ``app=<iec-name>-<iec-namespace>-router``; one
    definition, in the configuration (``hyperpod_dpd.config.endpoint_router.default_router_pod_labels``), which
    ``hpdpd rollout`` also reads. A wrong guess selects no pod, so the router NetworkPolicy then has no effect (it
    fails open, never closed)."""
    return default_router_pod_labels(resource_name, namespace)


# --- NetworkPolicy facts (k8s/router.py; docs/endpoints.md "Network isolation") --------------------------------------
# A NetworkPolicy matches the port the pod's container listens on, not the Service port (the VPC CNI sees traffic after
# kube-proxy's DNAT; EKS user guide, "Limit Pod traffic with Kubernetes network policies", Considerations).

# ASSUMPTION: the router container listens on 8000. The operator's router is based on the vLLM production-stack
# router (DPD blog), whose Helm chart runs it with --port 8000 (vllm-project/production-stack helm/values.yaml,
# routerSpec.containerPort; the binary's own default is 8001). The AWS docs give only the Service port, 443.
# `hpdpd status` warns when the live router pods declare other ports.
ROUTER_CONTAINER_PORT = 8000
# ASSUMPTION: prefill workers report finished KV transfers to the router on 7500. LMCache's PD sender connects to
# pd_proxy_host:pd_proxy_port "to inform the proxy when transfer to decoder has been completed" (LMCache
# docs/source/api_reference/configurations.rst); 7500 is the port of every LMCache PD example
# (examples/disagg_prefill/1p1d/configs/lmcache-prefiller-config.yaml). The operator's value is undocumented.
ROUTER_PD_PROXY_PORT = 7500
# kvaware routing: the LMCache workers report their KV chunks to the router's LMCache controller (PULL socket),
# production-stack's --lmcache-controller-port, default 9000 (src/vllm_router/parsers/parser.py; its chart declares
# it as containerPort "lmcache-port"). ASSUMPTION that the operator's router keeps that default.
LMCACHE_CONTROLLER_PORT = 9000
# KV-transfer side channels between prefill and decode (ZMQ over TCP; the KV data itself moves over EFA/RDMA, which is
# not IP traffic): the LMCache receiver (decoder) binds pd_peer_init_port and pd_peer_alloc_port, one per tensor-
# parallel rank (lists indexed by rank: LMCache lmcache/v1/storage_backend/pd_backend.py, PDConfig), and the sender
# (prefiller) connects to them. 7300/7400 (+ rank) are LMCache's example values (examples/disagg_prefill/1p1d/configs/
# lmcache-decoder-pd-with-remote-config.yaml); the operator's are undocumented, so the worker policy admits the
# endpoint's prefill and decode pods to each other on every port, and these two only describe the flow in the tests.
LMCACHE_PEER_INIT_PORT = 7300
LMCACHE_PEER_ALLOC_PORT = 7400
# Cluster DNS: CoreDNS pods in kube-system carry k8s-app=kube-dns (Kubernetes docs, "Debugging DNS Resolution";
# the kube-dns Service selects them by it, so the VPC CNI's policy controller also admits the Service's ClusterIP:
# aws/amazon-network-policy-controller-k8s pkg/resolvers/endpoints.go, getMatchingServiceClusterIPs).
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# HTTPS to anywhere: the API server (reached at the `kubernetes` Service ClusterIP, which the VPC CNI sees before
# DNAT and cannot resolve because that Service has no selector), S3 (model download; the gateway endpoint routes to
# S3's public prefixes, not VPC addresses), STS (IRSA), CloudWatch / Amazon Managed Prometheus, Hugging Face.
HTTPS_PORT = 443
ANYWHERE = "0.0.0.0/0"
