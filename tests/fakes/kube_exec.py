"""The exec subresource of the fake API server: the WebSocket channel protocol a real API server speaks.

``GET /api/v1/namespaces/<ns>/pods/<pod>/exec?command=...&container=...&stdout=true&stderr=true`` with
``Upgrade: websocket`` (what ``kubernetes.stream.stream(connect_get_namespaced_pod_exec, ...)`` sends) is answered
with ``101 Switching Protocols`` and subprotocol ``v4.channel.k8s.io`` (RFC 6455 handshake; Kubernetes
``staging/src/k8s.io/apimachinery/pkg/util/remotecommand/constants.go``), then one binary frame per channel whose
first byte is the channel (1 stdout, 2 stderr, 3 the error channel with a ``Status`` JSON: ``Success``, or
``Failure`` with reason ``NonZeroExitCode`` and the exit code as the ``ExitCode`` cause), then a close frame.

``fake.exec(namespace, pod, container, command)`` answers with ``(stdout, stderr, exit_code)``; a missing pod is the
API server's 404 before the upgrade, and no ``exec`` callback is a 403 as RBAC would refuse ``pods/exec``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
PROTOCOL = "v4.channel.k8s.io"


def _frame(payload: bytes, opcode: int = 0x2) -> bytes:
    header = bytes([0x80 | opcode])
    if len(payload) < 126:
        header += bytes([len(payload)])
    elif len(payload) < 1 << 16:
        header += bytes([126]) + struct.pack("!H", len(payload))
    else:
        header += bytes([127]) + struct.pack("!Q", len(payload))
    return header + payload


def exit_status(code: int) -> dict[str, Any]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def _reject(handler: Any, code: int, message: str) -> None:
    body = json.dumps(handler.fake.status(code, message)).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def serve_exec(handler: Any, path: str, query: dict[str, list[str]]) -> None:
    fake = handler.fake
    parts = path.strip("/").split("/")
    with fake.lock:
        fake.requests.append(("EXEC", path, query))
    if not (len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods"
            and parts[6] in ("exec", "attach")):
        _reject(handler, 404, f"the server could not find the requested resource ({path})")
        return
    namespace, pod = parts[3], parts[5]
    fault = next((f for p, f in fake.faults.items() if path.startswith(p) and "GET" in f.methods), None)
    if fault and fault.status:
        _reject(handler, fault.status, fault.message or f"injected {fault.status}")
        return
    if not any(p["metadata"]["name"] == pod and p["metadata"]["namespace"] == namespace for p in fake.pods):
        _reject(handler, 404, f'pods "{pod}" not found')
        return
    if fake.exec is None:
        _reject(handler, 403, f'pods "{pod}" is forbidden: cannot create resource "pods/exec"')
        return
    container = (query.get("container") or [""])[-1]
    command = query.get("command") or []
    stdout, stderr, code = fake.exec(namespace, pod, container, command)
    key = handler.headers.get("Sec-WebSocket-Key", "")
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()  # noqa: S324 - RFC 6455
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", PROTOCOL)
    handler.end_headers()
    out = b""
    if stdout:
        out += _frame(b"\x01" + stdout.encode())
    if stderr:
        out += _frame(b"\x02" + stderr.encode())
    out += _frame(b"\x03" + json.dumps(exit_status(code)).encode())
    out += _frame(struct.pack("!H", 1000), opcode=0x8)
    try:
        handler.wfile.write(out)
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass
    handler.close_connection = True
