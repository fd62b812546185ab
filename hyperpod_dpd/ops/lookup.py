"""The three answers a read of live state can give: found (with the state), not found, or unknown (with why).

Only the service's own "does not exist" answer is *not found* (SageMaker ``ResourceNotFound`` or a
``ValidationException`` saying "Could not find" / "not found", EKS ``ResourceNotFoundException``, a Kubernetes
``NotFound``). Everything else that stops a read is *unknown*, with a one-line reason from the shared AWS error
rendering (:func:`hyperpod_dpd.aws.describe_aws_error`) and a cause:

- ``access_denied``: the caller lacks the permission (the reason names it); waiting cannot fix it.
- ``throttled``, ``unreachable`` (connection refused, dropped, DNS), ``timeout``, ``server_error`` (HTTP 5xx):
  transient, worth asking again later.
- ``error``: anything else (an API the endpoint lacks, an error AWS does not classify).

What is not an answer about one resource propagates, and the command stops with one line, exit 2
(:func:`hyperpod_dpd.aws.stops_command`): missing, partial or rejected credentials (every other read would be refused
the same way), an answer that is not the service's (:class:`~hyperpod_dpd.aws.MalformedAnswer`: nothing it says can
be read as "found" or "not found"), and the command's deadline (:class:`~hyperpod_dpd.ops.deadline.OutOfTime`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from hyperpod_dpd.aws import (
    call_errors,
    describe_aws_error,
    is_access_denied,
    is_credentials_rejected,
    is_not_found,
    is_server_error,
    is_throttling,
    is_timeout,
    is_unreachable,
    stops_command,
)

T = TypeVar("T")
Outcome = Literal["found", "not_found", "unknown"]
Cause = Literal["access_denied", "throttled", "unreachable", "timeout", "server_error", "error"]
TRANSIENT_CAUSES: frozenset[str] = frozenset({"throttled", "unreachable", "timeout", "server_error"})
UNKNOWN = "Unknown"  # the status shown for a state that could not be read
NOT_FOUND = "NotFound"  # the status shown for a resource the service says does not exist


@dataclass(frozen=True, kw_only=True)
class Lookup(Generic[T]):
    """One read: ``value`` when found; ``reason`` (one line) and ``cause`` when unknown."""

    outcome: Outcome
    value: T | None = None
    reason: str = ""
    cause: Cause | None = None

    @property
    def found(self) -> bool:
        return self.outcome == "found"

    @property
    def absent(self) -> bool:
        return self.outcome == "not_found"

    @property
    def unknown(self) -> bool:
        return self.outcome == "unknown"

    @property
    def transient(self) -> bool:
        """Unknown for a reason that may pass (throttling, connection problems, timeouts, 5xx)."""
        return self.unknown and self.cause in TRANSIENT_CAUSES

    def get(self) -> T:
        """The value of a found read (a programming error otherwise)."""
        if self.value is None:
            raise ValueError(f"no value: the read was {self.outcome}")
        return self.value


def found(value: T) -> Lookup[T]:
    return Lookup(outcome="found", value=value)


def not_found() -> Lookup[T]:
    return Lookup(outcome="not_found")


def unknown(reason: str, cause: Cause) -> Lookup[T]:
    return Lookup(outcome="unknown", reason=reason, cause=cause)


def aws_cause(exc: BaseException) -> Cause:
    """What kind of problem an AWS error that is not a not-found answer is."""
    if is_credentials_rejected(exc):
        return "error"
    if is_access_denied(exc):
        return "access_denied"
    if is_throttling(exc):
        return "throttled"
    if is_timeout(exc):
        return "timeout"
    if is_unreachable(exc):
        return "unreachable"
    if is_server_error(exc):
        return "server_error"
    return "error"


def aws_reason(exc: BaseException) -> str:
    """The one-line rendering every command uses for an AWS error."""
    return describe_aws_error(exc) or " ".join(str(exc).split()) or type(exc).__name__


def from_aws_error(exc: BaseException, *, permission: str) -> Lookup[T]:
    """Not found on the service's not-found answer; otherwise unknown, naming ``permission`` when it was denied."""
    if is_not_found(exc):
        return not_found()
    cause = aws_cause(exc)
    reason = aws_reason(exc)
    if cause == "access_denied":
        reason += f"; needs {permission}"
    return unknown(reason, cause)


def look_up(read: Callable[[], T | None], *, permission: str) -> Lookup[T]:
    """Run an AWS read that returns the state, or None when the resource does not exist, as a :class:`Lookup`
    (what :func:`~hyperpod_dpd.aws.stops_command` names propagates)."""
    try:
        value = read()
    except call_errors() as exc:
        if stops_command(exc):
            raise
        return from_aws_error(exc, permission=permission)
    return not_found() if value is None else found(value)
