"""The autoscaling waiter's Lambda handlers against botocore's own SageMaker client and model (1.44.8), stubbed with
botocore's Stubber: responses that do not match ``DescribeCluster``'s output shape are rejected by the Stubber itself."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import botocore.session
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.infra.handlers.autoscaling_ready import index

ARN = "arn:aws:sagemaker:us-west-2:111111111111:cluster/abcdef012345"
EVENT = {"RequestType": "Create", "ResourceProperties": {"ServiceToken": "token", "ClusterArn": ARN,
                                                          "AutoScaling": {"Mode": "Enable", "AutoScalerType": "Karpenter"}}}


def _client(session: botocore.session.Session | None = None) -> Any:
    session = session or botocore.session.get_session()
    return session.create_client("sagemaker", region_name="us-west-2", aws_access_key_id="testing",
                                 aws_secret_access_key="testing")


def _described(status: str, autoscaling: dict[str, str] | None, message: str | None = None) -> dict[str, Any]:
    """A DescribeCluster answer with the members the model requires (ClusterArn, ClusterStatus, InstanceGroups)."""
    answer: dict[str, Any] = {"ClusterArn": ARN, "ClusterName": "hpdpd-dev", "ClusterStatus": status,
                              "InstanceGroups": [{"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge",
                                                  "CurrentCount": 0, "TargetCount": 0}]}
    if message is not None:
        answer["FailureMessage"] = message
    if autoscaling is not None:
        answer["AutoScaling"] = autoscaling
    return answer


def _poll(answer: dict[str, Any], event: dict[str, Any] = EVENT) -> dict[str, Any]:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("describe_cluster", answer, {"ClusterName": ARN})
        result = index.is_complete(event, None, client=client)
        stub.assert_no_pending_responses()
    return result


def test_the_model_has_the_fields_and_values_the_handler_reads() -> None:
    # GIVEN botocore's SageMaker model, the one the Stubber validates against
    shape = _client().meta.service_model.operation_model("DescribeCluster").output_shape
    autoscaling = shape.members["AutoScaling"]
    # THEN the statuses the handler compares with are values of the model's enums
    assert {index.IN_SERVICE, index.FAILED, index.DELETING} <= set(shape.members["ClusterStatus"].enum)
    assert set(autoscaling.members["Status"].enum) == {"InService", "Failed", "Creating", "Deleting"}
    assert index.ENABLE in autoscaling.members["Mode"].enum and "FailureMessage" in autoscaling.members


def test_both_in_service_completes() -> None:
    # GIVEN the cluster InService and its Karpenter autoscaling InService
    answer = _described("InService", {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "InService"})
    # THEN the wait is over
    assert _poll(answer) == {"IsComplete": True}


@pytest.mark.parametrize(("cluster", "autoscaling"), [
    ("InService", {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "Creating"}),
    ("Updating", {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "InService"}),
    ("Creating", {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "Creating"}),
    ("SystemUpdating", {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "InService"}),
    # autoscaling not reported yet although the template enables it, or still the old Disable
    ("InService", None),
    ("InService", {"Mode": "Disable", "AutoScalerType": "Karpenter", "Status": "InService"}),
])
def test_anything_short_of_both_in_service_keeps_waiting(cluster: str, autoscaling: dict[str, str] | None) -> None:
    # WHEN DescribeCluster shows the cluster or its autoscaling on the way
    # THEN the waiter polls again instead of letting the Karpenter manifests go
    assert _poll(_described(cluster, autoscaling)) == {"IsComplete": False}


def test_a_failed_cluster_fails_the_request_with_hyperpods_message() -> None:
    # GIVEN a cluster that failed, with HyperPod's reason
    answer = _described("Failed", {"Mode": "Enable", "Status": "Creating"}, message="Insufficient capacity.")
    # THEN the CloudFormation request fails with that reason (the framework reports the exception's message)
    with pytest.raises(index.NotReady, match="hpdpd-dev is Failed: Insufficient capacity."):
        _poll(answer)


def test_failed_autoscaling_fails_the_request_with_its_own_message() -> None:
    # GIVEN a cluster InService whose autoscaling failed
    answer = _described("InService", {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "Failed",
                                      "FailureMessage": "ClusterRole cannot be assumed by hyperpod.sagemaker.amazonaws.com"})
    # THEN the request fails with the autoscaling's own FailureMessage
    with pytest.raises(index.NotReady, match="autoscaling of HyperPod cluster hpdpd-dev is Failed: ClusterRole cannot"):
        _poll(answer)


def test_a_deleting_cluster_fails_the_request() -> None:
    # GIVEN a cluster being deleted THEN waiting is pointless: the request fails
    with pytest.raises(index.NotReady, match="is Deleting"):
        _poll(_described("Deleting", {"Mode": "Enable", "Status": "InService"}))


def test_an_unknown_cluster_fails_the_request_with_the_service_error() -> None:
    # GIVEN SageMaker answering ResourceNotFound THEN the service's error fails the request
    client = _client()
    with Stubber(client) as stub:
        stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster not found", http_status_code=400,
                              expected_params={"ClusterName": ARN})
        with pytest.raises(client.exceptions.ResourceNotFound):
            index.is_complete(EVENT, None, client=client)


def test_a_deletion_completes_without_calling_sagemaker() -> None:
    # GIVEN a Delete request WHEN it is polled THEN it completes at once (the cluster may already be gone)
    client = _client()
    with Stubber(client):  # no response queued: any call would raise
        assert index.is_complete({**EVENT, "RequestType": "Delete", "PhysicalResourceId": ARN}, None,
                                 client=client) == {"IsComplete": True}


def test_the_physical_id_is_the_cluster_arn_and_a_deletion_keeps_it() -> None:
    # GIVEN Create, Update and Delete requests THEN the physical id is the cluster ARN, kept on deletion, and a
    # Create or Update is stamped with its start (the framework passes it on to every is_complete event)
    started = {index.STARTED: 1767225600}
    assert index.on_event(EVENT, now=lambda: 1767225600.7) == {"PhysicalResourceId": ARN, **started}
    assert index.on_event({**EVENT, "RequestType": "Update", "PhysicalResourceId": "old"},
                          now=lambda: 1767225600) == {"PhysicalResourceId": ARN, **started}
    assert index.on_event({"RequestType": "Delete", "PhysicalResourceId": "old", "ResourceProperties": {}}) == {
        "PhysicalResourceId": "old"}


NOT_READY = {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "Creating"}


def _poll_at(seconds: float, event: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """One poll of a cluster whose autoscaling is still Creating, ``seconds`` after 1767225600."""
    monkeypatch.setenv(index.GIVE_UP_ENV, "3180")
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("describe_cluster", _described("InService", NOT_READY), {"ClusterName": ARN})
        return index.is_complete(event, None, client=client, now=lambda: 1767225600 + seconds)


def test_a_wait_past_its_limit_fails_with_the_last_state_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a request started 53 minutes ago, the limit the construct sets, and autoscaling still Creating
    event = {**EVENT, index.STARTED: 1767225600}
    # THEN the request fails with what DescribeCluster last showed, not the framework's bare "Operation timed out"
    with pytest.raises(index.NotReady, match=r"^HyperPod cluster hpdpd-dev and its autoscaling are not both "
                       r"InService after 53 minutes; DescribeCluster last showed ClusterStatus InService, "
                       r"AutoScaling Mode Enable, Status Creating$"):
        _poll_at(3180, event, monkeypatch)


def test_a_wait_within_its_limit_polls_again_and_logs_what_it_saw(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the same cluster one minute before the limit
    result = _poll_at(3120, {**EVENT, index.STARTED: 1767225600}, monkeypatch)
    # THEN it waits, and its log says for what
    assert result == {"IsComplete": False}
    assert capsys.readouterr().out == ("HyperPod cluster hpdpd-dev not ready yet: ClusterStatus InService, "
                                       "AutoScaling Mode Enable, Status Creating\n")


def test_an_event_without_its_start_keeps_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an is_complete event without the stamp (a framework that does not pass on_event's answer on)
    # THEN the waiter never gives up on its own: the framework's timeout still ends it
    assert _poll_at(10 * 3180, dict(EVENT), monkeypatch) == {"IsComplete": False}


def test_an_sdk_without_the_autoscaling_field_fails_at_once(tmp_path: Path) -> None:
    # GIVEN a botocore whose SageMaker model predates DescribeCluster's AutoScaling (today's model with it removed)
    source = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
    model = json.loads(gzip.decompress(source.read_bytes()))
    del model["shapes"]["DescribeClusterResponse"]["members"]["AutoScaling"]
    target = tmp_path / "sagemaker" / "2017-07-24"
    target.mkdir(parents=True)
    (target / "service-2.json").write_text(json.dumps(model))
    session = botocore.session.get_session()
    session.get_component("data_loader").search_paths.insert(0, str(tmp_path))
    client = _client(session)
    # THEN the waiter says so instead of waiting for a field its SDK would drop
    with Stubber(client), pytest.raises(index.NotReady, match="does not know DescribeCluster's AutoScaling field"):
        index.is_complete(EVENT, None, client=client)
