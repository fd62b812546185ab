"""Fixed values of the Kubernetes side: the worker container layout, pod sizing, and the operator's labels.

Figures come from the documented DPD example (SageMaker HyperPod DPD documentation) and the operator's naming (same
page); each constant names its source beside it. Endpoint-level defaults (image, threshold, buffer, strategy) live
in ``hyperpod_dpd.catalogue`` and ``hyperpod_dpd.config.endpoints``.
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

# The vLLM worker as in the IEC example of the SageMaker HyperPod DPD page
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html): `--port 8000`,
# modelInvocationPort {name: http, containerPort: 8000},
# modelVolumeMount {name: model-weights, mountPath: /opt/ml/model}.
# The CRD allows modelInvocationPort.name ^http$|^grpc$ (default http) and defaults mountPath to /opt/ml/model
# (k8s/crds/, InferenceEndpointConfig v1 spec.worker).
MODEL_PORT = 8000
MODEL_PORT_NAME = "http"
MODEL_VOLUME_NAME = "model-weights"
MODEL_MOUNT_PATH = "/opt/ml/model"
# The same page's --host: vLLM must accept the operator's Nginx sidecar and the router.
LISTEN_ALL = "0.0.0.0"  # noqa: S104
# Share of the host's vCPUs and memory a pod using all GPUs requests: the example asks 96 vCPU / 1024 GiB of
# ml.p5.48xlarge's 192 / 2048, leaving room for the operator's sidecars, the device plugins and the kubelet.
HOST_SHARE = 0.5

# Set by the control plane on every namespace, value = its name (Kubernetes docs, "Well-Known Labels, Annotations and
# Taints", https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


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
# router (DPD blog), whose Helm chart runs it with --port 8000 (vllm-project/production-stack @ a6c01db0
# helm/values.yaml:528 routerSpec.containerPort, passed as --port by helm/templates/deployment-router.yaml; the
# binary's own default is 8001, src/vllm_router/parsers/parser.py:131). The AWS docs give only the Service port, 443.
# `hpdpd status` warns when the live router pods declare other ports.
ROUTER_CONTAINER_PORT = 8000
# The LMCache PD sender (the prefiller) PUSH-connects to pd_proxy_host:pd_proxy_port and sends one ProxyNotif per
# finished request (LMCache/LMCache @ 07e07869 lmcache/v1/storage_backend/pd_backend.py, _init_sender and
# batched_submit_put_task). 7500 is the value of LMCache's PD example configs (@ 02fe058c examples/disagg_prefill/1p1d/
# configs/lmcache-prefiller-config.yaml), but LMCache's own proxy defaults to 8500 (@ 00482afc examples/disagg_prefill/
# disagg_proxy_server.py, --proxy-port) and production-stack's router binds no such socket (@ a6c01db0 src/vllm_router:
# its disaggregated path is two HTTP requests). The operator's value is undocumented, and a dropped port does not fail
# fast: a ZMQ PUSH socket queues up to its high-water mark (default 1000) and then blocks the sender (libzmq
# zmq_socket(3), ZMQ_PUSH: "Action in mute state: Block"), so the prefiller stops moving KV after about a thousand
# disaggregated requests. The policies therefore admit the endpoint's prefill pods to the router on every port; this
# constant is only the example port the flow tests use. That rule names no port and no router pod label, so the VPC
# CNI's controller also admits the ClusterIPs of the namespace's Services on every port (same source as DNS below),
# should pd_proxy_host be a Service name.
ROUTER_PD_PROXY_PORT = 7500
# kvaware routing: the LMCache workers PUSH their KV chunk reports to the router's LMCache controller (PULL socket),
# production-stack's --lmcache-controller-port, default 9000 (@ a6c01db0 src/vllm_router/parsers/parser.py:242-245;
# helm/templates/deployment-router.yaml declares containerPort 9000 "lmcache-port"; the worker side: LMCache
# @ 033a8062 lmcache/v1/cache_controller/worker.py, LMCacheWorker push_socket). ASSUMPTION that the operator's router
# keeps that default. The controller's requests to the workers' REP sockets go router -> worker, which the worker
# policy admits.
LMCACHE_CONTROLLER_PORT = 9000
# KV-transfer side channels between prefill and decode (ZMQ over TCP; the KV data itself moves over EFA/RDMA, which is
# not IP traffic): the LMCache receiver (decoder) binds pd_peer_alloc_port (REP) and, through its NixlChannel,
# pd_peer_init_port (REP, the NIXL metadata and memory-descriptor handshake), one of each per tensor-parallel rank
# (lists indexed by rank); the sender (prefiller) REQ-connects to the ports the router names in the request's
# disagg_spec (LMCache @ 07e07869 lmcache/v1/storage_backend/pd_backend.py: PDConfig, _init_receiver,
# _ensure_peer_connection; @ 0449f44d lmcache/v1/transfer_channel/nixl_channel.py: _init_side_channels,
# lazy_init_peer_connection). 7300/7400 (+ rank) are LMCache's example values (@ 0ab216a3 examples/disagg_prefill/1p1d/
# configs/lmcache-decoder-pd-with-remote-config.yaml; its proxy defaults to 8300/8400 instead); the operator's are
# undocumented and not declared as container ports, so the worker policy admits the endpoint's prefill and decode pods
# to each other on every port, and these two only describe the flow in the tests.
LMCACHE_PEER_INIT_PORT = 7300
LMCACHE_PEER_ALLOC_PORT = 7400
# Cluster DNS: CoreDNS pods in kube-system carry k8s-app=kube-dns (Kubernetes docs, "Debugging DNS Resolution";
# the kube-dns Service selects them by it, so the VPC CNI's policy controller also admits the Service's ClusterIP:
# aws/amazon-network-policy-controller-k8s @ d80a261c pkg/resolvers/endpoints.go, getMatchingServiceClusterIPs).
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# HTTPS to anywhere: the API server (reached at the `kubernetes` Service ClusterIP, which the VPC CNI sees before
# DNAT and cannot resolve because that Service has no selector), S3 (model download; the gateway endpoint routes to
# S3's public prefixes, not VPC addresses), STS (IRSA), CloudWatch / Amazon Managed Prometheus, Hugging Face.
HTTPS_PORT = 443
ANYWHERE = "0.0.0.0/0"
