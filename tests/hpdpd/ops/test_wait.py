"""Waiting: exponential back-off to a deadline, terminal failures with AWS's message, and the three probes."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.addons import expected_addons
from hyperpod_dpd.ops.kube import Kubectl
from hyperpod_dpd.ops.wait import Backoff, Observation, addons_probe, cluster_probe, endpoint_probe, wait_for


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


def test_a_terminal_failure_ends_the_wait_with_its_message() -> None:
    time = FakeTime()
    probe = scripted(Observation(state="Creating"), Observation(state="Failed", failed=True, message="no capacity"))
    result = wait_for(probe, target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep)
    assert result.outcome == "failed" and result.message == "no capacity" and result.polls == 2


def test_throttling_only_delays_the_next_poll_and_other_errors_end_the_wait() -> None:
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "DescribeCluster")
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeCluster")
    time = FakeTime()
    result = wait_for(scripted(throttled, Observation(state="InService", ready=True)), target="cluster",
                      timeout_seconds=600, clock=time.clock, sleep=time.sleep)
    assert result.ok and result.polls == 2
    with pytest.raises(ClientError):
        wait_for(scripted(denied), target="cluster", timeout_seconds=600, clock=time.clock, sleep=time.sleep)


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


def _kubectl(tmp_path: Path, document: dict[str, Any]) -> Kubectl:
    script = tmp_path / "kubectl"
    (tmp_path / "iec.json").write_text(json.dumps(document))
    script.write_text(f"#!/bin/sh\ncat '{tmp_path / 'iec.json'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return Kubectl(kubeconfig=str(tmp_path / "kubeconfig"), binary=str(script))


def test_the_endpoint_probe(clients: ClientFactory, tmp_path: Path, make_endpoint: Callable[..., Any]) -> None:
    sagemaker = clients.client("sagemaker")
    endpoint = make_endpoint(name="llama", resource_name="llama-1a2b3c", sagemaker_endpoint_name="llama-sm")
    # GIVEN the IEC is complete but its SageMaker endpoint failed
    kubectl = _kubectl(tmp_path, {"status": {"state": "DeploymentComplete", "conditions": [
        {"message": "DPD prefill and decode deployments are ready"}]}})
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_endpoint", {
            "EndpointName": "llama-sm", "EndpointArn": "arn:aws:sagemaker:us-west-2:123456789012:endpoint/llama-sm",
            "EndpointStatus": "Failed", "FailureReason": "Image pull failed.", "CreationTime": 0,
            "LastModifiedTime": 0}, {"EndpointName": "llama-sm"})
        seen = endpoint_probe(sagemaker, (endpoint,), kubectl)()
    # THEN the wait fails with SageMaker's reason
    assert seen.failed and seen.state == "llama: IEC DeploymentComplete, SageMaker Failed"
    assert seen.message == "SageMaker endpoint llama-sm: Failed: Image pull failed."
    # AND an IEC whose deployment failed is terminal too, with its condition message
    failed = _kubectl(tmp_path, {"status": {"state": "DeploymentFailed", "conditions": [{"message": "OOMKilled"}]}})
    seen = endpoint_probe(sagemaker, (make_endpoint(name="llama"),), failed)()
    assert seen.failed and seen.message == "IEC llama: DeploymentFailed: OOMKilled"


def test_an_endpoint_that_cannot_be_observed_is_refused(make_endpoint: Callable[..., Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(HpdpdError, match="cannot observe endpoint.*llama.*unknown \\(no kubeconfig\\)"):
        endpoint_probe(object(), (make_endpoint(name="llama"),), Kubectl(kubeconfig=None, binary=None))
    with pytest.raises(HpdpdError, match="declares no endpoints"):
        endpoint_probe(object(), (), Kubectl(kubeconfig=None, binary=None))
