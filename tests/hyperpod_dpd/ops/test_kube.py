"""The Kubernetes API through the official client, against the fake API server; EKS authentication from boto3."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.ops import workloads
from hyperpod_dpd.ops.eks_auth import TOKEN_PREFIX, presigned_identity_url, token_from_url, url_from_token
from hyperpod_dpd.ops.kube import NO_KUBECONFIG, EksAccess, Kube, KubeError, parse_iec

READY = {"status": {"state": "DeploymentComplete", "conditions": [
    {"type": "Ready", "status": "True", "message": "DPD prefill and decode deployments are ready"}]}}
IEC_PATH = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/serving/inferenceendpointconfigs/llama-1a2b3c"


def test_without_a_kubeconfig_or_eks_the_state_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    status = Kube.from_environment(None).iec_status(name="llama", namespace="default")
    assert status.state == NO_KUBECONFIG == "unknown (no kubeconfig)" and not status.known and not status.attempted


def test_the_iec_is_read_with_the_given_kubeconfig(fake_kube: Any) -> None:
    # GIVEN an API server holding the IEC, and a kubeconfig with a static token
    fake_kube.iecs[("serving", "llama-1a2b3c")] = READY
    # WHEN its status is read
    status = fake_kube.client().iec_status(name="llama-1a2b3c", namespace="serving")
    # THEN exactly that custom resource was asked for, with the kubeconfig's credentials, and it is ready
    assert fake_kube.calls("GET") == [IEC_PATH]
    assert fake_kube.authorizations == ["Bearer test-token"]
    assert status.ready and status.message == "DPD prefill and decode deployments are ready"


def test_kubeconfig_from_the_environment(fake_kube: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_kube.iecs[("default", "llama")] = {"status": {"state": "DeploymentInProgress"}}
    monkeypatch.setenv("KUBECONFIG", fake_kube.kubeconfig(tmp_path / "env-kubeconfig"))
    kube = Kube.from_environment(None, eks=EksAccess(clients=None, cluster_name="ignored", region="us-west-2"))
    status = kube.iec_status(name="llama", namespace="default")
    # a kubeconfig wins over EKS authentication
    assert kube.eks is None and status.state == "DeploymentInProgress" and not status.ready and not status.failed


def test_only_the_api_servers_404_is_not_found(fake_kube: Any, tmp_path: Path) -> None:
    status = fake_kube.client().iec_status(name="llama", namespace="default")
    assert status.state == "NotFound" and status.known
    fake_kube.fail("/apis/", 403, 'inferenceendpointconfigs "llama" is forbidden')
    denied = fake_kube.client().iec_status(name="llama", namespace="default")
    assert denied.cause == "access_denied" and denied.reason.endswith(
        "; needs get on inferenceendpointconfigs.inference.sagemaker.aws.amazon.com in namespace default")
    fake_kube.fail("/apis/", 429, "slow down")
    assert fake_kube.client().iec_status(name="llama", namespace="default").transient


def test_reads_classify_timeouts_and_refusals(fake_kube: Any, tmp_path: Path) -> None:
    fake_kube.fail("/api/v1/nodes", delay=1.5)
    with pytest.raises(KubeError) as slow:
        workloads.nodes(fake_kube.client(timeout=0.5))
    assert slow.value.cause == "timeout" and slow.value.transient
    from tests.fakes.kube_api import FakeKube, serve

    with serve() as gone:
        url = gone.url
    with pytest.raises(KubeError) as refused:
        workloads.nodes(Kube(kubeconfig=FakeKube(url=url).kubeconfig(tmp_path / "gone")))
    assert refused.value.cause == "unreachable" and "cannot reach the Kubernetes API server" in refused.value.reason


def test_failed_and_pending_states_are_parsed() -> None:
    failed = parse_iec({"status": {"state": "DeploymentFailed", "conditions": [
        {"message": "prefill pods: ImagePullBackOff"}]}})
    assert failed.failed and failed.message == "prefill pods: ImagePullBackOff"
    assert parse_iec({"metadata": {}}).state == "DeploymentPending"
    assert not parse_iec("not json").known


def test_a_status_written_for_an_older_spec_is_neither_ready_nor_failed(fake_kube: Any) -> None:
    # GIVEN an IEC patched in place (metadata.generation 2) that the operator has not reconciled yet: its status still
    # says DeploymentComplete, for generation 1
    fake_kube.iecs[("serving", "llama-1a2b3c")] = {"metadata": {"generation": 2},
                                                   "status": {**READY["status"], "observedGeneration": 1}}
    # WHEN its status is read
    status = fake_kube.client().iec_status(name="llama-1a2b3c", namespace="serving")
    # THEN it is not ready (a wait goes on polling), and the state says why
    assert not status.ready and not status.failed and status.known
    assert status.state == ("DeploymentComplete (not reconciled: status.observedGeneration 1 < metadata.generation 2)")
    # AND once the operator has caught up it is ready again; a status without observedGeneration is read as before
    fake_kube.iecs[("serving", "llama-1a2b3c")]["status"]["observedGeneration"] = 2
    assert fake_kube.client().iec_status(name="llama-1a2b3c", namespace="serving").ready
    assert parse_iec({"metadata": {"generation": 5}, **READY}).ready


def test_the_workload_labels_match_the_k8s_defaults() -> None:
    from hyperpod_dpd.k8s import defaults

    assert (workloads.DPD_ROLE_LABEL, workloads.ENDPOINT_LABEL, workloads.GENERATION_LABEL, workloads.GPU_RESOURCE) == (
        defaults.DPD_ROLE_LABEL, defaults.ENDPOINT_LABEL, defaults.GENERATION_LABEL, defaults.GPU_RESOURCE)


# ---- EKS authentication ------------------------------------------------------------------------------------------------


def test_the_eks_token_is_a_presigned_get_caller_identity_with_the_cluster_header(aws_credentials: None) -> None:
    # GIVEN the command's AWS session in us-east-2
    sts = ClientFactory(region="us-east-2").session().client("sts", region_name="us-east-2")
    # WHEN a token is minted for cluster hpdpd-dev
    token = token_from_url(presigned_identity_url(sts, "hpdpd-dev"))
    # THEN it is k8s-aws-v1. + unpadded base64url of a presigned GET of STS GetCallerIdentity
    assert token.startswith(TOKEN_PREFIX) and "=" not in token and "+" not in token and "/" not in token
    url = urlparse(url_from_token(token))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.scheme == "https" and url.hostname == "sts.us-east-2.amazonaws.com"
    assert query["Action"] == "GetCallerIdentity" and query["Version"] == "2011-06-15"
    # AND it is signed for STS in the cluster's Region, for 60 seconds, over the x-k8s-aws-id header
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Credential"].endswith("/us-east-2/sts/aws4_request")
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";") and query["X-Amz-Signature"]
    # AND the handler is gone afterwards: a later presign of the same client carries no cluster header
    later = parse_qs(urlparse(sts.generate_presigned_url("get_caller_identity", Params={})).query)
    assert "x-k8s-aws-id" not in later["X-Amz-SignedHeaders"][0]


def test_eks_access_reads_the_cluster_with_a_bearer_token(aws_credentials: None, fake_kube: Any) -> None:
    # GIVEN an EKS cluster whose endpoint is the fake API server
    fake_kube.iecs[("serving", "llama-1a2b3c")] = READY
    clients = ClientFactory(region="us-west-2")
    with Stubber(clients.client("eks")) as eks:
        eks.add_response("describe_cluster", {"cluster": {
            "name": "hpdpd-dev", "endpoint": fake_kube.url,
            "certificateAuthority": {"data": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()}}},
            {"name": "hpdpd-dev"})
        kube = Kube.from_environment(None, eks=EksAccess(clients=clients, cluster_name="hpdpd-dev",
                                                         region="us-west-2"))
        # WHEN the IEC is read without any kubeconfig or kubectl
        status = kube.iec_status(name="llama-1a2b3c", namespace="serving")
    # THEN the request carried an EKS token for that cluster
    assert status.ready
    (authorization,) = fake_kube.authorizations
    assert authorization.startswith(f"Bearer {TOKEN_PREFIX}")
    assert "x-k8s-aws-id" in url_from_token(authorization.removeprefix("Bearer "))


def test_eks_describe_failures_are_classified(aws_credentials: None) -> None:
    def read(code: str, status: int) -> Any:
        clients = ClientFactory(region="us-west-2")
        with Stubber(clients.client("eks")) as eks:
            eks.add_client_error("describe_cluster", code, "no", http_status_code=status)
            return Kube(eks=EksAccess(clients=clients, cluster_name="hpdpd-dev", region="us-west-2")).iec_status(
                name="llama", namespace="default")

    # a cluster EKS says does not exist holds no IEC: NotFound, with why
    missing = read("ResourceNotFoundException", 404)
    assert missing.state == "NotFound" and missing.message == "EKS cluster hpdpd-dev not found"
    # a denied DescribeCluster is Unknown, naming the permission
    denied = read("AccessDeniedException", 400)
    assert not denied.known and denied.cause == "access_denied" and denied.reason.endswith(
        "; needs eks:DescribeCluster")


# ---- every request within its timeout and the command's deadline ---------------------------------------------------


def test_a_read_that_times_out_is_not_retried_by_urllib3(fake_kube: Any, tmp_path: Path) -> None:
    import time

    from tests.fakes.fault_proxy import serve as serve_proxy
    from tests.fakes.kube_api import FakeKube

    # GIVEN an API server that accepts the request and never answers, and a 1 s request timeout
    with serve_proxy(fake_kube.url) as proxy:
        proxy.set("stall")
        kube = Kube(kubeconfig=FakeKube(url=proxy.url).kubeconfig(tmp_path / "stalled"), timeout_seconds=1.0)
        started = time.monotonic()
        # WHEN the nodes are listed
        with pytest.raises(KubeError) as raised:
            workloads.nodes(kube)
        elapsed = time.monotonic() - started
    # THEN one attempt timed out (urllib3's default Retry(3) would have made four, four times as long)
    assert raised.value.cause == "timeout" and elapsed < 2.0
    assert [path for _, path, _ in proxy.requests] == ["/api/v1/nodes"]


def test_requests_get_what_is_left_of_the_deadline_and_none_start_after_it(fake_kube: Any, tmp_path: Path) -> None:
    from hyperpod_dpd.ops.deadline import Deadline, OutOfTime

    class Clock:
        now = 0.0

        def __call__(self) -> float:
            return self.now

    # GIVEN a command with 30 s per request but 4 s left of its deadline
    clock = Clock()
    kube = Kube(kubeconfig=fake_kube.kubeconfig(tmp_path / "kubeconfig"), timeout_seconds=30.0,
                deadline=Deadline(seconds=10, clock=clock))
    clock.now = 6.0
    # THEN the next request may take 4 s (connect and read), not 30
    assert kube.timeout == (4.0, 4.0)
    # WHEN the deadline has passed, THEN a call is refused before it is sent
    clock.now = 10.0
    with pytest.raises(OutOfTime, match="^list nodes: the 10 s of --timeout ran out"):
        workloads.nodes(kube)
    assert fake_kube.requests == []
