"""AWS sessions and clients for the operations commands, and one-line renderings of AWS errors.

Clients honour the standard AWS settings (profile, credentials chain, ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_<SERVICE>``, ``AWS_MAX_ATTEMPTS``), always use botocore's *standard* retry mode (which retries
throttling and transient errors with jittered back-off), and identify themselves as ``hpdpd/<version>``.
The Region is the environment file's unless ``--region`` overrides it: an environment lives in one Region, so an
ambient ``AWS_REGION`` pointing elsewhere must not silently check the wrong place.

Two guards sit on every client (botocore events, botocore 1.44.8):

- the command's deadline (:class:`Budget`): ``before-send`` runs before every attempt, retries included, and sets the
  attempt's read timeout to the time left (``URLLib3Session._get_request_timeout`` honours ``read_timeout`` of the
  request context, ``botocore/httpsession.py``), or raises the budget's ``OutOfTime`` once none is left, which the
  retry handler does not retry (``botocore/endpoint.py`` ``_send_request``). The connect timeout is at most
  :data:`CONNECT_TIMEOUT_SECONDS`; standard mode makes 3 attempts unless ``AWS_MAX_ATTEMPTS`` says otherwise, and
  its back-off is at most 1 s then 2 s (``botocore/retries/standard.py`` ``ExponentialBackoff``), so a call ends
  within a few seconds of the deadline;
- the answer (:mod:`hyperpod_dpd.ops.answers`): ``before-parse`` sees every response before botocore's parser does,
  and an answer that is not the service's (a body that is not its protocol's document, an HTML page, a document
  botocore cannot parse, a field of the wrong type) raises :class:`MalformedAnswer` naming the operation and the
  endpoint, instead of an uncaught parser error or, worse, an empty result read as "nothing there".

boto3 is imported lazily so ``hpdpd --help`` and the offline commands start fast.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hyperpod_dpd import __version__
from hyperpod_dpd.errors import HpdpdError

# Defined beside the answer check that raises it (which imports nothing of this module); importable from here too.
from hyperpod_dpd.ops.answers import MalformedAnswer

if TYPE_CHECKING:
    from botocore.config import Config

USER_AGENT_EXTRA = f"hpdpd/{__version__}"
RETRY_MODE = "standard"
CONNECT_TIMEOUT_SECONDS = 10.0  # a TCP and TLS handshake with an AWS endpoint; botocore's default is 60
READ_TIMEOUT_SECONDS = 60.0  # botocore's default (botocore/config.py DEFAULT_TIMEOUT): each attempt's longest wait

ACCESS_DENIED_CODES = frozenset({
    "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError",
    "UnauthorizedException", "Forbidden", "403",
})
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "RequestThrottled",
    "TooManyRequestsException", "RequestLimitExceeded", "SlowDown", "ProvisionedThroughputExceededException",
    "BandwidthLimitExceeded", "LimitExceededException", "PriorRequestNotComplete", "EC2ThrottledException",
})
NOT_FOUND_CODES = frozenset({
    "ResourceNotFound", "ResourceNotFoundException", "NotFoundException", "NoSuchBucket", "NoSuchEntity",
    "NoSuchResourceException",
})
# The credentials themselves were refused (expired, unknown, mis-signed): not a missing permission.
CREDENTIALS_REJECTED_CODES = frozenset({
    "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
    "SignatureDoesNotMatch",
})
# How SageMaker words a missing resource inside a ValidationException ("Could not find endpoint ...",
# "Cluster ... not found").
NOT_FOUND_PHRASES = ("could not find", "not found")


class ClientSource(Protocol):
    """Where the operations code gets its boto3 clients (a :class:`ClientFactory`, or a test's stand-in)."""

    def client(self, service: str) -> Any: ...


class Budget(Protocol):
    """The command's deadline as the clients use it (:class:`hyperpod_dpd.ops.deadline.Deadline`)."""

    def remaining(self) -> float: ...

    def bound(self, seconds: float, *, what: str) -> float: ...


def client_config(*, deadline: Budget | None = None) -> Config:
    """Standard retries and the toolkit's user agent; ``AWS_MAX_ATTEMPTS`` still sets the number of attempts.
    With a deadline, the connect and read timeouts are no longer than its time left."""
    from botocore.config import Config

    if deadline is None:
        return Config(retries={"mode": RETRY_MODE}, user_agent_extra=USER_AGENT_EXTRA)
    left = max(deadline.remaining(), 0.05)
    return Config(retries={"mode": RETRY_MODE}, user_agent_extra=USER_AGENT_EXTRA,
                  connect_timeout=min(CONNECT_TIMEOUT_SECONDS, left), read_timeout=min(READ_TIMEOUT_SECONDS, left))


def guard(client: Any, deadline: Budget | None) -> Any:
    """Put the deadline and the answer check on ``client`` (see the module's docstring); returns it."""
    from hyperpod_dpd.ops.answers import answer_check  # imported here: it needs botocore's parsers

    endpoint = str(client.meta.endpoint_url)
    client.meta.events.register("before-parse", answer_check(endpoint))
    if deadline is not None:
        def before_send(request: Any, event_name: str = "", **_: Any) -> None:
            what = f"{event_name.rsplit('.', 1)[-1] or 'the AWS call'} at {request.url}"
            timeout = deadline.bound(READ_TIMEOUT_SECONDS, what=what)  # raises once the deadline has passed
            context = getattr(request, "context", None)
            if isinstance(context, dict):
                context["read_timeout"] = timeout

        client.meta.events.register("before-send", before_send)
    return client


@dataclass(frozen=True, kw_only=True)
class ClientFactory:
    """One boto3 session per command; one cached client per service, all in the environment's Region, all bounded by
    the command's ``deadline`` (None: botocore's own timeouts) and checked for malformed answers."""

    region: str
    profile: str | None = None
    deadline: Budget | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def session(self) -> Any:
        if "session" not in self._cache:
            import boto3
            import botocore.session

            core = botocore.session.get_session()
            core.register_component("data_loader", _shared_loader())
            self._cache["session"] = boto3.session.Session(botocore_session=core, profile_name=self.profile,
                                                           region_name=self.region)
        return self._cache["session"]

    def client(self, service: str) -> Any:
        key = f"client:{service}"
        if key not in self._cache:
            self._cache[key] = self.new_client(service)
        return self._cache[key]

    def new_client(self, service: str, *, region: str | None = None) -> Any:
        """A client of its own (not cached): for callers that register handlers of their own on it."""
        return guard(self.session().client(service, region_name=region or self.region,
                                           config=client_config(deadline=self.deadline)), self.deadline)


@functools.cache
def _shared_loader() -> Any:
    """One service-model loader per process: each model (SageMaker's is megabytes of JSON) is parsed once."""
    import botocore.loaders

    return botocore.loaders.create_loader()


def add_aws_arguments(parser: argparse.ArgumentParser) -> None:
    """``--profile`` and ``--region``; everything else comes from the standard AWS environment and files."""
    group = parser.add_argument_group("AWS")
    group.add_argument("--profile", default=None,
                       help="named AWS profile (default: AWS_PROFILE or the default credential chain)")
    group.add_argument("--region", default=None,
                       help="AWS Region (default: the environment file's region); AWS_ENDPOINT_URL is honoured")


def factory_from_args(args: argparse.Namespace, *, default_region: str, deadline: Budget | None = None) -> ClientFactory:
    return ClientFactory(region=getattr(args, "region", None) or default_region, profile=getattr(args, "profile", None),
                         deadline=deadline)


# ---- errors -------------------------------------------------------------------------------------------------------


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ``ClientError`` (``''`` for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", "") or response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def is_client_error(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(exc, ClientError)


def is_credentials_error(exc: BaseException) -> bool:
    """Missing or partial credentials: no AWS call of the command can succeed."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    return isinstance(exc, (NoCredentialsError, PartialCredentialsError))


def is_access_denied(exc: BaseException) -> bool:
    return is_client_error(exc) and (error_code(exc) in ACCESS_DENIED_CODES or http_status(exc) == 403)


def is_credentials_rejected(exc: BaseException) -> bool:
    """AWS refused the credentials (expired, unknown or mis-signed), whatever the HTTP status."""
    return is_client_error(exc) and error_code(exc) in CREDENTIALS_REJECTED_CODES


def is_throttling(exc: BaseException) -> bool:
    return is_client_error(exc) and (error_code(exc) in THROTTLING_CODES or http_status(exc) == 429)


def is_not_found(exc: BaseException) -> bool:
    """A missing resource: a not-found code, or SageMaker's ``ValidationException: Could not find ...`` (or
    ``... not found``)."""
    if not is_client_error(exc):
        return False
    code = error_code(exc)
    if code in NOT_FOUND_CODES:
        return True
    message = error_message(exc).lower()
    return code == "ValidationException" and any(phrase in message for phrase in NOT_FOUND_PHRASES)


def is_unreachable(exc: BaseException) -> bool:
    """No answer from the service: the connection failed, was dropped (also mid-body: botocore reads the body after
    its own error handling, so urllib3's ``ProtocolError`` reaches the caller as it is), or timed out."""
    from botocore.exceptions import ConnectionClosedError, ConnectionError, ReadTimeoutError
    from urllib3.exceptions import HTTPError

    return isinstance(exc, (ConnectionError, ConnectionClosedError, ReadTimeoutError, HTTPError))


def is_malformed(exc: BaseException) -> bool:
    """An answer that is not the service's: :class:`MalformedAnswer`, or botocore's own ``ResponseParserError``."""
    from botocore.parsers import ResponseParserError

    return isinstance(exc, (MalformedAnswer, ResponseParserError))


def stops_command(exc: BaseException) -> bool:
    """A failure after which no AWS call of the command can be trusted or succeed: missing or rejected credentials, a
    malformed answer, the command's deadline (any toolkit error raised from inside a call). These are never a
    per-resource "unknown": they end the command with one line, exit 2."""
    return isinstance(exc, HpdpdError) or is_credentials_error(exc) or is_credentials_rejected(exc) or is_malformed(exc)


def call_errors() -> tuple[type[BaseException], ...]:
    """What an AWS call may raise when it fails: botocore's errors, its parser's, and urllib3's for a body cut short."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError
    from urllib3.exceptions import HTTPError

    return (ClientError, BotoCoreError, ResponseParserError, HTTPError, MalformedAnswer)


def is_timeout(exc: BaseException) -> bool:
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    return isinstance(exc, (ConnectTimeoutError, ReadTimeoutError))


def is_server_error(exc: BaseException) -> bool:
    """An HTTP 5xx answer (InternalFailure, ServiceUnavailable, ...) that outlasted botocore's retries."""
    status = http_status(exc) if is_client_error(exc) else None
    return isinstance(status, int) and status >= 500


def error_message(exc: BaseException) -> str:
    """The AWS message on one line; HTML error pages (from emulators and proxies) become their HTTP status."""
    response = getattr(exc, "response", None)
    message = ""
    if isinstance(response, dict):
        message = str(response.get("Error", {}).get("Message", "") or "")
    if "<html" in message.lower() or "<!doctype" in message.lower():
        status = http_status(exc)
        message = {404: "Not Found (API not available at this endpoint)", 500: "Internal Server Error",
                   501: "Not Implemented"}.get(status or 0, f"HTTP {status}")
    return " ".join(message.split())


def operation_name(exc: BaseException) -> str:
    return str(getattr(exc, "operation_name", "") or "")


def describe_client_error(exc: BaseException) -> str:
    """``<Operation>: <Code>: <message>`` on one line, with a hint for throttling and access denied."""
    code = error_code(exc)
    message = error_message(exc)
    text = ": ".join(part for part in (operation_name(exc), code, message if message != code else "") if part)
    if is_throttling(exc):
        attempts = (getattr(exc, "response", {}) or {}).get("ResponseMetadata", {}).get("RetryAttempts")
        after = f" after {attempts + 1} attempts" if isinstance(attempts, int) else ""
        text += f" (throttled{after}; retry later or raise AWS_MAX_ATTEMPTS)"
    elif is_access_denied(exc):
        text += " (the caller lacks this permission)"
    return text


def describe_aws_error(exc: BaseException) -> str | None:
    """One line for an AWS/botocore failure that ends a command, or None when ``exc`` is not one."""
    try:
        from botocore import exceptions as bx
    except ImportError:  # pragma: no cover - botocore is a runtime dependency
        return None
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return ("no AWS credentials found: set AWS_PROFILE (or --profile), AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                "or run 'aws sso login'")
    if isinstance(exc, bx.ProfileNotFound):
        return f"{exc}; list profiles with 'aws configure list-profiles'"
    if isinstance(exc, (bx.SSOTokenLoadError, bx.UnauthorizedSSOTokenError, bx.TokenRetrievalError)):
        return f"{' '.join(str(exc).split())} (run 'aws sso login')"
    if isinstance(exc, bx.ClientError):
        if is_credentials_rejected(exc):
            return f"AWS rejected the credentials: {describe_client_error(exc)}"
        return describe_client_error(exc)
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return f"cannot reach AWS: {exc} (check the network, AWS_ENDPOINT_URL and the Region)"
    if is_malformed(exc):
        text = " ".join(str(exc).split())
        return text if isinstance(exc, MalformedAnswer) else f"an answer botocore cannot parse: {text[:300]}"
    from urllib3.exceptions import HTTPError

    if isinstance(exc, HTTPError):  # urllib3's own, for a connection lost mid-answer
        return f"the connection to AWS broke mid-answer: {' '.join(str(exc).split())[:300]}"
    if isinstance(exc, bx.NoRegionError):
        return "no AWS Region: pass --region or set region in the environment file"
    if isinstance(exc, bx.BotoCoreError):
        return " ".join(str(exc).split())
    return None
