"""The global gateway's handlers against botocore's own SageMaker client and model (1.44.8), stubbed with Stubber:
requests and answers that do not match the operations' shapes are rejected by the Stubber itself."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.infra.handlers.global_gateway import index

GW = "arn:aws:sagemaker:us-west-2:111111111111:global-inference-gateway/abcdef012345"
WEST = "arn:aws:sagemaker:us-west-2:111111111111:cluster/west00000001"
EAST = "arn:aws:sagemaker:us-east-1:111111111111:cluster/east00000001"
ROLE = "arn:aws:iam::111111111111:role/hpdpd-global-exec"
MEMBERS = [{"Environment": "west", "Region": "us-west-2", "ClusterName": "hpdpd-west", "Namespace": "llm-serving",
            "Name": "llama-gateway"},
           {"Environment": "east", "Region": "us-east-1", "ClusterName": "hpdpd-east", "Namespace": "llm-serving",
            "Name": "llama-gateway"}]
PROPS = {"ServiceToken": "t", "Name": "llama-global", "Region": "us-west-2", "ExecutionRoleArn": ROLE,
         "Members": MEMBERS, "Routing": {"Weights": {"KVHeadroom": "0.4", "QueueDepth": "0.3"}}}
STACK = "arn:aws:cloudformation:us-west-2:111111111111:stack/hpdpd-global-llama-global/guid"
CREATE = {"RequestType": "Create", "StackId": STACK, "LogicalResourceId": "GatewayResource1", "RequestId": "r1",
          "ResourceProperties": PROPS}


class Clients:
    """One stubbed SageMaker client per Region, as the handler asks for them."""

    def __init__(self) -> None:
        session = botocore.session.get_session()
        self.clients = {r: session.create_client("sagemaker", region_name=r, aws_access_key_id="testing",
                                                 aws_secret_access_key="testing") for r in ("us-west-2", "us-east-1")}
        self.stubs = {r: Stubber(c) for r, c in self.clients.items()}

    def __call__(self, region: str) -> Any:
        return self.clients[region]

    def cluster(self, region: str, name: str, arn: str) -> None:
        self.stubs[region].add_response("describe_cluster", {
            "ClusterArn": arn, "ClusterName": name, "ClusterStatus": "InService", "InstanceGroups": []},
            {"ClusterName": name})

    def both_clusters(self) -> None:
        self.cluster("us-west-2", "hpdpd-west", WEST)
        self.cluster("us-east-1", "hpdpd-east", EAST)


@contextmanager
def stubbed() -> Iterator[Clients]:
    clients = Clients()
    for stub in clients.stubs.values():
        stub.activate()
    yield clients
    for stub in clients.stubs.values():
        stub.assert_no_pending_responses()
        stub.deactivate()


def _gateway(status: str, **extra: Any) -> dict[str, Any]:
    return {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global", "ExecutionRoleArn": ROLE, "Status": status,
            "Routing": {"Weights": {"KVHeadroom": 0.4, "QueueDepth": 0.3}}, **extra}


def _member(cluster: str, status: str = "ACTIVE", **extra: Any) -> dict[str, Any]:
    return {"Name": "llama-gateway", "Namespace": "llm-serving", "ClusterArn": cluster, "Status": status, **extra}


GATEWAYS = [{"Name": "llama-gateway", "Namespace": "llm-serving", "ClusterArn": WEST},
            {"Name": "llama-gateway", "Namespace": "llm-serving", "ClusterArn": EAST}]


def _expect_create(clients: Clients) -> None:
    clients.both_clusters()
    clients.stubs["us-west-2"].add_response(
        "create_global_inference_gateway",
        {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global", "Status": "CREATING"},
        {"Name": "llama-global", "ExecutionRoleArn": ROLE, "Gateways": GATEWAYS,
         "ClientToken": index.client_token(CREATE),
         "Routing": {"Weights": {"KVHeadroom": 0.4, "QueueDepth": 0.3}}})


def test_create_resolves_clusters_and_answers_the_gateway_arn() -> None:
    # GIVEN two members in two Regions WHEN the Create request arrives
    with stubbed() as clients:
        _expect_create(clients)
        result = index.on_event(CREATE, client_for=clients)
    # THEN the gateway is created with both clusters' ARNs, the derived token, and its ARN is the physical id
    assert result == {"PhysicalResourceId": GW}


def test_a_create_retried_after_a_timeout_sends_the_same_client_token() -> None:
    # GIVEN the same event delivered twice (the first invocation timed out before answering)
    retry = {**CREATE, "RequestId": "r1"}
    # THEN both carry one token, valid for the model ([a-zA-Z0-9-]{1,64}), and SageMaker answers with one gateway
    assert index.client_token(retry) == index.client_token(CREATE)
    assert len(index.client_token(CREATE)) <= 64
    with stubbed() as clients:
        _expect_create(clients)
        _expect_create(clients)
        assert index.on_event(CREATE, client_for=clients) == index.on_event(retry, client_for=clients)
    # AND another logical resource (or another name) gets another token, and so does a later create of the same
    # resource (another CloudFormation request): it must not be answered with a gateway deleted meanwhile
    assert index.client_token({**CREATE, "LogicalResourceId": "Other"}) != index.client_token(CREATE)
    assert index.client_token({**CREATE, "RequestId": "r2"}) != index.client_token(CREATE)


def test_a_taken_name_fails_with_the_reason() -> None:
    with stubbed() as clients:
        clients.both_clusters()
        clients.stubs["us-west-2"].add_client_error("create_global_inference_gateway", "ResourceInUse",
                                                    "name already in use")
        with pytest.raises(index.GatewayFailed, match="name is taken.*name already in use"):
            index.on_event(CREATE, client_for=clients)


def test_a_missing_cluster_says_which_environment_to_deploy_first() -> None:
    with stubbed() as clients:
        clients.stubs["us-west-2"].add_client_error("describe_cluster", "ResourceNotFound", "no cluster")
        with pytest.raises(index.GatewayFailed, match="deploy environment west before the global gateway"):
            index.on_event(CREATE, client_for=clients)


def _poll(clients: Clients, event: dict[str, Any], gateway: dict[str, Any], members: list[dict[str, Any]]) -> None:
    clients.stubs["us-west-2"].add_response("describe_global_inference_gateway", gateway, {"Identifier": GW})
    if gateway["Status"] == "ACTIVE":
        clients.stubs["us-west-2"].add_response("list_inference_gateways", {"InferenceGatewaySummaries": members},
                                                {"Identifier": GW})


EVENT = {**CREATE, "PhysicalResourceId": GW}


def test_complete_once_active_with_every_member_active() -> None:
    with stubbed() as clients:
        _poll(clients, EVENT, _gateway("CREATING"), [])
        assert index.is_complete(EVENT, client_for=clients) == {"IsComplete": False}
        _poll(clients, EVENT, _gateway("ACTIVE", EndpointUrl="https://gw.example"), [_member(WEST), _member(EAST)])
        clients.both_clusters()
        result = index.is_complete(EVENT, client_for=clients)
    assert result["IsComplete"] is True
    assert result["Data"]["Arn"] == GW and result["Data"]["EndpointUrl"] == "https://gw.example"


def test_a_failed_gateway_fails_with_sagemakers_reason() -> None:
    with stubbed() as clients:
        _poll(clients, EVENT, _gateway("FAILED", FailureReason="GlobalRoutingInsufficientAZs"), [])
        with pytest.raises(index.GatewayFailed, match="FAILED: GlobalRoutingInsufficientAZs"):
            index.is_complete(EVENT, client_for=clients)


def test_a_failed_member_fails_with_its_reason() -> None:
    with stubbed() as clients:
        _poll(clients, EVENT, _gateway("ACTIVE"), [_member(WEST), _member(EAST, "FAILED", FailureReason="no LB")])
        clients.both_clusters()
        with pytest.raises(index.GatewayFailed, match="member llm-serving/llama-gateway of .*east.* FAILED: no LB"):
            index.is_complete(EVENT, client_for=clients)


def test_update_adds_a_member_then_removes_one_then_completes() -> None:
    # GIVEN the gateway holds west and a member no longer configured, and east is new
    old = "arn:aws:sagemaker:us-west-2:111111111111:cluster/old000000001"
    update = {**EVENT, "RequestType": "Update", "OldResourceProperties": PROPS}
    with stubbed() as clients:
        clients.stubs["us-west-2"].add_response("describe_global_inference_gateway", _gateway("ACTIVE"),
                                                {"Identifier": GW})
        assert index.on_event(update, client_for=clients) == {"PhysicalResourceId": GW}
        # WHEN it polls: first the addition (never zero members: add before remove)
        _poll(clients, update, _gateway("ACTIVE"), [_member(WEST), _member(old)])
        clients.both_clusters()
        clients.stubs["us-west-2"].add_response(
            "add_inference_gateway", {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global",
                                      "Gateway": GATEWAYS[1], "Status": "ADDING"},
            {"Identifier": GW, **GATEWAYS[1]})
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}
        # THEN nothing more while a member is ADDING (the API refuses concurrent operations)
        _poll(clients, update, _gateway("ACTIVE"), [_member(WEST), _member(old), _member(EAST, "ADDING")])
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}
        # THEN the removal of the member no longer configured
        _poll(clients, update, _gateway("ACTIVE"), [_member(WEST), _member(old), _member(EAST)])
        clients.both_clusters()
        clients.stubs["us-west-2"].add_response(
            "remove_inference_gateway", {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global",
                                         "Gateway": {"Name": "llama-gateway", "Namespace": "llm-serving",
                                                     "ClusterArn": old}, "Status": "REMOVING"},
            {"Identifier": GW, "ClusterArn": old, "Namespace": "llm-serving", "Name": "llama-gateway"})
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}


def test_update_of_the_weights_calls_update_and_a_conflict_waits() -> None:
    new = {**PROPS, "Routing": {"Weights": {"KVHeadroom": "0.9"}}}
    update = {**EVENT, "RequestType": "Update", "ResourceProperties": new, "OldResourceProperties": PROPS}
    with stubbed() as clients:
        _poll(clients, update, _gateway("ACTIVE"), [_member(WEST), _member(EAST)])
        clients.both_clusters()
        clients.stubs["us-west-2"].add_client_error("update_global_inference_gateway", "ConflictException", "busy")
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}
        _poll(clients, update, _gateway("ACTIVE"), [_member(WEST), _member(EAST)])
        clients.both_clusters()
        clients.stubs["us-west-2"].add_response(
            "update_global_inference_gateway", {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global",
                                                "Status": "UPDATING"},
            {"Identifier": GW, "Routing": {"Weights": {"KVHeadroom": 0.9}}})
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}


def test_a_new_role_under_the_same_name_is_refused_its_rollback_succeeds_and_a_new_name_creates() -> None:
    # GIVEN a gateway created with ROLE-old, and an update to ROLE
    old_role = {**PROPS, "ExecutionRoleArn": ROLE + "-old"}
    update = {**EVENT, "RequestType": "Update", "OldResourceProperties": old_role}
    with stubbed() as clients:
        clients.stubs["us-west-2"].add_response(
            "describe_global_inference_gateway", _gateway("ACTIVE", ExecutionRoleArn=ROLE + "-old"), {"Identifier": GW})
        # THEN the update is refused, naming the role the gateway has
        with pytest.raises(index.GatewayFailed, match="cannot change after it is created .*it has .*-old"):
            index.on_event(update, client_for=clients)
    # WHEN CloudFormation rolls back: an Update with the properties swapped, back to the gateway's own role
    rollback = {**EVENT, "RequestType": "Update", "ResourceProperties": old_role, "OldResourceProperties": PROPS}
    with stubbed() as clients:
        clients.stubs["us-west-2"].add_response(
            "describe_global_inference_gateway", _gateway("ACTIVE", ExecutionRoleArn=ROLE + "-old"), {"Identifier": GW})
        # THEN it succeeds (no UPDATE_ROLLBACK_FAILED)
        assert index.on_event(rollback, client_for=clients) == {"PhysicalResourceId": GW}
    renamed = {**EVENT, "RequestType": "Update", "OldResourceProperties": {**PROPS, "Name": "old-name"}}
    with stubbed() as clients:
        _expect_create(clients)
        assert index.on_event(renamed, client_for=clients) == {"PhysicalResourceId": GW}


def test_delete_then_wait_until_not_found() -> None:
    delete = {**EVENT, "RequestType": "Delete"}
    with stubbed() as clients:
        west = clients.stubs["us-west-2"]
        west.add_response("delete_global_inference_gateway", {"Arn": GW, "Id": "abcdef012345"}, {"Identifier": GW})
        assert index.on_event(delete, client_for=clients) == {"PhysicalResourceId": GW}
        west.add_response("describe_global_inference_gateway", _gateway("DELETING"), {"Identifier": GW})
        assert index.is_complete(delete, client_for=clients) == {"IsComplete": False}
        west.add_client_error("describe_global_inference_gateway", "ResourceNotFound", "gone")
        assert index.is_complete(delete, client_for=clients) == {"IsComplete": True}


def test_delete_of_a_gateway_never_created_calls_nothing() -> None:
    # GIVEN a create that failed before SageMaker made anything (the physical id is not a gateway ARN)
    delete = {**EVENT, "RequestType": "Delete", "PhysicalResourceId": "r1"}
    with stubbed() as clients:
        assert index.on_event(delete, client_for=clients) == {"PhysicalResourceId": "r1"}
        assert index.is_complete(delete, client_for=clients) == {"IsComplete": True}


def test_delete_retries_after_a_conflict() -> None:
    delete = {**EVENT, "RequestType": "Delete"}
    with stubbed() as clients:
        west = clients.stubs["us-west-2"]
        west.add_client_error("delete_global_inference_gateway", "ConflictException", "busy")
        index.on_event(delete, client_for=clients)
        west.add_response("describe_global_inference_gateway", _gateway("ACTIVE"), {"Identifier": GW})
        west.add_response("delete_global_inference_gateway", {"Arn": GW, "Id": "abcdef012345"}, {"Identifier": GW})
        assert index.is_complete(delete, client_for=clients) == {"IsComplete": False}


def test_the_model_knows_every_operation_and_status_the_handler_uses() -> None:
    client = Clients()("us-west-2")
    index.require_api(client)
    model = client.meta.service_model
    statuses = model.shape_for("GlobalInferenceGatewayStatus").enum
    assert {index.ACTIVE, index.FAILED, index.DELETING} <= set(statuses)
    assert set(index.BUSY_MEMBER) <= set(model.shape_for("GlobalInferenceGatewayMemberStatus").enum)


def test_a_failed_member_no_longer_configured_is_removed() -> None:
    # GIVEN east FAILED in SageMaker and removed from the configuration
    update = {**EVENT, "RequestType": "Update", "ResourceProperties": {**PROPS, "Members": MEMBERS[:1]},
              "OldResourceProperties": PROPS}
    with stubbed() as clients:
        _poll(clients, update, _gateway("ACTIVE"), [_member(WEST), _member(EAST, "FAILED", FailureReason="no LB")])
        clients.cluster("us-west-2", "hpdpd-west", WEST)
        # THEN the poll removes it instead of failing on it
        clients.stubs["us-west-2"].add_response(
            "remove_inference_gateway", {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global",
                                         "Gateway": GATEWAYS[1], "Status": "REMOVING"},
            {"Identifier": GW, **{k: GATEWAYS[1][k] for k in ("ClusterArn", "Namespace", "Name")}})
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}


def test_a_full_gateway_makes_room_before_it_adds() -> None:
    # GIVEN ten members (the most a gateway holds), the configuration swapping the tenth for another cluster
    arn = "arn:aws:sagemaker:us-west-2:111111111111:cluster/cluster{:05d}".format
    ten = [{**MEMBERS[0], "Environment": f"e{i}", "ClusterName": f"c{i}"} for i in range(10)]
    swapped = [*ten[:9], {**ten[9], "Environment": "e10", "ClusterName": "c10"}]
    update = {**EVENT, "RequestType": "Update", "ResourceProperties": {**PROPS, "Members": swapped},
              "OldResourceProperties": {**PROPS, "Members": ten}}
    with stubbed() as clients:
        _poll(clients, update, _gateway("ACTIVE"), [_member(arn(i)) for i in range(10)])
        for i, member in enumerate(swapped):
            clients.cluster("us-west-2", member["ClusterName"], arn(i if i < 9 else 10))
        # THEN the poll removes the tenth first (an eleventh member would be refused)
        clients.stubs["us-west-2"].add_response(
            "remove_inference_gateway", {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global",
                                         "Gateway": {**GATEWAYS[0], "ClusterArn": arn(9)}, "Status": "REMOVING"},
            {"Identifier": GW, "ClusterArn": arn(9), "Namespace": "llm-serving", "Name": "llama-gateway"})
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}


def _single(value: float) -> float:
    """``value`` as a single-precision float reads back (GlobalInferenceGatewayRoutingWeight is a ``float`` shape)."""
    return struct.unpack("f", struct.pack("f", value))[0]


FOUR = {"KVHeadroom": "0.4", "QueueDepth": "0.3", "RegionProximity": "0.3", "ErrorRate": "0.0"}


def test_weights_read_back_in_another_representation_are_not_sent_again() -> None:
    # GIVEN the configured weights, and the gateway answering them rounded to single precision, as 0.1 + 0.2, and as
    # the integer 0 (all four are the same weights as configured)
    props = {**PROPS, "Routing": {"Weights": FOUR}}
    update = {**EVENT, "RequestType": "Update", "ResourceProperties": props, "OldResourceProperties": props}
    answered = {"KVHeadroom": _single(0.4), "QueueDepth": _single(0.3), "RegionProximity": 0.1 + 0.2, "ErrorRate": 0}
    assert answered["KVHeadroom"] != 0.4 and answered["RegionProximity"] != 0.3  # what == got wrong
    with stubbed() as clients:
        _poll(clients, update, _gateway("ACTIVE", Routing={"Weights": answered}), [_member(WEST), _member(EAST)])
        clients.both_clusters()
        # WHEN it polls THEN it completes without UpdateGlobalInferenceGateway (the Stubber refuses any call not
        # queued): an update here would be sent again on every poll until the framework's timeout
        result = index.is_complete(update, client_for=clients)
    assert result["IsComplete"] is True


def test_a_weight_changed_by_a_thousandth_is_still_sent() -> None:
    # GIVEN the gateway at KVHeadroom 0.4 (single precision) and the configuration at 0.401
    props = {**PROPS, "Routing": {"Weights": {**FOUR, "KVHeadroom": "0.401", "RegionProximity": "0.299"}}}
    update = {**EVENT, "RequestType": "Update", "ResourceProperties": props, "OldResourceProperties": PROPS}
    answered = {"KVHeadroom": _single(0.4), "QueueDepth": _single(0.3), "RegionProximity": _single(0.3),
                "ErrorRate": 0.0}
    with stubbed() as clients:
        _poll(clients, update, _gateway("ACTIVE", Routing={"Weights": answered}), [_member(WEST), _member(EAST)])
        clients.both_clusters()
        # THEN the routing is updated with the configured weights
        clients.stubs["us-west-2"].add_response(
            "update_global_inference_gateway", {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global",
                                                "Status": "UPDATING"},
            {"Identifier": GW, "Routing": {"Weights": {"KVHeadroom": 0.401, "QueueDepth": 0.3,
                                                       "RegionProximity": 0.299, "ErrorRate": 0.0}}})
        assert index.is_complete(update, client_for=clients) == {"IsComplete": False}


@pytest.mark.parametrize(("have", "want", "same"), [
    (1, 1.0, True), (0, 0.0, True), (_single(0.1), 0.1, True), (0.1 + 0.2, 0.3, True),
    (0.4, 0.4 + 2 * index.WEIGHT_TOLERANCE, False), (None, 0.0, False), ("0.4", 0.4, False), (True, 1.0, False)])
def test_a_weight_is_the_same_within_the_tolerance_only(have: Any, want: float, same: bool) -> None:
    # GIVEN a weight as the API may answer it (absent: None) THEN it is the wanted one only within the tolerance
    assert index.same_weight(have, want) is same


def test_the_tolerance_is_within_what_the_model_allows() -> None:
    # GIVEN the model's weight shape THEN it is a float in [0, 1] (so single precision, not an integer), and the
    # tolerance is far below the 0.001 the API allows on the weights' sum
    shape = Clients()("us-west-2").meta.service_model.shape_for("GlobalInferenceGatewayRoutingWeight")
    assert shape.type_name == "float" and (shape.metadata["min"], shape.metadata["max"]) == (0, 1)
    assert 2 ** -25 < index.WEIGHT_TOLERANCE < 0.001 / 100


def test_the_resources_tags_are_sent_at_create() -> None:
    # GIVEN the resource's Tags, as the construct renders them and CloudFormation passes them
    tags = [{"Key": "cost-center", "Value": "ml"}, {"Key": "project", "Value": "hyperpod-dpd"}]
    create = {**CREATE, "ResourceProperties": {**PROPS, "Tags": tags}}
    with stubbed() as clients:
        clients.both_clusters()
        # THEN CreateGlobalInferenceGateway carries them (a TagList the Stubber checks against the model)
        clients.stubs["us-west-2"].add_response(
            "create_global_inference_gateway",
            {"Arn": GW, "Id": "abcdef012345", "Name": "llama-global", "Status": "CREATING"},
            {"Name": "llama-global", "ExecutionRoleArn": ROLE, "Gateways": GATEWAYS,
             "ClientToken": index.client_token(create), "Tags": tags,
             "Routing": {"Weights": {"KVHeadroom": 0.4, "QueueDepth": 0.3}}})
        assert index.on_event(create, client_for=clients) == {"PhysicalResourceId": GW}
    model = Clients()("us-west-2").meta.service_model
    assert "Tags" in model.operation_model("CreateGlobalInferenceGateway").input_shape.members
