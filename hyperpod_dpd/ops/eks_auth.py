"""EKS authentication from boto3, as ``aws eks get-token`` does it: no kubectl, no AWS CLI.

The bearer token is ``k8s-aws-v1.`` followed by the unpadded base64url of a presigned STS ``GetCallerIdentity`` URL
whose signature covers the header ``x-k8s-aws-id: <cluster name>``; the URL is presigned for 60 seconds and the API
server's authenticator accepts the token for about 15 minutes (aws-iam-authenticator, ``pkg/token/token.go``;
AWS CLI ``awscli/customizations/eks/get_token.py``). The API server's address and CA come from
``eks:DescribeCluster``.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any

TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - the format marker of EKS tokens, not a secret
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_SECONDS = 60  # what `aws eks get-token` presigns for
TOKEN_LIFETIME_SECONDS = 14 * 60  # refresh a minute before the authenticator's 15 minutes run out
DESCRIBE_PERMISSION = "eks:DescribeCluster"


def presigned_identity_url(sts: Any, cluster_name: str) -> str:
    """A GetCallerIdentity URL presigned by ``sts`` (a boto3 STS client) with the cluster header signed in."""

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    event = "before-sign.sts.GetCallerIdentity"
    sts.meta.events.register(event, add_cluster_header)
    try:
        return str(sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=PRESIGN_SECONDS,
                                              HttpMethod="GET"))
    finally:
        sts.meta.events.unregister(event, add_cluster_header)


def token_from_url(url: str) -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def url_from_token(token: str) -> str:
    """The presigned URL inside a token (for tests and diagnostics)."""
    body = token.removeprefix(TOKEN_PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def sts_client(clients: Any, region: str) -> Any:
    """A dedicated STS client in the cluster's Region (the header handler must not touch a shared client), with the
    command's deadline and answer checks (:meth:`hyperpod_dpd.aws.ClientFactory.new_client`)."""
    if hasattr(clients, "new_client"):
        return clients.new_client("sts", region=region)
    return clients.client("sts")


@dataclass(frozen=True, kw_only=True)
class EksEndpoint:
    """What a Kubernetes client needs to reach an EKS cluster: its API server URL and CA (PEM)."""

    cluster_name: str
    host: str
    ca_pem: bytes


def describe_endpoint(eks: Any, cluster_name: str) -> EksEndpoint:
    """The API server URL and CA of ``cluster_name`` (``eks:DescribeCluster``; AWS errors propagate)."""
    from hyperpod_dpd.ops.answers import member

    cluster = member(eks.describe_cluster(name=cluster_name), "cluster", client=eks, operation="DescribeCluster")
    data = (cluster.get("certificateAuthority") or {}).get("data") or ""
    return EksEndpoint(cluster_name=cluster_name, host=str(cluster.get("endpoint") or ""),
                       ca_pem=base64.b64decode(data) if data else b"")


class TokenSource:
    """Bearer tokens for one cluster, minted again shortly before the authenticator would refuse them."""

    def __init__(self, sts: Any, cluster_name: str, *, clock: Any = time.monotonic) -> None:
        self._sts, self._cluster, self._clock = sts, cluster_name, clock
        self._token: str | None = None
        self._minted = 0.0

    def token(self) -> str:
        if self._token is None or self._clock() - self._minted > TOKEN_LIFETIME_SECONDS:
            self._token = token_from_url(presigned_identity_url(self._sts, self._cluster))
            self._minted = self._clock()
        return self._token
