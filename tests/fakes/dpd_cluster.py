"""A healthy DPD endpoint in a :class:`~tests.fakes.kube_api.FakeKube`, for tests to break one thing at a time.

Log lines are the serving stack's own wordings (hyperpod_dpd.ops.kv_logs cites each): LMCache 0.4.3's store and
retrieve lines, NIXL 1.0.1's backend line and its libfabric plugin's INFO line. :class:`ProbeKubelet` plays the
kubelet for the probe's pods (status, pod IP, logs), :class:`WorkerShell` answers exec in the workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.kube_api import FakeKube, node, pod

INFERENCE_NAMESPACE = "hyperpod-inference-system"
# LMCache 0.4.3 reads LMCACHE_NIXL_BACKENDS as a comma-separated list (config_base.py _to_str_list).
EFA_ENV = {"LMCACHE_NIXL_BACKENDS": "LIBFABRIC", "FI_PROVIDER": "efa", "NIXL_LOG_LEVEL": "INFO",
           "PYTHONHASHSEED": "0"}
# The operator renders the connector into the vLLM container's arguments (LMCache/LMCache PR #2732's thread).
KV_TRANSFER_CONFIG = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
# LMCache's retrieve line as the DPD documentation quotes it (one per TP rank); the decoder's local copy.
RETRIEVED = ("[Worker_TP0] [LMCache INFO] [req_id=cmpl-1] Retrieved 6035 out of 6035 required tokens (from 6035 "
             "total tokens). size: 0.2344 gb, cost 25.0000 ms, throughput: 9.3760 GB/s;")


def lmcache_config(role: str = "receiver", *, enable_pd: bool = True, backends: str = "['LIBFABRIC']") -> str:
    """LMCache 0.4.3's engine line (cache_engine.py:104), its config as the dict config_base.py's __str__ prints
    (fields in the order of lmcache/v1/config.py; the ones between left out)."""
    return ("[2026-12-01 21:55:00,001] LMCache INFO: Creating LMCacheEngine with config: {'chunk_size': 256, "
            "'local_cpu': False, 'max_local_cpu_size': 5.0, 'save_decode_cache': False, "
            f"'enable_pd': {enable_pd}, 'pd_role': '{role}', 'pd_buffer_size': 8589934592, 'pd_buffer_device': "
            "'cuda', 'pd_peer_host': '10.1.0.12', 'pd_peer_init_port': [7300], 'pd_peer_alloc_port': [7400], "
            f"'pd_proxy_host': '10.1.0.3', 'pd_proxy_port': 7500, 'transfer_channel': 'nixl', 'nixl_backends': "
            f"{backends}, 'nixl_buffer_size': None, 'extra_config': None}} (cache_engine.py:104:lmcache.v1.cache_engine)\n")


STARTUP = lmcache_config("receiver") + "2026-12-01 21:55:01 NIXL INFO    _api.py:361 Backend LIBFABRIC was instantiated\n"
PREFILL_STARTUP = STARTUP.replace("'receiver'", "'sender'")
NIXL_EFA = "I1201 21:55:00.123456  4242 libfabric_topology.cpp:130] Discovered 32 EFA devices\n"
NIXL_TCP = "I1201 21:55:00.123456  4242 libfabric_topology.cpp:133] Discovered 1 tcp devices (TCP fallback)\n"


def stored(size_gib: float = 0.2344, put_ms: float = 6.0, *, ranks: int = 8, offload_ms: float = 2.0) -> str:
    """LMCache 0.4.3's store lines of one request, one per TP rank (``size`` GiB written in ``put_ms`` each)."""
    cost = put_ms + offload_ms
    return "".join(
        f"[Worker_TP{r}] [LMCache INFO] [req_id=cmpl-1] Stored 6035 out of total 6035 tokens. size: {size_gib:.4f} GB, "
        f"cost {cost:.4f} ms, throughput: {size_gib / cost * 1000:.4f} GB/s; offload_time: {offload_ms:.4f} ms, "
        f"put_time: {put_ms:.4f} ms\n" for r in range(ranks))


def router_pod_name(iec: str, namespace: str) -> str:
    return f"{iec}-{namespace}-router-5c7d8-abcde"


def add_generation(fake: FakeKube, *, iec: str, namespace: str, endpoint: str, prefill_node: str = "p5-prefill-0",
                   decode_node: str = "p5-decode-0", state: str = "DeploymentComplete",
                   decoder_log: str = RETRIEVED, env: dict[str, str] | None = None, prefill_log: str | None = None,
                   nixl: str = NIXL_EFA, kv_transfer_config: str | None = KV_TRANSFER_CONFIG,
                   image: str = "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1") -> None:
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
    workers = [pod(prefill, namespace=namespace, node_name=prefill_node, role="prefill", env=env),
               pod(decode, namespace=namespace, node_name=decode_node, role="decode", env=env)]
    for worker in workers:
        container = worker["spec"]["containers"][0]
        container["image"] = image
        container["args"] = ["--model", "/opt/ml/model", "--port", "8080"] + (
            ["--kv-transfer-config", kv_transfer_config] if kv_transfer_config else [])
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        worker["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    fake.pods += [*workers, pod(router, namespace=INFERENCE_NAMESPACE, node_name="system-0", gpus=0, efa=0,
                                container="router-container")]
    fake.logs[(namespace, prefill, f"prefill-{iec}")] = (PREFILL_STARTUP + nixl
                                                         + (stored() if prefill_log is None else prefill_log))
    fake.logs[(namespace, decode, f"decode-{iec}")] = STARTUP + nixl + decoder_log + "\n"
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


