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


# ---- the command's deadline on every client --------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_deadline_bounds_the_connect_and_read_timeouts_of_the_clients() -> None:
    from hyperpod_dpd.ops.deadline import Deadline

    # GIVEN a command with 4 s left
    clients = ClientFactory(region="us-west-2", deadline=Deadline(seconds=4, clock=Clock()))
    # WHEN a client is made, THEN no attempt may wait longer than that for a connection or an answer
    config = clients.client("sagemaker").meta.config
    assert (config.connect_timeout, config.read_timeout) == (4, 4)
    assert config.retries["mode"] == "standard"
    # AND without a deadline the clients keep botocore's own timeouts
    assert client_config().connect_timeout == client_config().read_timeout == 60


def test_no_attempt_starts_once_the_deadline_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.ops.deadline import Deadline, OutOfTime
    from tests.hyperpod_dpd.aws_faults import refusing_port

    # GIVEN a deadline that has passed, and an endpoint that would refuse the connection if anything were sent
    clock = Clock()
    deadline = Deadline(seconds=2, clock=clock)
    with refusing_port() as port:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        sts = ClientFactory(region="us-west-2", deadline=deadline).client("sts")
        clock.now = 5.0
        # WHEN a call is made
        with pytest.raises(OutOfTime) as raised:
            sts.get_caller_identity()
    # THEN it is refused before any attempt (no connection error), naming the call, its endpoint and the option
    assert str(raised.value) == (f"GetCallerIdentity at http://127.0.0.1:{port}/: the 2 s of --timeout ran out before "
                                 "it could be done")


def test_each_attempt_waits_only_for_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from hyperpod_dpd.ops.deadline import Deadline, OutOfTime
    from tests.fakes.fault_proxy import serve

    # GIVEN an endpoint that accepts every request and never answers, and a command with 1.5 s left
    with serve("http://127.0.0.1:9") as proxy:
        proxy.set("stall")
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        sts = ClientFactory(region="us-west-2", deadline=Deadline(seconds=1.5)).client("sts")
        started = time.monotonic()
        # WHEN a call is made (botocore's standard mode would make 3 attempts of 60 s each)
        with pytest.raises(OutOfTime):
            sts.get_caller_identity()
        elapsed = time.monotonic() - started
    # THEN the first attempt gave up when the time was up and no retry started after it
    assert 1.4 <= elapsed < 3.0
    assert [fault for _, _, fault in proxy.requests] == ["stall"]


def test_what_stops_a_command_is_told_apart_from_a_read_that_failed() -> None:
    from botocore.parsers import ResponseParserError

    from hyperpod_dpd.aws import MalformedAnswer, stops_command
    from hyperpod_dpd.ops.deadline import OutOfTime

    malformed = MalformedAnswer(operation="DescribeCluster", endpoint="http://x", detail="not JSON")
    # THEN credentials that are missing or rejected, an answer not the service's and the deadline end the command
    assert stops_command(NoCredentialsError())
    assert stops_command(_error("ExpiredTokenException", "The security token included in the request is expired"))
    assert stops_command(malformed) and stops_command(ResponseParserError("bad XML"))
    assert stops_command(OutOfTime("DescribeCluster at http://x", "the 3 s of --timeout"))
    # AND a denied, throttled or missing resource is an answer about that resource only
    for code, status in (("AccessDeniedException", 403), ("ThrottlingException", 400), ("ResourceNotFound", 400)):
        assert not stops_command(_error(code, status=status))
    # AND each has its one line
    assert describe_aws_error(malformed) == ("DescribeCluster at http://x: the answer is not the service's (not JSON); "
                                             "check AWS_ENDPOINT_URL and any proxy in between")
    assert describe_aws_error(ResponseParserError("Unable to parse\nresponse")) == (
        "an answer botocore cannot parse: Unable to parse response")


def test_a_connection_cut_mid_answer_is_one_line() -> None:
    from urllib3.exceptions import ProtocolError

    from hyperpod_dpd.aws import is_unreachable

    # GIVEN urllib3's error for a body cut short, which botocore lets through as it is (it reads bodies after its own
    # error handling)
    cut = ProtocolError("Connection broken: IncompleteRead(10 bytes read, 90 more expected)")
    # THEN it is a connection problem, worth retrying later, with its one line
    assert is_unreachable(cut)
    assert describe_aws_error(cut) == ("the connection to AWS broke mid-answer: Connection broken: "
                                       "IncompleteRead(10 bytes read, 90 more expected)")
