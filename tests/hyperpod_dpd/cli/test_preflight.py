"""``hpdpd preflight`` as a command: table and JSON output, exit codes, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import preflight as preflight_cli
from hyperpod_dpd.cli.main import main
from tests.hyperpod_dpd.cli.conftest import MOTO_ACCOUNT


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    def for_moto(data: dict[str, Any]) -> None:
        data["account"] = MOTO_ACCOUNT
        data.pop("endpoints", None)
        data["operator"] = {}  # the default operator: nine add-ons, no model buckets

    return write_config(for_moto)


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch, aws: None) -> Iterator[dict[str, Stubber]]:
    """The command's clients: moto, except Service Quotas and EKS, which get Stubbers the test fills."""
    factory = ClientFactory(region="us-west-2")
    monkeypatch.setattr(preflight_cli, "factory_from_args", lambda args, default_region, **_: factory)
    stubs = {name: Stubber(factory.client(name)) for name in ("service-quotas", "eks")}
    for stub in stubs.values():
        stub.activate()
    yield stubs
    for stub in stubs.values():
        stub.deactivate()


def _eks_absent_and_quota_denied(stubs: dict[str, Stubber]) -> None:
    stubs["service-quotas"].add_client_error("list_service_quotas", "AccessDeniedException", "not authorized")
    stubs["eks"].add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found",
                                  http_status_code=404)
    for _ in range(9):  # one DescribeAddonVersions per add-on of the default operator
        stubs["eks"].add_client_error("describe_addon_versions", "AccessDeniedException", "not authorized")


def test_json_output_is_the_documented_contract(stubbed: dict[str, Stubber], config_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a fresh account (nothing deployed) where quotas and add-on versions cannot be read
    _eks_absent_and_quota_denied(stubbed)
    # WHEN preflight runs with JSON output
    code = main(["preflight", "--env", "dev", "--config-dir", str(config_dir), "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN the JSON has ok and checks with name/status/detail (+fix); warnings alone keep ok true and exit 0
    assert code == 0 and data["ok"] is True
    assert data["environment"] == "dev" and data["region"] == "us-west-2"
    assert all(set(c) <= {"name", "status", "detail", "fix"} and c["status"] in ("pass", "warn", "fail")
               for c in data["checks"])
    statuses = {c["name"]: c["status"] for c in data["checks"]}
    assert statuses["quota:ml.p5.48xlarge"] == "warn" and statuses["offering:ml.p5.48xlarge"] == "pass"
    assert statuses["hyperpod-cluster"] == "pass"


def test_strict_turns_warnings_into_a_failing_exit(stubbed: dict[str, Stubber], config_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _eks_absent_and_quota_denied(stubbed)
    code = main(["preflight", "--env", "dev", "--config-dir", str(config_dir), "--output", "json", "--strict"])
    assert code == 1 and json.loads(capsys.readouterr().out)["ok"] is False


def test_the_table_shows_status_reason_and_fix(stubbed: dict[str, Stubber], write_config: Callable[..., Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a config for another account than the credentials
    config = write_config(lambda d: (d.pop("endpoints", None), d.__setitem__("operator", {})))
    code = main(["preflight", "--env", "dev", "--config-dir", str(config)])
    out = capsys.readouterr().out
    # THEN the one failing row says why and how to fix it, and the command exits 1
    assert code == 1
    assert "FAIL" in out and "credentials" in out and "123456789012" in out
    assert "use a profile for account 111111111111" in " ".join(out.split())
    assert "preflight dev" in out


def test_an_unknown_environment_is_one_line(aws: None, config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["preflight", "--env", "nope", "--config-dir", str(config_dir)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "no such environment file; available environments: dev" in err


def test_missing_credentials_are_one_line(config_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code = main(["preflight", "--env", "dev", "--config-dir", str(config_dir)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == ("hpdpd: error: no AWS credentials found: set AWS_PROFILE (or --profile), "
                            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run 'aws sso login'\n")


def test_throttling_that_outlasts_retries_is_one_line(monkeypatch: pytest.MonkeyPatch, aws: None, config_dir: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN STS throttling the identity call even after botocore's retries
    factory = ClientFactory(region="us-west-2")
    monkeypatch.setattr(preflight_cli, "factory_from_args", lambda args, default_region, **_: factory)
    with Stubber(factory.client("sts")) as sts:
        sts.add_client_error("get_caller_identity", "Throttling", "Rate exceeded", http_status_code=400)
        code = main(["preflight", "--env", "dev", "--config-dir", str(config_dir)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("hpdpd: error: GetCallerIdentity: Throttling: Rate exceeded (throttled")


def test_a_region_other_than_the_environments_fails_before_any_check(aws: None, config_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN dev (us-west-2) and --region us-east-1, where dev's HyperPod cluster would simply "not exist yet"
    # WHEN preflight runs
    code = main(["preflight", "--env", "dev", "--config-dir", str(config_dir), "--region", "us-east-1",
                 "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN the credentials row fails naming both Regions, nothing else is checked, and the command exits 1
    assert code == 1 and data["ok"] is False
    assert [(c["name"], c["status"]) for c in data["checks"]] == [("credentials", "fail")]
    assert "the checks would read Region us-east-1; environment dev is in us-west-2" in data["checks"][0]["detail"]
    assert data["checks"][0]["fix"] == "drop --region (or pass --region us-west-2)"
