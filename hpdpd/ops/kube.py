"""``InferenceEndpointConfig`` status through ``kubectl`` (no Kubernetes client library is a dependency).

kubectl runs only when a kubeconfig is given (``--kubeconfig`` or ``KUBECONFIG``) and ``kubectl`` is on PATH;
otherwise the state is reported as unknown rather than guessed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

IEC_RESOURCE = "inferenceendpointconfig"
READY_STATE = "DeploymentComplete"
FAILED_STATES = frozenset({"DeploymentFailed", "DeletionFailed"})
GONE_STATES = frozenset({"DeletionPending", "DeletionInProgress", "DeletionComplete"})
NO_KUBECONFIG = "unknown (no kubeconfig)"
NOT_FOUND = "NotFound"


@dataclass(frozen=True, kw_only=True)
class IecStatus:
    """``status.state`` of an IEC (or why it is unknown) and the message of its first condition."""

    state: str
    message: str = ""
    known: bool = True

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
            return IecStatus(state=reason, known=False)
        command = [str(self.binary)]
        if self.kubeconfig:
            command += ["--kubeconfig", self.kubeconfig]
        command += ["get", IEC_RESOURCE, name, "-n", namespace, "-o", "json"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout_seconds, check=False)
        except subprocess.TimeoutExpired:
            return IecStatus(state=f"unknown (kubectl timed out after {self.timeout_seconds:g} s)", known=False)
        except OSError as exc:
            return IecStatus(state=f"unknown (kubectl: {exc.strerror or exc})", known=False)
        if done.returncode != 0:
            error = " ".join(done.stderr.split()) or f"exit code {done.returncode}"
            if "NotFound" in error or "not found" in error:
                return IecStatus(state=NOT_FOUND, message=error)
            return IecStatus(state=f"unknown (kubectl: {error})", known=False)
        return parse_iec(done.stdout)


def parse_iec(text: str) -> IecStatus:
    """The state and first condition message of ``kubectl get ... -o json`` output."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return IecStatus(state="unknown (kubectl printed no JSON)", known=False)
    status = document.get("status") or {}
    conditions = status.get("conditions") or []
    message = ""
    if conditions and isinstance(conditions[0], dict):
        message = " ".join(str(conditions[0].get("message", "")).split())
    return IecStatus(state=str(status.get("state") or "DeploymentPending"), message=message)
