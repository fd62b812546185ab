"""Check rows and reports: stable JSON, ``ok`` semantics, and checks that cannot run becoming WARN rows."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from hyperpod_dpd.ops.checks import Check, Report, attempt, failed, guarded, passed, warned


def _denied(operation: str = "ListServiceQuotas") -> ClientError:
    return ClientError({"Error": {"Code": "AccessDeniedException", "Message": "User is not authorized"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)


def test_report_json_has_the_documented_shape() -> None:
    # GIVEN one row of each status
    report = Report(checks=(passed("a", "fine"), warned("b", "unknown", fix="grant x"), failed("c", "bad", fix="do y")))
    # WHEN rendered for pipelines
    data = report.to_json(environment="dev")
    # THEN it has ok, the extra keys, and rows with name/status/detail (+fix when there is one)
    assert data == {"ok": False, "environment": "dev", "checks": [
        {"name": "a", "status": "pass", "detail": "fine"},
        {"name": "b", "status": "warn", "detail": "unknown", "fix": "grant x"},
        {"name": "c", "status": "fail", "detail": "bad", "fix": "do y"}]}
    assert report.counts() == {"pass": 1, "warn": 1, "fail": 1}


def test_warnings_fail_only_strict_reports() -> None:
    rows = (passed("a", "fine"), warned("b", "unknown"))
    assert Report(checks=rows).ok
    assert not Report(checks=rows, strict=True).ok


def test_a_check_row_rejects_unknown_statuses() -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        Check(name="x", status="ok", detail="")  # type: ignore[arg-type]


def test_access_denied_becomes_a_warn_row_per_name_with_the_permission() -> None:
    def run() -> list[Check]:
        raise _denied()

    # WHEN a check group hits access denied
    rows = guarded(run, names=["quota:ml.p5.48xlarge", "quota:ml.m7i.2xlarge"],
                   permission="servicequotas:ListServiceQuotas")
    # THEN each of its rows is a WARN that names the missing permission
    assert [r.name for r in rows] == ["quota:ml.p5.48xlarge", "quota:ml.m7i.2xlarge"]
    assert all(r.status == "warn" for r in rows)
    assert "access denied" in rows[0].detail and "ListServiceQuotas" in rows[0].detail
    assert rows[0].fix is not None and "grant servicequotas:ListServiceQuotas" in rows[0].fix


def test_an_unreachable_endpoint_is_a_warn_row() -> None:
    def run() -> list[Check]:
        raise EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com")

    rows = guarded(run, names=["offering:x"], permission="ec2:DescribeInstanceTypeOfferings")
    assert rows[0].status == "warn" and "Could not connect" in rows[0].detail


def test_missing_credentials_are_not_swallowed() -> None:
    def run() -> list[Check]:
        raise NoCredentialsError()

    with pytest.raises(NoCredentialsError):
        guarded(run, names=["x"], permission="y")
    with pytest.raises(NoCredentialsError):
        attempt(run)


def test_attempt_returns_the_value_or_the_aws_error() -> None:
    assert attempt(lambda: 42) == 42
    error = _denied()

    def run() -> int:
        raise error

    assert attempt(run) is error
