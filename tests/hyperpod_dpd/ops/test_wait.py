"""Waiting: exponential back-off to a deadline, terminal failures with AWS's message, and the three probes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.addons import expected_addons
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.wait import (
    Backoff,
    Observation,
    Unobservable,
    addons_probe,
    cluster_probe,
    endpoint_probe,
    wait_for,
)
from tests.hyperpod_dpd.aws_faults import denied_by_iam, unreachable
from tests.hyperpod_dpd.moto_clusters import REGION


class FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def scripted(*observations: Observation | BaseException) -> Callable[[], Observation]:
    queue: Iterator[Observation | BaseException] = iter(observations)

    def probe() -> Observation:
        item = next(queue)
        if isinstance(item, BaseException):
            raise item
        return item

    return probe


def test_polls_back_off_exponentially_until_ready() -> None:
    # GIVEN a target that is ready at the fifth poll
    time = FakeTime()
    probe = scripted(*[Observation(state="Creating")] * 4, Observation(state="InService", ready=True))
    seen: list[tuple[str, float | None]] = []
    # WHEN waiting with a 5 s first interval capped at 30 s
    result = wait_for(probe, target="cluster", timeout_seconds=3600, backoff=Backoff(initial_seconds=5, max_seconds=30),
                      clock=time.clock, sleep=time.sleep, on_poll=lambda o, e, d: seen.append((o.state, d)))
    # THEN it slept 5, 10, 20, 30 s, reported each poll, and ended ready
    assert time.sleeps == [5, 10, 20, 30]
    assert result.ok and result.outcome == "ready" and result.polls == 5 and result.elapsed_seconds == 65
    assert seen[-1] == ("InService", None)
    assert result.to_json() == {"ok": True, "target": "cluster", "outcome": "ready", "state": "InService",
                                "message": None, "elapsed_seconds": 65.0, "polls": 5}


def test_the_wait_times_out_at_the_deadline_with_the_last_state() -> None:
    time = FakeTime()
    result = wait_for(lambda: Observation(state="Creating (prefill 0/1)"), target="cluster", timeout_seconds=100,
                      backoff=Backoff(initial_seconds=10, max_seconds=60), clock=time.clock, sleep=time.sleep)
    assert result.outcome == "timeout" and not result.ok
    assert time.sleeps == [10, 20, 40, 30]  # the last sleep is cut to the deadline
    assert result.message == "not ready after 100 s (last state: Creating (prefill 0/1))"


def test_the_command_deadline_cutting_a_poll_short_is_the_waits_timeout() -> None:
    from hyperpod_dpd.ops.deadline import OutOfTime

    # GIVEN a cluster still creating, whose second poll the command's deadline cuts short
    time = FakeTime()
    cut = OutOfTime("DescribeCluster at https://api.sagemaker.us-west-2.amazonaws.com/", "the 60 s of --timeout")
    probe = scripted(Observation(state="Creating (prefill 0/1)"), cut)
    # WHEN waiting
    result = wait_for(probe, target="cluster", timeout_seconds=60, clock=time.clock, sleep=time.sleep)
    # THEN the wait times out at once (exit 1, not an error) with the state it last saw, not a poll that never ended
    assert result.outcome == "timeout" and result.polls == 2 and time.sleeps == [5]
    assert result.state == "Creating (prefill 0/1)"
    # AND when the deadline cut the very first poll, that is the state, saying why
    first = wait_for(scripted(cut), target="cluster", timeout_seconds=60, clock=time.clock, sleep=time.sleep)
    assert first.outcome == "timeout" and first.state == f"Unknown ({cut})"


def test_a_terminal_failure_ends_the_wait_with_its_message() -> None:
    time = FakeTime()
    probe = scripted(Observation(state="Creating"), Observation(state="Failed", failed=True, message="no capacity"))
    result = wait_for(probe, target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep)
    assert result.outcome == "failed" and result.message == "no capacity" and result.polls == 2


def test_transient_errors_only_delay_the_next_poll_and_other_errors_end_the_wait() -> None:
    # GIVEN a probe that is throttled, then cannot connect, then times out, then sees the cluster ready
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "DescribeCluster")
    refused = EndpointConnectionError(endpoint_url="https://api.sagemaker.us-west-2.amazonaws.com/")
    slow = ReadTimeoutError(endpoint_url="https://api.sagemaker.us-west-2.amazonaws.com/")
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeCluster")
    time = FakeTime()
    seen: list[str] = []
    # WHEN waiting
    probe = scripted(throttled, refused, slow, Observation(state="InService", ready=True))
    result = wait_for(probe, target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep,
                      on_poll=lambda o, e, d: seen.append(o.state))
    # THEN each transient error was observed as Unknown (never NotFound) and polled again, until ready
    assert result.ok and result.polls == 4
    url = "https://api.sagemaker.us-west-2.amazonaws.com/"
    assert seen[:3] == [
        "Unknown (DescribeCluster: ThrottlingException: Rate exceeded (throttled; retry later or raise "
        "AWS_MAX_ATTEMPTS))",
        f'Unknown (cannot reach AWS: Could not connect to the endpoint URL: "{url}" (check the network, '
        "AWS_ENDPOINT_URL and the Region))",
        f'Unknown (cannot reach AWS: Read timeout on endpoint URL: "{url}" (check the network, AWS_ENDPOINT_URL '
        "and the Region))"]
    # AND a denial escaping a probe ends the wait at the first poll, as do rejected credentials (a 403 too)
    with pytest.raises(ClientError):
        wait_for(scripted(denied), target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep)
    rejected = ClientError({"Error": {"Code": "ExpiredTokenException", "Message": "expired"}}, "DescribeCluster")
    with pytest.raises(ClientError):
        wait_for(scripted(rejected), target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep)


def test_backoff_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Backoff(initial_seconds=0)


def _cluster(status: str, current: int, message: str = "") -> dict[str, Any]:
    return {"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": status, "FailureMessage": message, "InstanceGroups": [
                {"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge", "CurrentCount": current,
                 "TargetCount": 1}]}


def test_the_cluster_probe(clients: ClientFactory, env: EnvironmentConfig,
                           create_hyperpod: Callable[..., None]) -> None:
    sagemaker = clients.client("sagemaker")
    probe = cluster_probe(sagemaker, "hpdpd-dev")
    # GIVEN no cluster yet, then (moto) a full InService cluster
    assert probe() == Observation(state="NotFound (not created yet)")
    create_hyperpod(sagemaker, env)
    seen = probe()
    assert seen.ready and seen.state == "InService (system 2/2, prefill 1/1, decode 1/1)"
    # AND (stubbed) an InService cluster still missing a node, then a Failed one
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_cluster", _cluster("InService", 0), {"ClusterName": "hpdpd-dev"})
        stub.add_response("describe_cluster", _cluster("Failed", 0, "Insufficient capacity."), {"ClusterName": "hpdpd-dev"})
        assert not probe().ready
        failed = probe()
    assert failed.failed and failed.message == "Insufficient capacity." and failed.state == "Failed (prefill 0/1)"


def _addon_answers(stub: Stubber, env: EnvironmentConfig, states: dict[str, str]) -> None:
    names = [a.name for a in expected_addons(env) if states.get(a.name) != "missing"]
    stub.add_response("list_addons", {"addons": names}, {"clusterName": env.eks.cluster_name})
    for name in names:
        status = states.get(name, "ACTIVE")
        health = {"issues": [{"code": "ConfigurationConflict", "message": "Conflicts found when trying to apply."}]} \
            if status.endswith("FAILED") else {"issues": []}
        stub.add_response("describe_addon", {"addon": {"addonName": name, "addonVersion": "v1.0.0-eksbuild.1",
                                                       "status": status, "health": health}}, None)


def test_the_addons_probe(env: EnvironmentConfig, aws_credentials: None) -> None:
    import boto3

    eks = boto3.client("eks", region_name="us-west-2")
    probe = addons_probe(eks, env)
    with Stubber(eks) as stub:
        stub.add_client_error("list_addons", "ResourceNotFoundException", "No cluster found", http_status_code=404)
        _addon_answers(stub, env, {"coredns": "DEGRADED", "cert-manager": "missing"})
        _addon_answers(stub, env, {"amazon-sagemaker-hyperpod-inference": "CREATE_FAILED"})
        _addon_answers(stub, env, {})
        assert probe() == Observation(state="EKS cluster hpdpd-dev not found")
        waiting = probe()
        failed = probe()
        ready = probe()
    assert not waiting.ready and not waiting.failed
    assert waiting.state == "7/9 ACTIVE; waiting for coredns DEGRADED, cert-manager missing"
    assert failed.failed and failed.message == ("amazon-sagemaker-hyperpod-inference CREATE_FAILED: "
                                                "Conflicts found when trying to apply.")
    assert ready.ready and ready.state == "all 9 add-ons ACTIVE"


IEC_PATH = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs/llama"


def _kubectl(fake: Any, document: dict[str, Any], name: str = "llama") -> Kube:
    """The fake API server answering the IEC ``name`` in ``default`` with ``document``."""
    fake.iecs[("default", name)] = document
    return fake.client()


def test_the_endpoint_probe(clients: ClientFactory, fake_kube: Any, make_endpoint: Callable[..., Any]) -> None:
    sagemaker = clients.client("sagemaker")
    endpoint = make_endpoint(name="llama", resource_name="llama-1a2b3c", sagemaker_endpoint_name="llama-sm")
    # GIVEN the IEC is complete but its SageMaker endpoint failed
    kubectl = _kubectl(fake_kube, {"status": {"state": "DeploymentComplete", "conditions": [
        {"message": "DPD prefill and decode deployments are ready"}]}}, name="llama-1a2b3c")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_endpoint", {
            "EndpointName": "llama-sm-1a2b3c",
            "EndpointArn": "arn:aws:sagemaker:us-west-2:123456789012:endpoint/llama-sm-1a2b3c",
            "EndpointStatus": "Failed", "FailureReason": "Image pull failed.", "CreationTime": 0,
            "LastModifiedTime": 0}, {"EndpointName": "llama-sm-1a2b3c"})  # the generation's own endpoint
        seen = endpoint_probe(sagemaker, (endpoint,), kubectl)()
    # THEN the wait fails with SageMaker's reason
    assert seen.failed and seen.state == "llama: IEC DeploymentComplete, SageMaker Failed"
    assert seen.message == "SageMaker endpoint llama-sm-1a2b3c: Failed: Image pull failed."
    # AND an IEC whose deployment failed is terminal too, with its condition message
    failed = _kubectl(fake_kube, {"status": {"state": "DeploymentFailed", "conditions": [{"message": "OOMKilled"}]}})
    seen = endpoint_probe(sagemaker, (make_endpoint(name="llama"),), failed)()
    assert seen.failed and seen.message == "IEC llama: DeploymentFailed: OOMKilled"


def test_an_endpoint_that_cannot_be_observed_is_refused(make_endpoint: Callable[..., Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(HpdpdError, match="cannot observe endpoint.*llama.*unknown \\(no kubeconfig\\)"):
        endpoint_probe(object(), (make_endpoint(name="llama"),), Kube(kubeconfig=None))
    with pytest.raises(HpdpdError, match="declares no endpoints"):
        endpoint_probe(object(), (), Kube(kubeconfig=None))


# ---- unknown is not "not created yet" ------------------------------------------------------------------------------


def test_a_denied_cluster_read_ends_the_wait_at_once(env: EnvironmentConfig, create_hyperpod: Callable[..., None],
                                                     clients: ClientFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN (moto, IAM enforced) the cluster exists but the caller may not describe it
    create_hyperpod(clients.client("sagemaker"), env)
    time = FakeTime()
    with denied_by_iam(monkeypatch, allow=["sagemaker:ListClusterNodes"]) as user:
        probe = cluster_probe(ClientFactory(region=REGION).client("sagemaker"), "hpdpd-dev")
        # WHEN waiting for it
        with pytest.raises(Unobservable) as stopped:
            wait_for(probe, target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep)
    # THEN the wait stops at the first poll, without sleeping, naming the caller and the permission
    assert time.sleeps == []
    message = str(stopped.value)
    assert message.startswith("cannot wait for HyperPod cluster hpdpd-dev: DescribeCluster: 403: ") and user in message
    assert message.endswith("; needs sagemaker:DescribeCluster (waiting cannot fix this)")
    assert "\n" not in message


def test_an_unreachable_sagemaker_is_retried_until_the_deadline(clients: ClientFactory,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN SageMaker's endpoint refuses every connection
    time = FakeTime()
    with unreachable(monkeypatch, "sagemaker") as url:
        probe = cluster_probe(clients.client("sagemaker"), "hpdpd-dev")
        # WHEN waiting 100 s
        result = wait_for(probe, target="cluster", timeout_seconds=100, backoff=Backoff(initial_seconds=10),
                          clock=time.clock, sleep=time.sleep)
    # THEN it kept polling to the deadline and times out with the connection problem, never "NotFound"
    unknown = (f'Unknown (cannot reach AWS: Could not connect to the endpoint URL: "{url}/" (check the network, '
               "AWS_ENDPOINT_URL and the Region))")
    assert result.outcome == "timeout" and result.polls == 5 and time.sleeps == [10, 20, 40, 30]
    assert result.state == unknown and result.message == f"not ready after 100 s (last state: {unknown})"


def test_a_throttled_cluster_read_is_retried(clients: ClientFactory) -> None:
    # GIVEN DescribeCluster is throttled (beyond botocore's retries) once, then answers InService
    sagemaker = clients.client("sagemaker")
    time = FakeTime()
    with Stubber(sagemaker) as stub:
        stub.add_client_error("describe_cluster", "ThrottlingException", "Rate exceeded", http_status_code=400)
        stub.add_response("describe_cluster", _cluster("InService", 1), {"ClusterName": "hpdpd-dev"})
        # WHEN waiting
        result = wait_for(cluster_probe(sagemaker, "hpdpd-dev"), target="cluster", timeout_seconds=600,
                          clock=time.clock, sleep=time.sleep)
    # THEN the second poll saw it ready
    assert result.ok and result.polls == 2 and result.state == "InService (prefill 1/1)"


def test_the_addons_probe_tells_unknown_from_absent(env: EnvironmentConfig, aws_credentials: None) -> None:
    import boto3

    eks = boto3.client("eks", region_name="us-west-2")
    probe = addons_probe(eks, env)
    with Stubber(eks) as stub:
        # GIVEN ListAddons throttled, then a 503, then denied
        stub.add_client_error("list_addons", "ThrottlingException", "Rate exceeded", http_status_code=429)
        stub.add_client_error("list_addons", "ServiceUnavailableException", "try later", http_status_code=503)
        stub.add_client_error("list_addons", "AccessDeniedException", "not authorized", http_status_code=403)
        # WHEN polling
        throttled, unavailable = probe(), probe()
        # THEN the transient ones are Unknown and not final ...
        assert throttled.state.startswith("Unknown (ListAddons: ThrottlingException: Rate exceeded (throttled")
        assert unavailable.state == "Unknown (ListAddons: ServiceUnavailableException: try later)"
        assert not (throttled.ready or throttled.failed or unavailable.ready or unavailable.failed)
        # ... and the denial ends the wait, naming what the listing needs
        with pytest.raises(Unobservable, match=r"cannot wait for the add-ons of EKS cluster hpdpd-dev: "
                                               r"ListAddons: AccessDeniedException: .*; "
                                               r"needs eks:ListAddons and eks:DescribeAddon"):
            probe()


def test_the_endpoint_probe_tells_unknown_from_absent(clients: ClientFactory, tmp_path: Path, fake_kube: Any,
                                                      make_endpoint: Callable[..., Any]) -> None:
    sagemaker = clients.client("sagemaker")
    endpoint = make_endpoint(name="llama", sagemaker_endpoint_name="llama-sm")
    complete = _kubectl(fake_kube, {"status": {"state": "DeploymentComplete"}})
    # GIVEN (moto) no SageMaker endpoint yet: not created yet, keep waiting
    absent = endpoint_probe(sagemaker, (endpoint,), complete)()
    assert absent.state == "llama: IEC DeploymentComplete, SageMaker NotFound" and not absent.ready
    # AND the API server does not answer in time: Unknown, keep waiting
    fake_kube.fail(IEC_PATH, delay=1.5)
    seen = endpoint_probe(sagemaker, (make_endpoint(name="llama"),), fake_kube.client(timeout=0.5))()
    assert seen.state.startswith(f"llama: IEC Unknown (GET {IEC_PATH}: timed out") and not (seen.ready or seen.failed)
    # AND RBAC forbids reading the IEC: waiting cannot fix it
    fake_kube.fail(IEC_PATH, 403, 'inferenceendpointconfigs "llama" is forbidden')
    with pytest.raises(Unobservable, match=r"cannot wait for endpoint llama: InferenceEndpointConfig llama: "
                                           r"GET .*: 403 Forbidden: .*; needs get on "
                                           r"inferenceendpointconfigs\.inference\.sagemaker\.aws\.amazon\.com in "
                                           r"namespace default"):
        endpoint_probe(sagemaker, (make_endpoint(name="llama"),), fake_kube.client())()
    del fake_kube.faults[IEC_PATH]
    # AND DescribeEndpoint is denied: waiting cannot fix it either
    with Stubber(sagemaker) as stub:
        stub.add_client_error("describe_endpoint", "AccessDeniedException", "not authorized", http_status_code=400)
        with pytest.raises(Unobservable, match=r"needs sagemaker:DescribeEndpoint \(waiting cannot fix this\)$"):
            endpoint_probe(sagemaker, (endpoint,), complete)()


