"""``InferenceEndpointConfig`` status through ``kubectl`` (no Kubernetes client library is a dependency).

kubectl runs only when a kubeconfig is given (``--kubeconfig`` or ``KUBECONFIG``) and ``kubectl`` is on PATH;
otherwise the state is reported as unknown rather than guessed. Only the API server's own ``NotFound`` answer means
the IEC does not exist; any other kubectl failure leaves the state unknown, with the reason and a cause
(``access_denied``, ``unreachable``, ``timeout``, ``throttled``, ``server_error``, ``error``, or ``not_configured``
when kubectl was not run at all), as :mod:`hyperpod_dpd.ops.lookup` classifies AWS reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from hyperpod_dpd.ops.lookup import TRANSIENT_CAUSES

IEC_RESOURCE = "inferenceendpointconfig"
IEC_PERMISSION = "get on inferenceendpointconfigs.inference.sagemaker.aws.amazon.com"
READY_STATE = "DeploymentComplete"
FAILED_STATES = frozenset({"DeploymentFailed", "DeletionFailed"})
GONE_STATES = frozenset({"DeletionPending", "DeletionInProgress", "DeletionComplete"})
NO_KUBECONFIG = "unknown (no kubeconfig)"
NOT_FOUND = "NotFound"
NOT_CONFIGURED = "not_configured"
# kubectl's stderr markers, most specific first: (marker, cause). ``Error from server (<Reason>)`` carries the API
# server's status reason; the rest are client-side failures.
KUBECTL_CAUSES = (
    ("getting credentials", "error"),  # the exec credential plugin (aws eks get-token) failed
    ("(Unauthorized)", "error"),  # the API server refused the credentials (no RBAC permission would help)
    ("(Forbidden)", "access_denied"),  # RBAC: the caller lacks get on the IEC
    ("(TooManyRequests)", "throttled"),
    ("(Timeout)", "timeout"),
    ("(ServerTimeout)", "timeout"),
    ("(ServiceUnavailable)", "server_error"),
    ("(InternalError)", "server_error"),
    ("Unable to connect to the server", "unreachable"),
    ("connection refused", "unreachable"),
    ("no such host", "unreachable"),
    ("i/o timeout", "unreachable"),
    ("TLS handshake timeout", "unreachable"),
    ("connection reset", "unreachable"),
)


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
        """kubectl ran (or was meant to): false only when there is no kubeconfig or no kubectl."""
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


@dataclass(frozen=True, kw_only=True)
class Kubectl:
    """How to reach the cluster: a kubeconfig path (None: ``KUBECONFIG``) and the kubectl binary."""

    kubeconfig: str | None = None
    binary: str | None = None
    timeout_seconds: float = 30.0

    @classmethod
    def from_environment(cls, kubeconfig: str | None) -> Kubectl:
        return cls(kubeconfig=kubeconfig, binary=shutil.which("kubectl"))

    def unavailable(self) -> str | None:
        """Why kubectl cannot be used, or None."""
        if not (self.kubeconfig or os.environ.get("KUBECONFIG")):
            return NO_KUBECONFIG
        if not self.binary:
            return "unknown (kubectl not on PATH)"
        return None

    def iec_status(self, *, name: str, namespace: str) -> IecStatus:
        reason = self.unavailable()
        if reason:
            return IecStatus(state=reason, known=False, reason=_inner(reason), cause=NOT_CONFIGURED)
        command = [str(self.binary)]
        if self.kubeconfig:
            command += ["--kubeconfig", self.kubeconfig]
        command += ["get", IEC_RESOURCE, name, "-n", namespace, "-o", "json"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout_seconds, check=False)
        except subprocess.TimeoutExpired:
            return _unknown(f"kubectl timed out after {self.timeout_seconds:g} s", "timeout")
        except OSError as exc:
            return _unknown(f"kubectl: {exc.strerror or exc}", "error")
        if done.returncode != 0:
            error = " ".join(done.stderr.split()) or f"exit code {done.returncode}"
            if "Error from server (NotFound)" in error:
                return IecStatus(state=NOT_FOUND, message=error)
            cause = kubectl_cause(error)
            need = f"; needs {IEC_PERMISSION} in namespace {namespace}" if cause == "access_denied" else ""
            return _unknown(f"kubectl: {error}", cause, need=need)
        return parse_iec(done.stdout)


def kubectl_cause(error: str) -> str:
    """The cause of a kubectl failure other than ``NotFound``, from its stderr."""
    return next((cause for marker, cause in KUBECTL_CAUSES if marker.lower() in error.lower()), "error")


def _unknown(reason: str, cause: str, *, need: str = "") -> IecStatus:
    return IecStatus(state=f"unknown ({reason})", known=False, reason=reason + need, cause=cause)


def _inner(state: str) -> str:
    """``no kubeconfig`` of ``unknown (no kubeconfig)``."""
    return state.removeprefix("unknown (").removesuffix(")")


def parse_iec(text: str) -> IecStatus:
    """The state and first condition message of ``kubectl get ... -o json`` output."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return _unknown("kubectl printed no JSON", "error")
    status = document.get("status") or {}
    conditions = status.get("conditions") or []
    message = ""
    if conditions and isinstance(conditions[0], dict):
        message = " ".join(str(conditions[0].get("message", "")).split())
    return IecStatus(state=str(status.get("state") or "DeploymentPending"), message=message)
