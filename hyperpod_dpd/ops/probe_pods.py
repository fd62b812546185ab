"""The probe's pods: their manifests and scripts, and what their logs and statuses say.

Tools, and why these: the DPD images install the EFA installer (aws/deep-learning-containers@287918c
``docker/vllm/Dockerfile.amzn2023``, stage ``base``: ``install_efa_amzn2023.sh`` runs ``efa_installer.sh -y
--skip-kmod --skip-limit-conf --no-verify``; PATH has ``/opt/amazon/efa/bin``), whose libfabric brings ``fi_info``
and ``fi_pingpong`` (AWS PCS user guide, "Test EFA": "the fi_pingpong program, which is included in the EFA software
installation"; AWS's own image tests run ``fi_info -p efa`` and ``fi_pingpong -e rdm -p efa`` inside those images:
``test/efa/scripts/efa_sanity.sh``, ``efa_pingpong.sh`` @e0ecede). Neither fabtests (``fi_rma_bw``) nor ``nixlbench``
is installed there (the nixl-cu12 1.0.1 wheel ships the Python bindings and plugins only), so the bandwidth test is
``fi_pingpong``: libfabric's own client/server test (ofiwg/libfabric@af8ddbe ``util/pingpong.c``): the RDM endpoint
(``-e rdm``; its default is DGRAM), the efa provider (``-p efa``), one message in flight on one EFA device, sizes up
to ``PP_MAX_DATA_MSG`` (6 MiB), a TCP control connection to port 47592 of the server for the address exchange, and a
result row whose ``MB/sec`` is bytes per microsecond. ``-S`` and ``-I`` must match on both sides (fi_pingpong(1)).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.catalogue.operator import EFA_RESOURCE, ENDPOINT_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from hyperpod_dpd.ops.kv_logs import COMMAND_NOT_FOUND, FiInfo, fi_info, perf_mb_per_second

MARK = "hpdpd-probe:"
CONTAINER = "probe"
PROBE_LABEL = "hyperpod-dpd/probe"  # the run's token, on every pod it creates
EFA_BIN = "/opt/amazon/efa/bin"  # EFA installer README: "Most software is installed in /opt/amazon/efa/"
FI_INFO = "fi_info -p efa -t FI_EP_RDM"  # the endpoint type NIXL's libfabric plugin asks for (hints FI_EP_RDM)
PINGPONG_MAX_BYTES = (1 << 22) + (1 << 21)  # util/pingpong.c PP_MAX_DATA_MSG
SERVER_ENV = "HPDPD_PROBE_SERVER"
CLIENT_ATTEMPTS = 5  # fi_pingpong's client does not retry its control connection (pp_ctrl_init_client)
# A container without GPU requests still sees every GPU when its image sets NVIDIA_VISIBLE_DEVICES=all (CUDA images
# do) under the NVIDIA runtime; "void" makes the runtime behave as runc (NVIDIA/nvidia-container-runtime README,
# "NVIDIA_VISIBLE_DEVICES"). The probe needs no GPU and must not touch the serving ones.
NO_GPUS = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
FI_INFO_EXIT = re.compile(re.escape(MARK) + r" fi_info exit (\d+)")
# Variables of a worker's effective environment the checks read; nothing else is kept (an environment may hold
# credentials).
KEPT_PREFIXES = ("FI_", "LMCACHE_NIXL", "NIXL_", "UCX_")


def path_line() -> str:
    return f'export PATH="$PATH:{EFA_BIN}"'


def provider_command() -> list[str]:
    """fi_info inside a running worker (exec)."""
    return ["sh", "-c", f"{path_line()}; {FI_INFO} 2>&1"]


def pingpong(message_bytes: int, iterations: int) -> str:
    return f"fi_pingpong -e rdm -p efa -S {message_bytes} -I {iterations}"


def script(*, server: bool, message_bytes: int, iterations: int) -> str:
    """POSIX sh: fi_info (the provider check), then fi_pingpong as server or client; 127 when a tool is missing."""
    lines = [path_line(), f'echo "{MARK} fi_info"', f"{FI_INFO} 2>&1; rc=$?", f'echo "{MARK} fi_info exit $rc"',
             'if [ "$rc" -ne 0 ]; then exit "$rc"; fi',
             f'command -v fi_pingpong >/dev/null 2>&1 || {{ echo "{MARK} fi_pingpong not found"; exit 127; }}']
    test = pingpong(message_bytes, iterations)
    if server:
        return "\n".join([*lines, f'echo "{MARK} fi_pingpong server"', f"exec {test} 2>&1"])
    return "\n".join([*lines, f'echo "{MARK} fi_pingpong client"', "i=0; rc=1",
                      f"while [ $i -lt {CLIENT_ATTEMPTS} ]; do",
                      f'  {test} "${SERVER_ENV}" 2>&1 && exit 0', "  rc=$?; i=$((i+1)); sleep 2", 'done; exit "$rc"'])


def manifest(*, name: str, namespace: str, node: str, image: str, token: str, endpoint: str, role: str,
             command: str, deadline_seconds: int, template: Mapping[str, Any] | None,
             server_ip: str | None = None) -> dict[str, Any]:
    """A probe pod pinned to ``node`` (nodeName: no scheduling), one EFA device, no GPU, stopped by the kubelet after
    ``deadline_seconds`` even if nobody deletes it. Tolerations, image pull secrets and the container's security
    context are the running worker's (``template``), so the probe runs as the workers do."""
    env = [dict(NO_GPUS)] + ([{"name": SERVER_ENV, "value": server_ip}] if server_ip else [])
    container: dict[str, Any] = {
        "name": CONTAINER, "image": image, "command": ["sh", "-c", command], "env": env,
        "resources": {"requests": {EFA_RESOURCE: "1", "cpu": "1", "memory": "1Gi"},
                      "limits": {EFA_RESOURCE: "1", "memory": "2Gi"}}}
    spec: dict[str, Any] = {"nodeName": node, "restartPolicy": "Never", "activeDeadlineSeconds": deadline_seconds,
                            "automountServiceAccountToken": False, "containers": [container]}
    if template:
        from hyperpod_dpd.ops.fabric import worker_container

        worker_spec = template.get("spec") or {}
        for key in ("tolerations", "imagePullSecrets"):
            if worker_spec.get(key):
                spec[key] = worker_spec[key]
        security = worker_container(template).get("securityContext")
        if security:
            container["securityContext"] = security
    labels = {MANAGED_BY_LABEL: MANAGED_BY, PROBE_LABEL: token, ENDPOINT_LABEL: endpoint, "hyperpod-dpd/probe-role": role}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}