def add_free_nodes(fake: FakeKube) -> None:
    """A second node in each GPU group that serves nothing: the probe's bandwidth test runs there."""
    fake.nodes += [node("p5-prefill-1", role="prefill"), node("p5-decode-1", role="decode")]


# ---- what the probe meets: fi_info and fi_pingpong as libfabric prints them ----------------------------------------

FI_INFO_EFA = "".join(f"provider: efa\n    fabric: efa\n    domain: rdmap{16 + i}s27-rdm\n    version: 122.0\n"
                      f"    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n" for i in range(4))
FI_INFO_NONE = "fi_getinfo: -61 (No data available)\n"  # util/info.c, exit 61
NOT_FOUND = "sh: 1: fi_info: not found\n"


def pingpong(mb_per_second: float) -> str:
    """fi_pingpong's result table (util/pingpong.c show_perf) for 4 MiB messages."""
    return ("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
            f"4m      1k      =1k      8g          0.73s {mb_per_second:10.2f}     359.93       0.00\n")


def probe_output(*, fi_info: str = FI_INFO_EFA, fi_exit: int = 0, client: bool, rate: float | None = 11500.0) -> str:
    """The log of a probe pod running hyperpod_dpd.ops.probe_pods.script."""
    text = f"hpdpd-probe: fi_info\n{fi_info}hpdpd-probe: fi_info exit {fi_exit}\n"
    if fi_exit:
        return text
    text += f"hpdpd-probe: fi_pingpong {'client' if client else 'server'}\n"
    return text + (pingpong(rate) if rate is not None and client else "")


def _terminate(document: dict[str, Any], code: int) -> None:
    document["status"] = {"phase": "Succeeded" if code == 0 else "Failed", "podIP": "10.1.0.7", "containerStatuses": [
        {"name": "probe", "ready": False, "state": {"terminated": {"exitCode": code, "reason": "Completed"
                                                                   if code == 0 else "Error"}}}]}


@dataclass
class ProbeKubelet:
    """``fake.on_pod_created`` for the probe's pods: the server (decode) starts, the client (prefill) runs the test.

    ``server_fi_info``/``client_fi_info`` and their exit codes are what libfabric lists in the image on each node;
    ``rate`` is the fi_pingpong result in MB/sec; ``start`` False leaves the server Pending (a timeout).
    """

    rate: float | None = 11500.0
    server_fi_info: str = FI_INFO_EFA
    server_fi_exit: int = 0
    client_fi_info: str = FI_INFO_EFA
    client_fi_exit: int = 0
    client_exit: int = 0
    start: bool = True
    created: list[dict[str, Any]] = field(default_factory=list)
    on_client: Callable[[], None] | None = None

    def __call__(self, fake: FakeKube, document: dict[str, Any]) -> None:
        self.created.append(document)
        meta = document["metadata"]
        key = (meta["namespace"], meta["name"], "probe")
        if meta["labels"].get("hyperpod-dpd/probe-role") == "decode":
            if not self.start:
                document["status"] = {"phase": "Pending", "containerStatuses": [{"name": "probe", "state": {
                    "waiting": {"reason": "ContainerCreating"}}}]}
                return
            fake.logs[key] = probe_output(fi_info=self.server_fi_info, fi_exit=self.server_fi_exit, client=False)
            if self.server_fi_exit:
                _terminate(document, self.server_fi_exit)
            else:
                document["status"] = {"phase": "Running", "podIP": "10.1.0.7", "containerStatuses": [
                    {"name": "probe", "ready": True, "state": {"running": {}}}]}
            return
        if self.on_client:
            self.on_client()
        fake.logs[key] = probe_output(fi_info=self.client_fi_info, fi_exit=self.client_fi_exit, client=True,
                                      rate=self.rate if self.client_exit == 0 else None)
        _terminate(document, self.client_fi_exit or self.client_exit)
        for other in fake.pods:  # the server answers the client and exits
            if other["metadata"]["labels"].get("hyperpod-dpd/probe-role") == "decode":
                _terminate(other, 0)


@dataclass
class WorkerShell:
    """``fake.exec`` for the workers: ``/proc/1/environ`` and ``fi_info`` as the container would answer."""

    environ: dict[str, str] = field(default_factory=lambda: dict(EFA_ENV, HF_TOKEN="secret"))
    fi_info: str = FI_INFO_EFA
    fi_exit: int = 0
    commands: list[tuple[str, str, list[str]]] = field(default_factory=list)

    def __call__(self, namespace: str, pod_name: str, container: str, command: list[str]) -> tuple[str, str, int]:
        self.commands.append((pod_name, container, command))
        if command[:2] == ["cat", "/proc/1/environ"]:
            return "".join(f"{k}={v}\0" for k, v in self.environ.items()), "", 0
        if command[:2] == ["sh", "-c"] and "fi_info" in command[2]:
            return self.fi_info, "", self.fi_exit
        return "", f"sh: 1: {command[0]}: not found\n", 127
