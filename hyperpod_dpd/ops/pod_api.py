"""Pod calls of ``hpdpd verify`` and its probe through the official ``kubernetes`` client: the raw documents of an
IEC's workers, create / get / delete of the probe's pods, logs, and exec.

Exec is the ``pods/exec`` subresource over WebSocket (``kubernetes.stream.stream`` with
``connect_get_namespaced_pod_exec``, channel protocol ``v4.channel.k8s.io``: 1 stdout, 2 stderr, 3 a ``Status``
whose ``NonZeroExitCode`` cause carries the exit code). The upgrade is a GET: API servers before 1.35 authorize it as
``get`` on ``pods/exec`` (kubernetes-client/python issue #2084), 1.35 and later also as ``create``
(``AuthorizePodWebsocketUpgradeCreatePermission``); the operations role needs both verbs. Every call raises
:class:`~hyperpod_dpd.ops.kube.KubeError` when it fails, naming the permission on a 403.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.catalogue.operator import DPD_ROLE_LABEL
from hyperpod_dpd.ops.kube import Kube, KubeError, describe_failure

# websocket-client's handshake failure text (websocket/_handshake.py: "Handshake status {status} {message} -+-+-
# {headers} -+-+- {body}"), which kubernetes.stream wraps in ApiException(status=0).
HANDSHAKE = re.compile(r"Handshake status (\d{3}) ([^-]*?)\s*-\+-\+-.*-\+-\+-\s*(.*)$", re.DOTALL)
HEAD_LOG_BYTES = 4 * 1024 * 1024  # the start of a worker's log, where NIXL and LMCache print their start-up lines


def _core(api: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api)


def _items(document: Any) -> list[dict[str, Any]]:
    return [i for i in (document.get("items") or []) if isinstance(i, dict)] if isinstance(document, dict) else []


def worker_documents(kube: Kube, *, namespace: str, iec: str) -> list[dict[str, Any]]:
    """The prefill and decode pods of one IEC as the API server returns them (spec and status in full)."""
    selector = f"{DPD_ROLE_LABEL} in (prefill,decode)"
    document = kube.call(f"list pods in namespace {namespace}", lambda api: _core(api).list_namespaced_pod(
        namespace, label_selector=selector, _preload_content=False, _request_timeout=kube.timeout),
        permission=f"list on pods in namespace {namespace}", expect="list")
    return [d for d in _items(document)
            if str((d.get("metadata") or {}).get("name", "")).startswith((f"prefill-{iec}-", f"decode-{iec}-"))]


def all_pods(kube: Kube) -> list[dict[str, Any]]:
    document = kube.call("list pods in all namespaces", lambda api: _core(api).list_pod_for_all_namespaces(
        _preload_content=False, _request_timeout=kube.timeout), permission="list on pods (all namespaces)",
        expect="list")
    return _items(document)


def create_pod(kube: Kube, manifest: Mapping[str, Any]) -> dict[str, Any]:
    namespace = str((manifest.get("metadata") or {}).get("namespace", "default"))
    name = str((manifest.get("metadata") or {}).get("name", ""))
    document = kube.call(f"create pod {namespace}/{name}", lambda api: _core(api).create_namespaced_pod(
        namespace, dict(manifest), _preload_content=False, _request_timeout=kube.timeout),
        permission=f"create on pods in namespace {namespace}")
    return document if isinstance(document, dict) else {}


def get_pod(kube: Kube, *, namespace: str, name: str) -> dict[str, Any]:
    document = kube.call(f"get pod {namespace}/{name}", lambda api: _core(api).read_namespaced_pod(
        name, namespace, _preload_content=False, _request_timeout=kube.timeout),
        permission=f"get on pods in namespace {namespace}")
    return document if isinstance(document, dict) else {}


def delete_pod(kube: Kube, *, namespace: str, name: str) -> bool:
    """Delete a pod at once (grace period 0); False when it was already gone."""
    from kubernetes import client

    try:
        kube.call(f"delete pod {namespace}/{name}", lambda api: _core(api).delete_namespaced_pod(
            name, namespace, body=client.V1DeleteOptions(grace_period_seconds=0), _preload_content=False,
            _request_timeout=kube.timeout), permission=f"delete on pods in namespace {namespace}")
    except KubeError as exc:
        if exc.not_found:
            return False
        raise
    return True


def read_log(kube: Kube, *, namespace: str, name: str, container: str | None = None,
             since_seconds: int | None = None, tail_lines: int | None = None, limit_bytes: int | None = None) -> str:
    """A container's log; ``limit_bytes`` alone reads its start (the API server counts from the first line)."""
    options: dict[str, Any] = {"_preload_content": False, "_request_timeout": kube.timeout}
    if container:
        options["container"] = container
    if since_seconds:
        options["since_seconds"] = max(1, int(since_seconds))
    if tail_lines:
        options["tail_lines"] = tail_lines
    if limit_bytes:
        options["limit_bytes"] = limit_bytes
    text = kube.call(f"read the log of pod {namespace}/{name}", lambda api: _core(api).read_namespaced_pod_log(
        name, namespace, **options), permission=f"get on pods/log in namespace {namespace}", expect="text")
    return text if isinstance(text, str) else ""