def environment(environ: str) -> dict[str, str]:
    """The fabric variables of a NUL-separated ``/proc/<pid>/environ``."""
    kept: dict[str, str] = {}
    for entry in environ.split("\0"):
        name, sep, value = entry.partition("=")
        if sep and name.startswith(KEPT_PREFIXES):
            kept[name] = value
    return kept


@dataclass(frozen=True, kw_only=True)
class ProbeLog:
    fi_info: FiInfo | None  # None: the script did not get to run fi_info
    pingpong_missing: bool = False
    mb_per_second: float | None = None
    tail: str = ""


def parse_log(text: str, exit_code: int | None) -> ProbeLog:
    tail = " ".join(text.split())[-300:]
    found = FI_INFO_EXIT.search(text)
    info: FiInfo | None = None
    if found:
        start = text.find(f"{MARK} fi_info\n")
        section = text[start + len(MARK) + 9:found.start()] if start >= 0 else text[:found.start()]
        info = fi_info(section, int(found.group(1)))
    elif exit_code == COMMAND_NOT_FOUND:
        info = FiInfo(exit_code=COMMAND_NOT_FOUND, error="sh or fi_info not found in the image")
    missing = f"{MARK} fi_pingpong not found" in text
    rate = None
    marker = text.find(f"{MARK} fi_pingpong client")
    if marker >= 0:
        rate = perf_mb_per_second(text[marker:])
    return ProbeLog(fi_info=info, pingpong_missing=missing, mb_per_second=rate, tail=tail)


def phase(document: Mapping[str, Any]) -> str:
    return str((document.get("status") or {}).get("phase") or "Pending")


def pod_ip(document: Mapping[str, Any]) -> str | None:
    status = document.get("status") or {}
    return str(status["podIP"]) if phase(document) == "Running" and status.get("podIP") else None


def terminated(document: Mapping[str, Any]) -> tuple[int | None, str] | None:
    """(exit code, why) once the pod stopped; None while it has not. A pod the kubelet refused has no exit code."""
    status = document.get("status") or {}
    if phase(document) not in ("Succeeded", "Failed"):
        return None
    for item in status.get("containerStatuses") or []:
        state = (item.get("state") or {}).get("terminated") if isinstance(item, dict) else None
        if state:
            return int(state.get("exitCode", 1)), str(state.get("reason") or "")
    return None, " ".join(f"{status.get('reason', '')}: {status.get('message', '')}".split()).strip(": ")


def waiting_reason(document: Mapping[str, Any]) -> str:
    """Why a pod is not running yet: its container's waiting reason or its condition messages."""
    status = document.get("status") or {}
    for item in status.get("containerStatuses") or []:
        waiting = (item.get("state") or {}).get("waiting") if isinstance(item, dict) else None
        if waiting:
            return " ".join(f"{waiting.get('reason', '')} {waiting.get('message', '')}".split())
    messages = [str(c.get("message")) for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("message")]
    return "; ".join(messages) or f"phase {phase(document)}"
