"""A loopback OCI registry over TLS, enough of the OCI Distribution Specification (v1.1, "Pull" and "Push") for the
real ``helm push`` and ``helm pull`` of the kubectl layers to talk to it as they talk to ECR.

Endpoints: ``GET /v2/``; ``GET /v2/<name>/tags/list``; ``GET``/``HEAD`` ``/v2/<name>/manifests/<tag or digest>`` and
``/v2/<name>/blobs/<digest>``; ``POST /v2/<name>/blobs/uploads/``, ``PATCH`` and ``PUT <location>?digest=`` (a blob
upload); ``PUT /v2/<name>/manifests/<tag>``. A manifest's digest is the sha256 of the bytes pushed, as in every
registry (and as ECR reports ``imageDigest``); a blob whose bytes do not hash to its digest is refused.

The certificate is self-signed for 127.0.0.1; clients trust it through ``SSL_CERT_FILE`` (Go's crypto/x509 and
Python's ssl both read it), so the clients run without --plain-http or --insecure-skip-tls-verify, as in Lambda.
Helm 4 speaks TLS to it; Helm 3.17 speaks plain HTTP to any 127.0.0.1 or localhost registry (its resolver's rule for
local registries), so a connection whose first byte is no TLS handshake (0x16) is served in plain HTTP.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import re
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
NAME = r"(?P<name>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Registry:
    """What the registry holds; tests read ``manifests``/``tags`` and may overwrite a tag (a mutable registry)."""

    host: str = ""
    ca_file: Path | None = None
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[str, bytes] = field(default_factory=dict)  # digest -> manifest bytes
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # repository -> tag -> digest
    uploads: dict[str, bytearray] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def digest_of(self, repository: str, tag: str) -> str:
        return self.tags[repository][tag]


def _handler(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            registry.requests.append((self.command, self.path))

        def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                    content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, code: str) -> None:
            self._answer(status, json.dumps({"errors": [{"code": code, "message": code.lower()}]}).encode())

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0]
            if path in ("/v2/", "/v2"):
                return self._answer(200, b"{}")
            if match := re.fullmatch(rf"/v2/{NAME}/tags/list", path):
                tags = sorted(registry.tags.get(match["name"], {}))
                return self._answer(200, json.dumps({"name": match["name"], "tags": tags}).encode())
            if match := re.fullmatch(rf"/v2/{NAME}/manifests/(?P<ref>[^/]+)", path):
                digest = registry.tags.get(match["name"], {}).get(match["ref"], match["ref"])
                if digest not in registry.manifests:
                    return self._error(404, "MANIFEST_UNKNOWN")
                return self._answer(200, registry.manifests[digest], {"Docker-Content-Digest": digest}, MANIFEST_TYPE)
            if match := re.fullmatch(rf"/v2/{NAME}/blobs/(?P<digest>sha256:[0-9a-f]{{64}})", path):
                if match["digest"] not in registry.blobs:
                    return self._error(404, "BLOB_UNKNOWN")
                return self._answer(200, registry.blobs[match["digest"]], {"Docker-Content-Digest": match["digest"]},
                                    "application/octet-stream")
            return self._error(404, "NAME_UNKNOWN")

        do_HEAD = do_GET  # noqa: N815

        def do_POST(self) -> None:  # noqa: N802
            self._body()
            if match := re.fullmatch(rf"/v2/{NAME}/blobs/uploads/", self.path.split("?", 1)[0]):
                upload = uuid.uuid4().hex
                registry.uploads[upload] = bytearray()
                return self._answer(202, headers={"Location": f"/v2/{match['name']}/blobs/uploads/{upload}",
                                                  "Range": "0-0"})
            return self._error(404, "NAME_UNKNOWN")

        def do_PATCH(self) -> None:  # noqa: N802
            upload = self.path.split("?", 1)[0].rsplit("/", 1)[-1]
            if upload not in registry.uploads:
                return self._error(404, "BLOB_UPLOAD_UNKNOWN")
            registry.uploads[upload] += self._body()
            return self._answer(202, headers={"Location": self.path.split("?", 1)[0],
                                              "Range": f"0-{len(registry.uploads[upload]) - 1}"})

        def do_PUT(self) -> None:  # noqa: N802
            path, _, query = self.path.partition("?")
            body = self._body()
            if match := re.fullmatch(rf"/v2/{NAME}/blobs/uploads/(?P<upload>[0-9a-f]+)", path):
                data = bytes(registry.uploads.pop(match["upload"], bytearray()) + body)
                digest = dict(part.split("=", 1) for part in query.split("&") if "=" in part).get("digest", "")
                digest = digest.replace("%3A", ":")
                if sha256(data) != digest:
                    return self._error(400, "DIGEST_INVALID")
                registry.blobs[digest] = data
                return self._answer(201, headers={"Location": f"/v2/{match['name']}/blobs/{digest}",
                                                  "Docker-Content-Digest": digest})
            if match := re.fullmatch(rf"/v2/{NAME}/manifests/(?P<ref>[^/]+)", path):
                digest = sha256(body)
                with registry.lock:
                    registry.manifests[digest] = body
                    if not match["ref"].startswith("sha256:"):
                        registry.tags.setdefault(match["name"], {})[match["ref"]] = digest
                return self._answer(201, headers={"Location": f"/v2/{match['name']}/manifests/{digest}",
                                                  "Docker-Content-Digest": digest})
            return self._error(404, "NAME_UNKNOWN")

    return Handler


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (CA and server in one), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "registry.pem", directory / "registry.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class _TlsOrPlainServer(ThreadingHTTPServer):
    """TLS when the client's first byte starts a TLS handshake, plain HTTP otherwise (Helm 3.17 on 127.0.0.1)."""

    context: ssl.SSLContext

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        connection.settimeout(30)
        if connection.recv(1, socket.MSG_PEEK) == b"\x16":
            connection = self.context.wrap_socket(connection, server_side=True)
        return connection, address


@contextmanager
def oci_registry(directory: Path) -> Iterator[Registry]:
    """Serve a registry on 127.0.0.1 (port 0) over TLS until the block ends; ``host`` is ``127.0.0.1:<port>``."""
    registry = Registry()
    cert_file, key_file = self_signed_certificate(directory)
    server = _TlsOrPlainServer(("127.0.0.1", 0), _handler(registry))
    server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.context.load_cert_chain(cert_file, key_file)
    registry.host, registry.ca_file = f"127.0.0.1:{server.server_address[1]}", cert_file
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
