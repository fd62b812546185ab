"""Sessions and clients: standard retries, user agent, Region and endpoint settings; AWS errors on one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, ProfileNotFound

from hyperpod_dpd import __version__
from hyperpod_dpd.aws import (
    ClientFactory,
    client_config,
    describe_aws_error,
    describe_client_error,
    is_access_denied,
    is_not_found,
    is_throttling,
)


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_ENDPOINT_URL_EKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))


def _error(code: str, message: str = "", status: int = 400, operation: str = "DescribeCluster",
           attempts: int = 0) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": attempts}}, operation)


def test_clients_use_standard_retries_and_the_toolkit_user_agent() -> None:
    # WHEN a client is made for an environment's Region
    client = ClientFactory(region="us-east-1").client("sagemaker")
    # THEN it retries in standard mode, says who it is, and talks to that Region
    assert client.meta.config.retries["mode"] == "standard"
    assert f"hpdpd/{__version__}" in client.meta.config.user_agent_extra
    assert client.meta.region_name == "us-east-1"
    assert client_config().retries == {"mode": "standard"}


def test_clients_are_cached_per_service() -> None:
    factory = ClientFactory(region="us-west-2")
    assert factory.client("eks") is factory.client("eks")
    assert factory.client("eks") is not factory.client("sagemaker")


def test_standard_aws_settings_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an endpoint override and an attempt count in the environment
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5999")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "7")
    # WHEN a client is made
    client = ClientFactory(region="us-west-2").client("sts")
    # THEN it goes to that endpoint, still in standard mode, with the attempts asked for
    assert client.meta.endpoint_url == "http://127.0.0.1:5999"
    assert client.meta.config.retries["mode"] == "standard"
    assert client.meta.config.retries["total_max_attempts"] == 7


def test_a_named_profile_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a credentials file with a profile
    (tmp_path / "credentials").write_text("[ops]\naws_access_key_id = AKIAOPS\naws_secret_access_key = secret\n")
    # WHEN the factory is asked for that profile
    session = ClientFactory(region="us-west-2", profile="ops").session()
    # THEN its credentials come from the profile
    assert session.get_credentials().access_key == "AKIAOPS"


def test_an_unknown_profile_is_one_line() -> None:
    with pytest.raises(ProfileNotFound) as raised:
        ClientFactory(region="us-west-2", profile="nope").client("sts")
    message = describe_aws_error(raised.value)
    assert message is not None and "nope" in message and "\n" not in message


def test_errors_are_classified() -> None:
    assert is_access_denied(_error("AccessDeniedException", status=400))
    assert is_access_denied(_error("UnauthorizedOperation"))
    assert is_access_denied(_error("403", status=403))
    assert is_throttling(_error("ThrottlingException"))
    assert is_throttling(_error("TooManyRequestsException", status=429))
    assert is_not_found(_error("ResourceNotFoundException"))
    assert is_not_found(_error("ValidationException", "Could not find cluster 'x'."))
    assert not is_not_found(_error("ValidationException", "Value 'x' at 'InstanceType' failed"))
    assert not is_not_found(_error("404", "<html>Not Found</html>", status=404))  # an API the endpoint lacks


def test_client_errors_render_on_one_line_with_a_hint() -> None:
    throttled = describe_client_error(_error("ThrottlingException", "Rate exceeded", attempts=2))
    assert throttled == ("DescribeCluster: ThrottlingException: Rate exceeded "
                         "(throttled after 3 attempts; retry later or raise AWS_MAX_ATTEMPTS)")
    denied = describe_client_error(_error("AccessDeniedException", "not authorized", operation="ListAddons"))
    assert denied == "ListAddons: AccessDeniedException: not authorized (the caller lacks this permission)"
    html = describe_client_error(_error("404", "<!doctype html>\n<title>404 Not Found</title>\n", status=404,
                                        operation="ListAddons"))
    assert html == "ListAddons: 404: Not Found (API not available at this endpoint)"


def test_command_ending_errors_are_described_and_others_are_not() -> None:
    assert "no AWS credentials found" in (describe_aws_error(NoCredentialsError()) or "")
    assert "cannot reach AWS" in (describe_aws_error(EndpointConnectionError(endpoint_url="http://x")) or "")
    assert (describe_aws_error(_error("ExpiredTokenException", "expired")) or "").startswith(
        "AWS rejected the credentials")
    assert describe_aws_error(ValueError("a bug")) is None
