"""AWS failures the status and wait tests provoke for real rather than by hand-made exceptions.

- ``denied_by_iam``: moto's IAM enforcement with a user whose policy lacks the permission, so moto itself answers
  403 AccessDenied (moto enforces IAM for SageMaker; its EKS signature check fails under enforcement, so EKS
  denials are stubbed instead).
- ``unreachable``: a service endpoint (``AWS_ENDPOINT_URL_<SERVICE>``) on a local port that refuses connections,
  so botocore raises its own ``EndpointConnectionError``.
- ``timing_out`` / ``refusing``: a ``before-send`` handler that raises botocore's ``ReadTimeoutError`` /
  ``EndpointConnectionError`` where the HTTP send would have, so the error takes the same path (retries included)
  as a real one; with ``times`` only the first sends fail and later ones reach moto.
- ``moto_server``: moto's own server on loopback, for tests that put :mod:`tests.fakes.fault_proxy` in front of it;
  ``seed_clusters`` puts the dev environment's clusters in it.
"""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import boto3
import pytest

DENIED_USER = "status-reader"


@contextmanager
def denied_by_iam(monkeypatch: pytest.MonkeyPatch, *, allow: Sequence[str]) -> Iterator[str]:
    """Inside moto: credentials of a user allowed only ``allow``, with IAM enforced; yields the user's ARN.

    Clients created inside the block (a fresh ``ClientFactory``) sign with these credentials.
    """
    from moto.core.authorization import enable_iam_authentication

    iam = boto3.client("iam", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    user = iam.create_user(UserName=DENIED_USER)["User"]["Arn"]
    iam.put_user_policy(UserName=DENIED_USER, PolicyName="read-some", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(allow), "Resource": "*"}]}))
    key = iam.create_access_key(UserName=DENIED_USER)["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    with enable_iam_authentication():
        yield user


@contextmanager
def refusing_port() -> Iterator[int]:
    """A local port that is bound but never listens: every connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@contextmanager
def unreachable(monkeypatch: pytest.MonkeyPatch, *services: str) -> Iterator[str]:
    """Point ``services`` (botocore names, e.g. ``sagemaker``) at a refusing port, one attempt each; yields the URL."""
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}"
        for service in services:
            monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service.upper()}", url)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore would otherwise back off between attempts
        yield url


def failing_to_send(client: Any, operation: str, error: Callable[[str], Exception], *,
                    times: int | None = None) -> None:
    """The first ``times`` sends of ``operation`` on ``client`` (every one, when None) raise ``error(url)``."""
    left = [times]

    def send(request: Any, **_: Any) -> None:
        if left[0] is None or left[0] > 0:
            left[0] = None if left[0] is None else left[0] - 1
            raise error(request.url)

    client.meta.events.register(f"before-send.{client.meta.service_model.service_id.hyphenize()}.{operation}", send)


def timing_out(client: Any, operation: str, *, times: int | None = None) -> None:
    """Sends of ``operation`` end in botocore's ReadTimeoutError (the first ``times``, or all)."""
    from botocore.exceptions import ReadTimeoutError

    failing_to_send(client, operation, lambda url: ReadTimeoutError(endpoint_url=url), times=times)


def refusing(client: Any, operation: str, *, times: int | None = None) -> None:
    """Sends of ``operation`` end in botocore's EndpointConnectionError (the first ``times``, or all)."""
    from botocore.exceptions import EndpointConnectionError

    failing_to_send(client, operation, lambda url: EndpointConnectionError(endpoint_url=url), times=times)


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server (``ThreadedMotoServer``) on 127.0.0.1, a free port; yields its URL. Its request log is quiet
    (werkzeug would print every request, and the trace of every API moto lacks, to the test's stderr)."""
    import logging
    import os

    from moto.server import ThreadedMotoServer

    logger = logging.getLogger("werkzeug")
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    previous = os.environ.get("MOTO_EC2_LOAD_DEFAULT_AMIS")
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"  # read when the EC2 backend starts, in this process
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        logger.setLevel(level)
        logger.propagate = propagate
        if previous is None:
            os.environ.pop("MOTO_EC2_LOAD_DEFAULT_AMIS", None)
        else:
            os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = previous


@functools.cache
def _seeding_clients(url: str) -> tuple[Any, Any]:
    """SageMaker and EKS clients of the moto server at ``url``, made once per server (a new session parses the
    SageMaker model again: about half a second of CPU on every test that seeds)."""
    from tests.hyperpod_dpd.moto_clusters import REGION

    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    return session.client("sagemaker", endpoint_url=url), session.client("eks", endpoint_url=url)


def seed_clusters(url: str, groups: Sequence[tuple[str, str, int]]) -> None:
    """The dev environment's HyperPod cluster (``groups``) and EKS cluster ``hpdpd-dev`` in the moto server at ``url``,
    unless they are there. moto keeps one state per process, which another test's in-process ``mock_aws`` resets and
    another server's tests fill: a test that needs them seeds them itself."""
    from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, create_hyperpod_cluster

    sagemaker, eks = _seeding_clients(url)
    if not sagemaker.list_clusters()["ClusterSummaries"]:
        create_hyperpod_cluster(sagemaker, groups)
    if "hpdpd-dev" not in eks.list_clusters()["clusters"]:
        eks.create_cluster(name="hpdpd-dev", version="1.35", roleArn=f"arn:aws:iam::{MOTO_ACCOUNT}:role/eks",
                           resourcesVpcConfig={"subnetIds": []})