@dataclass(frozen=True, kw_only=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int | None  # None: the command did not finish within the timeout

    @property
    def output(self) -> str:
        return self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr


def exec_in_pod(kube: Kube, *, namespace: str, pod: str, container: str | None, command: Sequence[str],
                timeout_seconds: float = 30.0) -> ExecResult:
    """Run ``command`` in a running container and wait for it (up to ``timeout_seconds``)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    what = f"exec {' '.join(command)} in pod {namespace}/{pod}"
    permission = f"create on pods/exec in namespace {namespace}"

    def connect(api: Any) -> Any:
        import websocket

        options: dict[str, Any] = {"command": list(command), "stderr": True, "stdin": False, "stdout": True,
                                   "tty": False, "_preload_content": False}
        if container:
            options["container"] = container
        # kubernetes.stream opens the WebSocket without a timeout of its own (stream/ws_client.py create_websocket
        # passes none to WebSocket.connect), so websocket-client's default applies: none, unless set.
        previous = websocket.getdefaulttimeout()
        websocket.setdefaulttimeout(kube.timeout[1])
        try:
            return stream(_core(api).connect_get_namespaced_pod_exec, pod, namespace, **options)
        except ApiException as exc:
            raise _handshake_failure(exc, what, permission) from None
        finally:
            websocket.setdefaulttimeout(previous)

    client = kube.call(what, connect, permission=permission, raw=True)
    if kube.deadline is not None:
        timeout_seconds = max(0.05, min(timeout_seconds, kube.deadline.remaining()))  # 0 would mean forever
    try:
        client.run_forever(timeout=timeout_seconds)
        if client.is_open():
            return ExecResult(stdout=client.read_stdout() or "", stderr=client.read_stderr() or "", exit_code=None)
        stdout, stderr = client.read_stdout() or "", client.read_stderr() or ""
        try:
            code = client.returncode
        except (KeyError, IndexError, TypeError, ValueError):  # no Status on the error channel
            code = None
        return ExecResult(stdout=stdout, stderr=stderr, exit_code=code)
    finally:
        client.close()


def _handshake_failure(exc: Any, what: str, permission: str) -> BaseException:
    """The API server's answer to the upgrade (403, 404, ...) classified as a normal API error."""
    from kubernetes.client.exceptions import ApiException

    found = HANDSHAKE.search(str(exc.reason or ""))
    if not found or exc.status:
        return describe_failure(exc, what, permission=permission)
    rebuilt = ApiException(status=int(found.group(1)), reason=found.group(2).strip())
    rebuilt.body = found.group(3).strip()
    return describe_failure(rebuilt, what, permission=permission)
