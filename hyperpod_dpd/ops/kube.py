"""The Kubernetes API, through the official ``kubernetes`` client: no kubectl binary is needed.

Two ways to reach a cluster, as the ecosystem does it:

- a kubeconfig (``--kubeconfig`` or ``KUBECONFIG``), loaded by ``kubernetes.config`` (exec credential plugins such as
  ``aws eks get-token`` keep working);
- EKS authentication from boto3 (:mod:`hyperpod_dpd.ops.eks_auth`): the API server and its CA from
  ``eks:DescribeCluster`` and a presigned-STS bearer token, minted again before it expires.

Every failure is classified as :mod:`hyperpod_dpd.ops.lookup` classifies AWS reads: only the API server's own 404 (a
``Status`` with reason ``NotFound``, :mod:`hyperpod_dpd.ops.kube_answers`) is *not found*; anything else is *unknown*
with a one-line reason and a cause (``access_denied`` for RBAC 403, naming the verb and resource needed;
``unreachable``, ``timeout``, ``throttled``, ``server_error``; ``credentials_rejected`` for 401; ``malformed`` for an
answer that is not the API server's, a 2xx that is not the JSON asked for or a 404 that is not its ``Status``;
``error`` for the rest; ``not_configured`` when no way to reach the cluster was given). ``credentials_rejected`` and
``malformed`` are :data:`FATAL_CAUSES`: no other read of the command can be trusted after them.

Every request is bounded: its connect and read timeouts are ``timeout_seconds`` or the time the command's deadline
has left, whichever is shorter (``_request_timeout``), and urllib3's own retries are off (:data:`NO_RETRIES`: its
default ``Retry(3)`` makes four attempts of a read that times out, kubernetes ``client/rest.py`` passes
``configuration.retries`` to the pool manager); the callers' own loops retry what is transient.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.catalogue.operator_api import IEC_GROUP, IEC_PLURAL, IEC_RESOURCE, IEC_VERSION
from hyperpod_dpd.ops.kube_answers import MALFORMED, Expect, answer_problem, api_status, check_kubeconfig, content_type
from hyperpod_dpd.ops.lookup import TRANSIENT_CAUSES

READY_STATE = "DeploymentComplete"
FAILED_STATES = frozenset({"DeploymentFailed", "DeletionFailed"})
GONE_STATES = frozenset({"DeletionPending", "DeletionInProgress", "DeletionComplete"})
NO_KUBECONFIG = "unknown (no kubeconfig)"
NOT_FOUND = "NotFound"
NOT_CONFIGURED = "not_configured"
CREDENTIALS_REJECTED = "credentials_rejected"
API_CAUSES = {401: CREDENTIALS_REJECTED, 403: "access_denied", 408: "timeout", 429: "throttled", 504: "timeout"}
FATAL_CAUSES = frozenset({MALFORMED, CREDENTIALS_REJECTED})
CONNECT_TIMEOUT_SECONDS = 10.0


class KubeError(Exception):
    """A Kubernetes API call that did not succeed: ``not_found`` only on the API server's 404."""

    def __init__(self, reason: str, cause: str, *, not_found: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.cause, self.not_found = reason, cause, not_found

    @property
    def transient(self) -> bool:
        return self.cause in TRANSIENT_CAUSES

    @property
    def fatal(self) -> bool:
        """No other call of the command can be trusted after this one (see :data:`FATAL_CAUSES`)."""
        return self.cause in FATAL_CAUSES


class ClusterNotFound(KubeError):
    """EKS authentication found no such cluster: there is nothing to read yet (the first deploy creates it)."""


def describe_failure(exc: BaseException, what: str, *, permission: str | None = None) -> KubeError:
    """Classify an exception of the ``kubernetes`` client (or of urllib3 beneath it) as a :class:`KubeError`."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3 import exceptions as u3

    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        message = _api_message(exc)
        reason = f"{what}: {status} {exc.reason or ''}".rstrip() + (f": {message}" if message else "")
        if status == 404:
            if api_status(exc.body) is None:  # not the API server's NotFound: never read as "not there"
                return KubeError(f"{what}: 404 that is not the Kubernetes API server's (no Status in its body): "
                                 "a proxy or the wrong server in the kubeconfig", MALFORMED)
            return KubeError(reason, "error", not_found=True)
        cause = API_CAUSES.get(status) or ("server_error" if status >= 500 else "error")
        if cause == "access_denied" and permission:
            reason += f"; needs {permission}"
        elif status == 401:
            reason += " (the API server refused the credentials; on EKS the caller needs an access entry)"
        return KubeError(reason, cause)
    if isinstance(exc, ConfigException):
        return KubeError(f"{what}: kubeconfig: {' '.join(str(exc).split())}", "error")
    inner = exc.reason if isinstance(exc, u3.MaxRetryError) and exc.reason is not None else exc
    text = " ".join(f"{type(inner).__name__}: {inner}".split())
    if isinstance(inner, u3.NewConnectionError):  # a ConnectTimeoutError subclass in urllib3 2, but a refusal
        return KubeError(f"{what}: cannot reach the Kubernetes API server ({text})", "unreachable")
    if isinstance(inner, (u3.TimeoutError, socket.timeout, TimeoutError)):
        return KubeError(f"{what}: timed out ({text})", "timeout")
    if isinstance(inner, (u3.HTTPError, ConnectionError, OSError)):
        return KubeError(f"{what}: cannot reach the Kubernetes API server ({text})", "unreachable")
    return KubeError(f"{what}: {text}", "error")


def _api_message(exc: Any) -> str:
    body = api_status(exc.body)
    return " ".join(str(body.get("message") or "").split())[:300] if body else ""


def _ca_file(pem: bytes) -> str:
    """The cluster CA as a file (the client wants a path); removed when the process exits."""
    handle, path = tempfile.mkstemp(prefix="hpdpd-ca-", suffix=".pem")
    with os.fdopen(handle, "wb") as out:
        out.write(pem)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


@dataclass(frozen=True, kw_only=True)
class EksAccess:
    """EKS authentication for ``cluster_name`` with the command's AWS clients (a ClientFactory)."""

    clients: Any
    cluster_name: str
    region: str

    def api_client(self) -> Any:
        from kubernetes import client

        from hyperpod_dpd.aws import call_errors, stops_command
        from hyperpod_dpd.ops.eks_auth import DESCRIBE_PERMISSION, TokenSource, describe_endpoint, sts_client
        from hyperpod_dpd.ops.lookup import Lookup, from_aws_error

        try:
            endpoint = describe_endpoint(self.clients.client("eks"), self.cluster_name)
            tokens = TokenSource(sts_client(self.clients, self.region), self.cluster_name)
            tokens.token()
        except call_errors() as exc:
            if stops_command(exc):
                raise
            read: Lookup[Any] = from_aws_error(exc, permission=DESCRIBE_PERMISSION)
            if read.absent:
                raise ClusterNotFound(f"EKS cluster {self.cluster_name} not found", "error", not_found=True) from None
            raise KubeError(read.reason, read.cause or "error") from None
        if not endpoint.host:  # DescribeCluster names none while the cluster is CREATING
            raise KubeError(f"EKS cluster {self.cluster_name} has no API server endpoint yet (DescribeCluster)",
                            "error")
        config = client.Configuration()
        config.host = endpoint.host
        if endpoint.ca_pem:
            config.ssl_ca_cert = _ca_file(endpoint.ca_pem)
        config.api_key_prefix = {"authorization": "Bearer"}
        config.api_key = {"authorization": tokens.token()}
        config.refresh_api_key_hook = lambda c: c.api_key.update(authorization=tokens.token())
        config.retries = no_retries()
        return client.ApiClient(config)


@dataclass(frozen=True, kw_only=True)
class IecStatus:
    """``status.state`` of an IEC (or why it is unknown) and the message of its first condition.

    When ``known`` is false, ``reason`` says why in one line and ``cause`` classifies it.
    """

    state: str
    message: str = ""
    known: bool = True
    reason: str = ""
    cause: str | None = None

    @property
    def attempted(self) -> bool:
        """The cluster was asked (or meant to be): false only when there was no way to reach it."""
        return self.cause != NOT_CONFIGURED

    @property
    def transient(self) -> bool:
        return not self.known and self.cause in TRANSIENT_CAUSES

    @property
    def ready(self) -> bool:
        return self.state == READY_STATE

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES or self.state in GONE_STATES


def no_retries() -> Any:
    """urllib3's ``Retry(total=0)``: every attempt is the caller's, within its deadline (urllib3 ``util/retry.py``)."""
    from urllib3.util.retry import Retry

    return Retry(total=0, redirect=0)


@dataclass(frozen=True, kw_only=True)
class Kube:
    """How to reach the cluster: a kubeconfig (None: ``KUBECONFIG``), or EKS authentication; one API client.

    ``timeout_seconds`` bounds each request; ``deadline`` (the command's, :class:`~hyperpod_dpd.ops.deadline.Deadline`)
    bounds them all: a request gets what is left of it, and none starts once it has passed."""

    kubeconfig: str | None = None
    eks: EksAccess | None = None
    timeout_seconds: float = 30.0
    deadline: Any = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_environment(cls, kubeconfig: str | None, *, eks: EksAccess | None = None,
                         timeout_seconds: float = 30.0, deadline: Any = None) -> Kube:
        """A kubeconfig when one is given (argument or ``KUBECONFIG``), else ``eks`` when given."""
        chosen = kubeconfig or os.environ.get("KUBECONFIG") or None
        return cls(kubeconfig=chosen, eks=None if chosen else eks, timeout_seconds=timeout_seconds,
                   deadline=deadline)

    def unavailable(self) -> str | None:
        """Why the cluster cannot be asked at all, or None."""
        if not (self.kubeconfig or os.environ.get("KUBECONFIG") or self.eks):
            return NO_KUBECONFIG
        return None

    def api_client(self) -> Any:
        """The ``kubernetes.client.ApiClient`` (made once); :class:`KubeError` when it cannot be made."""
        if "api" not in self._cache:
            if self.unavailable():
                raise KubeError("no kubeconfig", NOT_CONFIGURED)
            try:
                if self.eks is not None and not (self.kubeconfig or os.environ.get("KUBECONFIG")):
                    self._cache["api"] = self.eks.api_client()
                else:
                    self._cache["api"] = self._from_kubeconfig(self.kubeconfig or os.environ.get("KUBECONFIG") or "")
            except Exception as exc:
                if isinstance(exc, KubeError) or type(exc).__module__.startswith("kubernetes"):
                    raise describe_failure(exc, "connect") from None
                raise
        return self._cache["api"]

    @staticmethod
    def _from_kubeconfig(paths: str) -> Any:
        """The client of a kubeconfig, as ``kubernetes.config.new_client_from_config`` makes it, with urllib3's retries
        off; a file the loader would crash on is one line first (:func:`~hyperpod_dpd.ops.kube_answers.check_kubeconfig`)."""
        from kubernetes import client, config

        check_kubeconfig(paths)
        configuration = type.__call__(client.Configuration)  # a fresh one, not a copy of the process-wide default
        configuration.retries = no_retries()
        return config.new_client_from_config(config_file=paths, client_configuration=configuration)

    def call(self, what: str, request: Callable[[Any], Any], *, permission: str | None = None, raw: bool = False,
             expect: Expect = "object") -> Any:
        """Run ``request(api_client)`` (a call made with ``_preload_content=False``) and decode its body as ``expect``
        says: a Kubernetes object, a list of them, or a log's text (``raw``: return the unread response, for
        streaming). An answer of another kind is a :class:`KubeError` (cause ``malformed``) naming the API server."""
        if self.deadline is not None:
            self.deadline.bound(self.timeout_seconds, what=what)  # OutOfTime once the command's time is up
        api = self.api_client()
        try:
            response = request(api)
            if raw:
                return response
            data = response.data if hasattr(response, "data") else response
        except Exception as exc:
            if _is_client_failure(exc):
                raise describe_failure(exc, what, permission=permission) from None
            raise
        if not isinstance(data, bytes | bytearray):
            return data  # already decoded (a test's stand-in for the client)
        document, problem = answer_problem(bytes(data), expect=expect, media=content_type(response))
        if problem:
            server = getattr(getattr(api, "configuration", None), "host", None) or "the Kubernetes API server"
            raise KubeError(f"{what}: the answer of {server} is not the Kubernetes API's ({problem}): a proxy or "
                            "the wrong server in the kubeconfig", MALFORMED)
        return document

    @property
    def timeout(self) -> tuple[float, float]:
        """``_request_timeout`` (connect, read) of the next request: ``timeout_seconds`` within the deadline."""
        return self.request_timeout(self.timeout_seconds)

    def request_timeout(self, seconds: float) -> tuple[float, float]:
        """(connect, read) timeouts of a request that may take ``seconds``, within the deadline."""
        if self.deadline is not None:
            seconds = max(0.05, min(seconds, self.deadline.remaining()))
        return (min(CONNECT_TIMEOUT_SECONDS, seconds), seconds)

    def iec_status(self, *, name: str, namespace: str) -> IecStatus:
        reason = self.unavailable()
        if reason:
            return IecStatus(state=reason, known=False, reason=_inner(reason), cause=NOT_CONFIGURED)
        try:
            document = get_iec(self, name=name, namespace=namespace)
        except KubeError as exc:
            if exc.not_found:
                return IecStatus(state=NOT_FOUND, message=exc.reason)
            return IecStatus(state=f"unknown ({exc.reason})", known=False, reason=exc.reason, cause=exc.cause)
        return parse_iec(document)


def wait_for_iec(kube: Kube, *, name: str, namespace: str, seconds: float, interval: float,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> IecStatus:
    """Poll an IEC until it is ready or failed, a read fails for a reason waiting cannot fix, or ``seconds`` pass
    (transient reads keep polling); the last status tells which."""
    deadline = clock() + seconds
    while True:
        status = kube.iec_status(name=name, namespace=namespace)
        if status.ready or status.failed or (not status.known and not status.transient):
            return status
        if clock() + interval > deadline:
            return status
        sleep(interval)


def _is_client_failure(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith(("kubernetes", "urllib3")) or isinstance(exc, (OSError, TimeoutError))


def _inner(state: str) -> str:
    """``no kubeconfig`` of ``unknown (no kubeconfig)``."""
    return state.removeprefix("unknown (").removesuffix(")")


def iec_path(namespace: str, name: str = "") -> str:
    return f"/apis/{IEC_GROUP}/{IEC_VERSION}/namespaces/{namespace}/{IEC_PLURAL}" + (f"/{name}" if name else "")


def get_iec(kube: Kube, *, name: str, namespace: str) -> dict[str, Any]:
    from kubernetes import client

    document = kube.call(f"GET {iec_path(namespace, name)}", lambda api: client.CustomObjectsApi(api)
                         .get_namespaced_custom_object(IEC_GROUP, IEC_VERSION, namespace, IEC_PLURAL, name,
                                                       _preload_content=False, _request_timeout=kube.timeout),
                         permission=f"get on {IEC_RESOURCE} in namespace {namespace}")
    return document if isinstance(document, dict) else {}


def parse_iec(document: dict[str, Any] | str) -> IecStatus:
    """The state and first condition message of an IEC document (JSON text or decoded)."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError:
            return IecStatus(state="unknown (the API server sent no JSON)", known=False,
                             reason="the API server sent no JSON", cause=MALFORMED)
    if not isinstance(document, dict):
        return IecStatus(state="unknown (the API server sent no JSON object)", known=False,
                         reason="the API server sent no JSON object", cause=MALFORMED)
    status = document.get("status") or {}
    conditions = status.get("conditions") or [] if isinstance(status, dict) else None
    if not isinstance(conditions, list) or not isinstance(status.get("state") or "", str):
        return IecStatus(state="unknown (the IEC's status is not an InferenceEndpointConfig status)", known=False,
                         reason="the IEC's status is not an InferenceEndpointConfig status", cause=MALFORMED)
    message = ""
    if conditions and isinstance(conditions[0], dict):
        message = " ".join(str(conditions[0].get("message", "")).split())
    state = str(status.get("state") or "DeploymentPending")
    # A status the operator wrote for an older spec says nothing about this one: metadata.generation grows with every
    # spec change, status.observedGeneration is the "Latest generation reconciled by controller" (the CRD's status
    # schema). Until it catches up (an in-place patch of replicas, args or images) the state is neither ready nor failed.
    generation = (document.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        state = f"{state} (not reconciled: status.observedGeneration {observed} < metadata.generation {generation})"
    return IecStatus(state=state, message=message)
