"""A fault-injecting HTTP proxy on 127.0.0.1 (port 0), in front of moto's server or the fake Kubernetes API.

Clients are pointed at :attr:`FaultProxy.url` (``AWS_ENDPOINT_URL`` for boto3, the kubeconfig's ``server`` for the
``kubernetes`` client). Without a fault every request is forwarded to ``upstream`` and its answer is returned as it
came (status, headers, body). With a fault, each request the fault applies to (``when``, default every one) gets
instead:

- ``garbage``: the upstream's status and headers with a body of bytes that are neither UTF-8 nor any document;
- ``truncated``: the upstream's answer with the first half of its body, ``Content-Length`` saying so (a complete HTTP
  message carrying a cut document);
- ``cut``: the upstream's headers with the full ``Content-Length``, half the body, then the connection closed (a
  connection lost mid-body: the client sees fewer bytes than promised);
- ``html``: ``200 OK`` with an HTML page (what an authenticating proxy's login page looks like);
- ``403``, ``404``, ``409``, ``429``, ``500``: that status with an HTML body, as a proxy or load balancer in front of
  the service answers (not the service's own error document);
- ``reset``: the request is read, then the connection is reset (TCP RST, ``SO_LINGER`` 0) with no answer;
- ``stall``: the request is read and never answered (until the proxy stops);
- ``answer`` (a test's own): a fixed ``(status, content type, body)``, such as a service's real error document;
- ``reshape`` (a test's own): the upstream's answer with its body passed through a function (a field of the wrong
  type, a member removed).

Requests are recorded in :attr:`FaultProxy.requests` as ``(method, path, fault or None)``.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

STATUS_FAULTS = ("403", "404", "409", "429", "500")
FAULTS = ("garbage", "truncated", "cut", "html", *STATUS_FAULTS, "reset", "stall")
CUSTOM_FAULTS = ("answer", "reshape")
GARBAGE = bytes(range(0x80, 0x100)) * 4 + b"\x00\xff\xfe<\x01{"  # invalid UTF-8, no JSON, no XML
LOGIN_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><form action=\"/oauth2/start\">"
              b"<button>Sign in with your identity provider</button></form></body></html>\n")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                        "upgrade", "content-length"})


@dataclass
class FaultProxy:
    """The proxy's settings; tests change ``fault`` and ``when`` between runs (read per request)."""

    upstream: str
    fault: str | None = None
    when: Callable[[str, str], bool] | None = None  # (method, path) -> does the fault apply
    answer: tuple[int, str, bytes] | None = None  # the "answer" fault's (status, content type, body)
    reshape: Callable[[bytes], bytes] | None = None  # the "reshape" fault's body transform
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    url: str = ""
    stopped: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, fault: str | None, when: Callable[[str, str], bool] | None = None, *,
            answer: tuple[int, str, bytes] | None = None, reshape: Callable[[bytes], bytes] | None = None) -> None:
        if fault is not None and fault not in (*FAULTS, *CUSTOM_FAULTS):
            raise ValueError(f"unknown fault {fault!r}; one of {', '.join((*FAULTS, *CUSTOM_FAULTS))}")
        if (fault == "answer") != (answer is not None) or (fault == "reshape") != (reshape is not None):
            raise ValueError("'answer' takes answer=(status, content type, body), 'reshape' takes reshape=<function>")
        self.fault, self.when, self.answer, self.reshape = fault, when, answer, reshape

    def fault_for(self, method: str, path: str) -> str | None:
        fault, when = self.fault, self.when
        chosen = fault if fault and (when is None or when(method, path)) else None
        with self.lock:
            self.requests.append((method, path, chosen))
        return chosen


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"  # keep-alive, as the clients' connection pools expect

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = self.proxy.fault_for(self.command, self.path)
        if fault == "reset":
            self._reset()
            return
        if fault == "stall":
            self.proxy.stopped.wait(120)
            self.close_connection = True
            return
        if fault == "html":
            self._answer(200, [("Content-Type", "text/html; charset=utf-8")], LOGIN_PAGE)
            return
        if fault == "answer" and self.proxy.answer is not None:
            code, media, page = self.proxy.answer
            self._answer(code, [("Content-Type", media)], page)
            return
        if fault in STATUS_FAULTS:
            code = int(fault)
            page = (f"<html><head><title>{code} {http.client.responses.get(code, '')}</title></head><body><center>"
                    f"<h1>{code} {http.client.responses.get(code, '')}</h1></center><hr><center>proxy</center>"
                    "</body></html>\n").encode()
            self._answer(code, [("Content-Type", "text/html")], page)
            return
        status, headers, data = self._forward(body)
        if fault == "garbage":
            data = GARBAGE
        elif fault == "reshape" and self.proxy.reshape is not None:
            data = self.proxy.reshape(data)
        elif fault == "truncated":
            data = data[: len(data) // 2]
        elif fault == "cut":
            self._answer(status, headers, data[: len(data) // 2], declared=len(data) or 2)
            self.close_connection = True
            return
        self._answer(status, headers, data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _serve  # noqa: N815 - http.server's naming

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        target = urlparse(self.proxy.upstream)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if body or self.command in ("POST", "PUT", "PATCH"):
                headers["Content-Length"] = str(len(body))
            connection.request(self.command, self.path, body=body or None, headers=headers)
            response = connection.getresponse()
            data = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            return response.status, kept, data
        finally:
            connection.close()

    def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes, *, declared: int | None = None) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data) if declared is None else declared))
        self.end_headers()
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up
            self.close_connection = True

    def _reset(self) -> None:
        """Close with RST instead of FIN: ``SO_LINGER`` on with a zero timeout (socket(7))."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve(upstream: str) -> Iterator[FaultProxy]:
    """Run a :class:`FaultProxy` in front of ``upstream`` (``http://host:port``) until the block ends."""
    proxy = FaultProxy(upstream=upstream)
    handler = type("Handler", (_Handler,), {"proxy": proxy})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.stopped.set()
        server.shutdown()
        server.server_close()
