"""A small Kubernetes API server for the tests: threaded HTTP on 127.0.0.1, port 0, in-memory objects.

It answers the calls the toolkit makes as a real API server would (paths, list shapes, ``Status`` errors): pods
(namespaced and all namespaces, with label selectors ``k=v`` and ``k in (a,b)``), nodes, events (``type=Warning``),
Services (GET and merge PATCH), pod logs (``container``, ``sinceSeconds``, ``tailLines``) and the
``InferenceEndpointConfig`` custom resources (get, list by label, create, delete). Faults are injected per path prefix
(an HTTP status with the API server's ``Status`` body, or a delay longer than the client's timeout), and every request
is recorded. Objects are answered with their ``metadata`` (name and namespace filled in when a test seeded an object
without them), as every object the API server returns has one; answers that are not the API server's (HTML pages, cut
bodies, resets) come from :mod:`tests.fakes.fault_proxy` in front of it.

Pods can also be created, read one by one and deleted (``on_pod_created`` lets a test play the kubelet), and every
other resource path (``/api/v1/namespaces/<ns>/<plural>[/<name>]``, ``/apis/<group>/<version>/[namespaces/<ns>/]
<plural>[/<name>]``: Ingresses, NetworkPolicies, ResourceSlices, ...) is a generic in-memory collection in
``objects`` with get, list (label selector), create (409 when it exists), merge PATCH, PUT and DELETE. Every write
sets ``metadata.resourceVersion``; a PATCH or PUT whose body carries a different ``metadata.resourceVersion`` is
refused with 409 Conflict, as the API server's optimistic concurrency does. ``pods/<name>/exec`` speaks the
WebSocket channel protocol (``v4.channel.k8s.io``) through :mod:`tests.fakes.kube_exec` when ``exec`` is set.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

IEC_PREFIX = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/"
STATUS_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists",
                  429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in re.split(r",(?![^(]*\))", selector or ""))):
        found = re.fullmatch(r"(\S+)\s+in\s+\(([^)]*)\)", term)
        if found:
            if labels.get(found.group(1)) not in {v.strip() for v in found.group(2).split(",")}:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif value is None:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class Fault:
    status: int = 0
    message: str = ""
    delay: float = 0.0
    methods: tuple[str, ...] = ("GET", "POST", "PATCH", "PUT", "DELETE")


@dataclass
class FakeKube:
    """The cluster's objects; tests edit them directly (the server reads them under a lock)."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    services: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    iecs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    logs: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (namespace, pod, container) -> text
    faults: dict[str, Fault] = field(default_factory=dict)  # path prefix -> fault
    requests: list[tuple[str, str, Any]] = field(default_factory=list)  # (method, path with query, body)
    on_iec_created: Any = None  # callback(fake, document): e.g. make the new IEC's pods appear
    proxy: Any = None  # callback(namespace, "scheme:service:port", path, body) -> the proxied reply (service proxy)
    on_pod_created: Any = None  # callback(fake, pod document) after a POST of a pod: e.g. run it to completion
    exec: Any = None  # callback(namespace, pod, container, command list) -> (stdout, stderr, exit code) or a Status dict
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # collection path -> name -> object
    resource_version: int = 0
    authorizations: list[str] = field(default_factory=list)  # the Authorization header of each request
    lock: threading.RLock = field(default_factory=threading.RLock)
    url: str = ""

    # -- helpers for tests -----------------------------------------------------------------------------------------

    def fail(self, prefix: str, status: int = 0, message: str = "", *, delay: float = 0.0,
             methods: tuple[str, ...] = ("GET", "POST", "PATCH", "DELETE")) -> None:
        self.faults[prefix] = Fault(status=status, message=message, delay=delay, methods=methods)

    def calls(self, method: str) -> list[str]:
        return [path for m, path, _ in self.requests if m == method]

    def kubeconfig(self, path: Any, token: str = "test-token") -> str:
        """A kubeconfig that points at this server with a static bearer token."""
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
        return str(path)

    # -- the API ------------------------------------------------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((method, path + ("?" + "&".join(f"{k}={v}" for k, v in query.items())
                                                  if query else ""), body))
        fault = next((f for p, f in self.faults.items() if path.startswith(p) and method in f.methods), None)
        if fault and fault.delay:
            time.sleep(fault.delay)
        if fault and fault.status:
            return fault.status, self.status(fault.status, fault.message or f"injected {fault.status}")
        with self.lock:
            return self._route(method, path, query, body)

    @staticmethod
    def status(code: int, message: str) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                "reason": STATUS_REASONS.get(code, "Unknown"), "code": code}

    def _next_version(self, document: dict[str, Any]) -> None:
        self.resource_version += 1
        document.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)

    def _conflict(self, current: dict[str, Any], body: Any, what: str) -> tuple[int, Any] | None:
        """409 when the write names a resourceVersion other than the object's (optimistic concurrency)."""
        wanted = ((body or {}).get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        have = (current.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and str(wanted) != str(have):
            return 409, self.status(409, f'Operation cannot be fulfilled on {what}: the object has been modified; '
                                         "please apply your changes to the latest version and try again") | {
                "reason": "Conflict"}
        return None

    def put(self, collection: str, document: dict[str, Any]) -> dict[str, Any]:
        """Store ``document`` in the generic collection at ``collection`` (tests seed objects with it)."""
        with self.lock:
            stored = copy.deepcopy(document)
            self._next_version(stored)
            self.objects.setdefault(collection.rstrip("/"), {})[stored["metadata"]["name"]] = stored
            return stored

    def get(self, collection: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(collection.rstrip("/"), {}).get(name)

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        selector = query.get("labelSelector", "")
        parts = path.strip("/").split("/")
        if path == "/api/v1/nodes":
            return 200, {"kind": "NodeList", "items": self.nodes}
        if path == "/api/v1/pods":
            return 200, {"kind": "PodList", "items": [p for p in self.pods if _matches(
                p["metadata"].get("labels", {}), selector)]}
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5:
            namespace, kind = parts[3], parts[4]
            if kind == "pods" and len(parts) == 5 and method == "POST":
                return self._create_pod(namespace, body)
            if kind == "pods" and len(parts) == 5:
                return 200, {"kind": "PodList", "items": [p for p in self.pods if p["metadata"]["namespace"] == namespace
                                                          and _matches(p["metadata"].get("labels", {}), selector)]}
            if kind == "pods" and len(parts) == 6:
                return self._pod(method, namespace, parts[5])
            if kind == "pods" and len(parts) == 7 and parts[6] == "log":
                return self._log(namespace, parts[5], query)
            if kind == "events":
                wanted = query.get("fieldSelector", "").removeprefix("type=")
                return 200, {"kind": "EventList", "items": [e for e in self.events if e.get("metadata", {}).get(
                    "namespace", namespace) == namespace and (not wanted or e.get("type") == wanted)]}
            if kind == "services" and len(parts) == 6:
                service = self.services.get((namespace, parts[5]))
                if service is None:
                    return 404, self.status(404, f'services "{parts[5]}" not found')
                service.setdefault("metadata", {}).setdefault("name", parts[5])
                if "resourceVersion" not in service.setdefault("metadata", {}):  # seeded ones too, as stored objects
                    self._next_version(service)
                if method == "PATCH":
                    conflict = self._conflict(service, body, f'services "{parts[5]}"')
                    if conflict:
                        return conflict
                    patch = copy.deepcopy(body or {})
                    (patch.get("metadata") or {}).pop("resourceVersion", None)
                    _merge(service, patch)
                    self._next_version(service)
                return 200, service
        if path == IEC_PREFIX.removesuffix("namespaces/") + "inferenceendpointconfigs":  # every namespace
            return 200, {"kind": "InferenceEndpointConfigList", "items": [
                d for d in self.iecs.values() if _matches(d.get("metadata", {}).get("labels", {}), selector)]}
        if path.startswith(IEC_PREFIX):
            return self._iec(method, parts, selector, body)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 7 and parts[4] == "services" \
                and parts[6] == "proxy" and method == "POST":  # /api/v1/namespaces/<ns>/services/<s:n:p>/proxy/<path>
            if self.proxy is None:
                return 503, self.status(503, f"no endpoints available for service {parts[5]}")
            return 200, self.proxy(parts[3], parts[5], "/".join(parts[7:]), body)
        return self._generic(method, parts, selector, body, path)

    def _create_pod(self, namespace: str, body: Any) -> tuple[int, Any]:
        name = body["metadata"]["name"]
        if any(p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace for p in self.pods):
            return 409, self.status(409, f'pods "{name}" already exists') | {"reason": "AlreadyExists"}
        document = copy.deepcopy(body)
        document["metadata"]["namespace"] = namespace
        document["metadata"].setdefault("uid", f"uid-{name}")
        document.setdefault("status", {"phase": "Pending"})
        self._next_version(document)
        self.pods.append(document)
        if self.on_pod_created:
            self.on_pod_created(self, document)
        return 201, document

    def _pod(self, method: str, namespace: str, name: str) -> tuple[int, Any]:
        found = next((p for p in self.pods if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace),
                     None)
        if found is None:
            return 404, self.status(404, f'pods "{name}" not found')
        if method == "DELETE":
            self.pods.remove(found)
            return 200, found
        return 200, found

    def _generic(self, method: str, parts: list[str], selector: str, body: Any, path: str) -> tuple[int, Any]:
        """Any other resource: ``api/v1/[namespaces/<ns>/]<plural>[/<name>]`` or the ``apis/<g>/<v>/...`` form."""
        base = 2 if parts[:1] == ["api"] else 3 if parts[:1] == ["apis"] else 0
        rest = parts[base:]
        if not base or not rest:
            return 404, self.status(404, f"the server could not find the requested resource ({path})")
        scope = rest[:2] if rest[0] == "namespaces" and len(rest) >= 3 else []
        tail = rest[len(scope):]
        if len(tail) not in (1, 2):
            return 404, self.status(404, f"the server could not find the requested resource ({path})")
        collection = "/" + "/".join(parts[:base] + scope + tail[:1])
        items = self.objects.setdefault(collection, {})
        plural = tail[0]
        if len(tail) == 1:
            if method == "POST":
                name = (body or {}).get("metadata", {}).get("name", "")
                if name in items:
                    return 409, self.status(409, f'{plural} "{name}" already exists') | {"reason": "AlreadyExists"}
                document = copy.deepcopy(body)
                if scope:
                    document["metadata"]["namespace"] = scope[1]
                self._next_version(document)
                items[name] = document
                return 201, document
            listed = [d for d in items.values() if _matches((d.get("metadata") or {}).get("labels") or {}, selector)]
            return 200, {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.resource_version)},
                         "items": listed}
        name = tail[1]
        document = items.get(name)
        if document is None:
            return 404, self.status(404, f'{plural} "{name}" not found')
        if method == "DELETE":
            del items[name]
            return 200, self.status(200, "deleted") | {"status": "Success"}
        if method in ("PATCH", "PUT"):
            conflict = self._conflict(document, body, f'{plural} "{name}"')
            if conflict:
                return conflict
            if method == "PUT":
                document = copy.deepcopy(body)
                items[name] = document
            else:
                patch = copy.deepcopy(body or {})
                (patch.get("metadata") or {}).pop("resourceVersion", None)
                _merge(document, patch)
            self._next_version(document)
        return 200, document

    def _log(self, namespace: str, pod: str, query: dict[str, str]) -> tuple[int, Any]:
        if not any(p["metadata"]["name"] == pod and p["metadata"]["namespace"] == namespace for p in self.pods):
            return 404, self.status(404, f'pods "{pod}" not found')
        text = self.logs.get((namespace, pod, query.get("container", "")), "")
        if "tailLines" in query:
            text = "\n".join(text.splitlines()[-int(query["tailLines"]):])
        return 200, text

    def _iec(self, method: str, parts: list[str], selector: str, body: Any) -> tuple[int, Any]:
        namespace = parts[4]
        if len(parts) == 6:
            if method == "POST":
                name = body["metadata"]["name"]
                if (namespace, name) in self.iecs:
                    return 409, self.status(409, f'inferenceendpointconfigs "{name}" already exists')
                document = copy.deepcopy(body)
                document.setdefault("metadata", {})["creationTimestamp"] = f"2026-01-01T00:{len(self.iecs):02d}:00Z"
                document.setdefault("status", {"state": "DeploymentInProgress"})
                self.iecs[(namespace, name)] = document
                if self.on_iec_created:
                    self.on_iec_created(self, document)
                return 201, document
            items = [d for (ns, _), d in self.iecs.items() if ns == namespace
                     and _matches(d.get("metadata", {}).get("labels", {}), selector)]
            return 200, {"kind": "InferenceEndpointConfigList", "items": items}
        name = parts[6]
        document = self.iecs.get((namespace, name))
        if document is None:
            return 404, self.status(404, f'inferenceendpointconfigs.inference.sagemaker.aws.amazon.com "{name}" not found')
        meta = document.setdefault("metadata", {})  # a real API server always answers an object with its metadata
        meta.setdefault("name", name)
        meta.setdefault("namespace", namespace)
        if method == "DELETE":
            del self.iecs[(namespace, name)]
            self.pods = [p for p in self.pods if not p["metadata"]["name"].startswith(
                (f"prefill-{name}-", f"decode-{name}-", f"{name}-{namespace}-router"))]
            return 200, self.status(200, "deleted") | {"status": "Success"}
        return 200, document


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKube

    def _serve(self) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if self.headers.get("Upgrade", "").lower() == "websocket":
            from tests.fakes.kube_exec import serve_exec

            serve_exec(self, url.path, parse_qs(url.query))
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.fake.authorizations.append(self.headers.get("Authorization", ""))
        code, payload = self.fake.answer(self.command, url.path, query, body)
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve  # noqa: N815 - http.server's naming

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve(fake: FakeKube | None = None) -> Iterator[FakeKube]:
    """Run a :class:`FakeKube` on 127.0.0.1 (a free port) until the block ends."""
    fake = fake or FakeKube()
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


# ---- objects as the API server returns them ------------------------------------------------------------------------


def node(name: str, *, zone: str = "us-west-2a", gpus: int = 8, efa: int = 32, role: str = "prefill",
         group: str | None = None, instance_type: str = "ml.p5.48xlarge") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {
        "topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": instance_type,
        "hyperpod-dpd/role": role, "hyperpod-dpd/instance-group": group or role}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "vpc.amazonaws.com/efa": str(efa), "cpu": "192"}}}


def pod(name: str, *, namespace: str, node_name: str | None, role: str | None = None, gpus: int = 8, efa: int = 32,
        phase: str = "Running", ready: bool = True, env: dict[str, str] | None = None,
        container: str | None = None) -> dict[str, Any]:
    resources = {"nvidia.com/gpu": str(gpus), **({"vpc.amazonaws.com/efa": str(efa)} if efa else {})}
    labels = {"inference.sagemaker.aws.amazon.com/dpd-role": role} if role else {}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"nodeName": node_name, "containers": [
                {"name": container or name.rsplit("-", 2)[0], "resources": {"requests": resources, "limits": resources},
                 "env": [{"name": k, "value": v} for k, v in (env or {}).items()]},
                {"name": "nginx", "resources": {}}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "c", "ready": ready, "state": {"running": {}}}]}}
