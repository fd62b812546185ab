"""Check results shared by ``preflight`` (and readable by pipelines): PASS / WARN / FAIL with the reason and the fix."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from hyperpod_dpd.aws import (
    call_errors,
    describe_aws_error,
    describe_client_error,
    is_access_denied,
    is_client_error,
    is_throttling,
    stops_command,
)

T = TypeVar("T")
Status = Literal["pass", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("pass", "warn", "fail")


@dataclass(frozen=True, kw_only=True)
class Check:
    """One row of a report. ``name`` is stable (pipelines may select on it); ``detail``, ``fix`` (what to do) and
    ``cause`` (the most likely cause, for the live checks of verify and the smoke canary) are one line each."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    cause: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "status": self.status, "detail": self.detail}
        if self.fix:
            data["fix"] = self.fix
        if self.cause:
            data["cause"] = self.cause
        return data


def passed(name: str, detail: str) -> Check:
    return Check(name=name, status="pass", detail=detail)


def warned(name: str, detail: str, fix: str | None = None) -> Check:
    return Check(name=name, status="warn", detail=detail, fix=fix)


def failed(name: str, detail: str, fix: str | None = None) -> Check:
    return Check(name=name, status="fail", detail=detail, fix=fix)


@dataclass(frozen=True, kw_only=True)
class Report:
    """The checks of one run; ``ok`` is false when any check failed (or warned, when ``strict``)."""

    checks: tuple[Check, ...]
    strict: bool = False

    @property
    def ok(self) -> bool:
        bad = ("fail", "warn") if self.strict else ("fail",)
        return not any(c.status in bad for c in self.checks)

    def counts(self) -> dict[Status, int]:
        return {s: sum(1 for c in self.checks if c.status == s) for s in STATUSES}

    def to_json(self, **extra: Any) -> dict[str, Any]:
        return {"ok": self.ok, **extra, "checks": [c.to_json() for c in self.checks]}


def why_unchecked(exc: BaseException, *, permission: str) -> tuple[str, str]:
    """(what stopped a check, the fix) for an AWS error: the permission it needs, or what AWS said."""
    if is_access_denied(exc):
        return (f"access denied ({describe_client_error(exc)})",
                f"grant {permission} to the caller, or run preflight with a role that has it")
    if is_throttling(exc):
        return describe_client_error(exc), "re-run preflight later"
    if is_client_error(exc):
        return (describe_client_error(exc),
                f"check that the API is available in this Region/endpoint; the check needs {permission}")
    return (describe_aws_error(exc) or " ".join(str(exc).split()),
            "check the network and AWS_ENDPOINT_URL, then re-run preflight")


def could_not_check(name: str, exc: BaseException, *, permission: str) -> Check:
    """The WARN row for a check that could not run."""
    reason, fix = why_unchecked(exc, permission=permission)
    return warned(name, f"could not check: {reason}", fix=fix)


def guarded(run: Callable[[], Iterable[Check]], *, names: Sequence[str], permission: str) -> list[Check]:
    """Run checks; an AWS error that stops them becomes one WARN row per name, so the other checks still run.

    What stops the command is not caught (:func:`~hyperpod_dpd.aws.stops_command`: missing or rejected credentials,
    a malformed answer, the deadline): no check can run after it, so the command stops with one line.
    """
    try:
        return list(run())
    except call_errors() as exc:
        if stops_command(exc):
            raise
        return [could_not_check(name, exc, permission=permission) for name in names]


def attempt(run: Callable[[], T]) -> T | BaseException:
    """The result of an AWS read, or the AWS error that stopped it (what stops the command still propagates)."""
    try:
        return run()
    except call_errors() as exc:
        if stops_command(exc):
            raise
        return exc
