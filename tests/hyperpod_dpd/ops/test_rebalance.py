"""The plan, the move and the wait of ``hpdpd rebalance``, against botocore's Stubber with SageMaker's real shapes.

moto 5 has no ``MoveClusterNodes`` (and its ``DescribeCluster`` carries no ``Orchestrator`` or
``NodeProvisioningMode``), so the cluster's answers are stubbed: botocore validates every request against the
operation's input shape, and every stubbed answer against its output shape. The checks role is synthesized once for
this module and evaluated offline: it may read what the dry run reads, never make the move.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.rebalance import config_problems, plan_rebalance, resolve_group
from hyperpod_dpd.ops.rebalance_live import (
    LiveCluster,
    client_token,
    gpu_pods_by_instance,
    move,
    move_probe,
    move_request,
    read_cluster,
)
from hyperpod_dpd.ops.wait import Backoff, wait_for
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, REGION
from tests.hyperpod_dpd.ops.conftest import ROOT
from tests.iam_eval import Deployment, Request, role_policies

CLUSTER_ARN = f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:cluster/0a1b2c3d4e5f"
EKS_ARN = f"arn:aws:eks:{REGION}:{MOTO_ACCOUNT}:cluster/hpdpd-dev"
LAUNCHED = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def node_id(group: str, index: int) -> str:
    """A valid EC2 instance id (ClusterNodeId: ``i-[a-f0-9]{8}(?:[a-f0-9]{9})?``), one per group and index."""
    return f"i-0{'a' if group == 'prefill' else 'd'}{index:015x}"


def describe_answer(counts: dict[str, int], *, status: str = "InService", mode: str | None = "Continuous",
                    **group_fields: dict[str, Any]) -> dict[str, Any]:
    """``DescribeCluster`` as SageMaker answers it, with ``group_fields[name]`` merged into that group."""
    groups = [{"InstanceGroupName": "system", "InstanceType": "ml.m7i.2xlarge", "CurrentCount": 2, "TargetCount": 2,
               "Status": "InService", "ThreadsPerCore": 1}]
    groups += [{"InstanceGroupName": name, "InstanceType": "ml.p5.48xlarge", "CurrentCount": count,
                "TargetCount": count, "Status": "InService", "ThreadsPerCore": 1, **group_fields.get(name, {})}
               for name, count in counts.items()]
    answer: dict[str, Any] = {"ClusterArn": CLUSTER_ARN, "ClusterName": "hpdpd-dev", "ClusterStatus": status,
                              "InstanceGroups": groups, "Orchestrator": {"Eks": {"ClusterArn": EKS_ARN}}}
    if mode:
        answer["NodeProvisioningMode"] = mode
    return answer


def nodes_answer(counts: dict[str, int], *, statuses: dict[str, str] | None = None,
                 moved: dict[str, str] | None = None) -> dict[str, Any]:
    """``ListClusterNodes``: ``counts`` nodes per group, Running unless ``statuses`` says otherwise; ``moved`` puts a
    node in another group."""
    summaries = []
    for group, count in counts.items():
        for index in range(count):
            instance = node_id(group, index)
            summaries.append({"InstanceGroupName": (moved or {}).get(instance, group), "InstanceId": instance,
                              "InstanceType": "ml.p5.48xlarge", "LaunchTime": LAUNCHED,
                              "InstanceStatus": {"Status": (statuses or {}).get(instance, "Running")}})
    return {"ClusterNodeSummaries": summaries}


def environment(base_configs: dict[str, dict[str, Any]], *, prefill: int, decode: int, prefill_replicas: int = 1,
                mutate: Callable[[dict[str, Any]], None] | None = None) -> EnvironmentConfig:
    """The fixture dev environment (one endpoint of 8-GPU pods on ml.p5.48xlarge) with the given group counts."""
    data = copy.deepcopy(base_configs["dev"])
    data["account"] = MOTO_ACCOUNT
    for group in data["hyperpod"]["instance_groups"]:
        group["count"] = {"prefill": prefill, "decode": decode}.get(group["name"], group["count"])
    data["endpoints"][0]["prefill"]["replicas"] = prefill_replicas
    if mutate:
        mutate(data)
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)


@pytest.fixture
def sagemaker(clients: ClientFactory) -> Iterator[Stubber]:
    with Stubber(clients.client("sagemaker")) as stub:
        yield stub
        stub.assert_no_pending_responses()


def live(stub: Stubber, clients: ClientFactory, counts: dict[str, int], **kwargs: Any) -> LiveCluster:
    """Read the cluster through the stubbed answers (``describe`` keyword arguments go to :func:`describe_answer`)."""
    statuses = kwargs.pop("statuses", None)
    stub.add_response("describe_cluster", describe_answer(counts, **kwargs), {"ClusterName": "hpdpd-dev"})
    stub.add_response("list_cluster_nodes", nodes_answer(counts, statuses=statuses), {"ClusterName": "hpdpd-dev"})
    cluster = read_cluster(clients.client("sagemaker"), "hpdpd-dev")
    assert cluster is not None
    return cluster


def plan_for(env: EnvironmentConfig, cluster: LiveCluster, *, source: str = "prefill", target: str = "decode",
             count: int = 1, gpus: dict[str, int | None] | None = None) -> Any:
    return plan_rebalance(env, cluster, source=resolve_group(env, source, None, option="--from-group"),
                          target=resolve_group(env, target, None, option="--to-group"), count=count, gpus_in_use=gpus)


# ---- the plan ------------------------------------------------------------------------------------------------------


def test_a_move_that_keeps_every_replica_is_planned_with_the_config_change(
        sagemaker: Stubber, clients: ClientFactory, base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN three prefill nodes and one decode node, an endpoint of one prefill and one decode replica (8 GPUs each)
    env = environment(base_configs, prefill=3, decode=1)
    cluster = live(sagemaker, clients, {"prefill": 3, "decode": 1})
    # WHEN one node is planned from prefill to decode
    plan = plan_for(env, cluster)
    # THEN it is not refused; the node is the first by instance id (AWS alone does not tell which nodes are idle)
    assert plan.refusals == ()
    assert plan.node_ids == (node_id("prefill", 0),) and plan.nodes[0].why == "pods not known"
    assert "AWS alone does not say which nodes run endpoint pods" in plan.chosen_by
    # AND the counts and the config lines to commit follow the move (the groups are instance_groups[1] and [2])
    assert [(c.group, c.before, c.after) for c in plan.changes] == [("prefill", 3, 2), ("decode", 1, 2)]
    assert [c.line() for c in plan.changes] == [
        "hyperpod.instance_groups[1].count: 3 -> 2   # instance group 'prefill'",
        "hyperpod.instance_groups[2].count: 1 -> 2   # instance group 'decode'"]
    assert any("EBS volumes" in note for note in plan.notes)


def test_a_move_that_strands_an_endpoint_is_refused(sagemaker: Stubber, clients: ClientFactory,
                                                    base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN two prefill nodes that hold the endpoint's two prefill replicas of 8 GPUs
    env = environment(base_configs, prefill=2, decode=1, prefill_replicas=2)
    cluster = live(sagemaker, clients, {"prefill": 2, "decode": 1})
    # WHEN one of them is planned to move to decode
    plan = plan_for(env, cluster)
    # THEN the move is refused, naming the endpoint's demand
    assert plan.refused
    assert any("would keep 1 node(s) (8 GPUs), but the endpoints on it need 2 (llama-3-3-70b prefill 2 x 8" in r
               for r in plan.refusals), plan.refusals


def test_a_move_that_breaks_the_ratio_bounds_is_refused(sagemaker: Stubber, clients: ClientFactory,
                                                       base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN two prefill and two decode nodes under the default ratio bounds (1 to 4 prefill per decode)
    env = environment(base_configs, prefill=2, decode=2)
    cluster = live(sagemaker, clients, {"prefill": 2, "decode": 2})
    # WHEN a prefill node is planned to decode (1 prefill per 3 decode)
    plan = plan_for(env, cluster)
    # THEN it is refused for the ratio alone
    assert plan.refusals == ("1 prefill node(s) per 3 decode node(s) (ratio 0.333333) is outside the ratio bounds of "
                             "llama-3-3-70b (1 to 4 prefill per decode; endpoints[].ratio): the nodes beyond it would "
                             "idle",)


def test_a_move_toward_the_ratio_bounds_is_allowed(sagemaker: Stubber, clients: ClientFactory,
                                                   base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN six prefill nodes per decode node, beyond the endpoint's ratio bound of 4 (set for it)
    env = environment(base_configs, prefill=6, decode=1,
                      mutate=lambda d: d["endpoints"][0].__setitem__("ratio", {"min": 1, "max": 2}))
    cluster = live(sagemaker, clients, {"prefill": 6, "decode": 1})
    # WHEN one prefill node moves to decode: 5 per 2, still above 2 but closer
    plan = plan_for(env, cluster)
    # THEN the ratio does not refuse it
    assert plan.refusals == ()


def test_the_live_cluster_must_allow_the_move(sagemaker: Stubber, clients: ClientFactory,
                                              base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN a cluster that is Updating, without continuous provisioning, whose groups differ in subnets and threads,
    # whose prefill group is scaling, and whose prefill nodes are not Running (one of them moving)
    env = environment(base_configs, prefill=2, decode=1)
    cluster = live(sagemaker, clients, {"prefill": 2, "decode": 1}, status="Updating", mode=None,
                   statuses={node_id("prefill", 0): "DetachInProgress", node_id("prefill", 1): "Pending"},
                   prefill={"ActiveOperations": {"Scaling": 1}},
                   decode={"OverrideVpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-0b"]},
                           "ThreadsPerCore": 2})
    # WHEN a move is planned
    plan = plan_for(env, cluster)
    # THEN each requirement of MoveClusterNodes is a reason of its own
    text = "\n".join(plan.refusals)
    assert "cluster hpdpd-dev is Updating; MoveClusterNodes needs InService" in text
    assert "reports NodeProvisioningMode none; MoveClusterNodes needs Continuous" in text
    assert "differ in ThreadsPerCore (1 and 2)" in text
    assert "use different subnets (OverrideVpcConfig)" in text
    assert "instance group 'prefill' is scaling (2 of 2 nodes; Scaling); wait until it settles" in text
    assert f"a move is under way ({node_id('prefill', 0)})" in text
    assert "instance group 'prefill' has 0 Running node(s), 1 to move" in text


def test_config_drift_and_min_count_refuse_the_move(sagemaker: Stubber, clients: ClientFactory,
                                                    base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN dev.yaml says 3 prefill nodes with min_count 3, the cluster runs 3 prefill and 2 decode (decode drifted)
    def mutate(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"][1]["min_count"] = 3

    env = environment(base_configs, prefill=3, decode=1, mutate=mutate)
    cluster = live(sagemaker, clients, {"prefill": 3, "decode": 2})
    # WHEN one prefill node is planned to decode
    plan = plan_for(env, cluster)
    # THEN the drift and the minimum are both named
    assert ("dev.yaml says instance group 'decode' has count 1, the cluster has 2: deploy or commit the live count "
            "first (the config change would be wrong)") in plan.refusals
    assert "instance group 'prefill' would keep 2 node(s), below its min_count 3 in dev.yaml: lower min_count first" \
        in plan.refusals


def test_groups_of_different_instance_types_are_refused(sagemaker: Stubber, clients: ClientFactory,
                                                        base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN a decode group of ml.p5en.48xlarge next to ml.p5.48xlarge prefill (the endpoint on prefill alone)
    def mutate(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"][2]["instance_type"] = "ml.p5en.48xlarge"
        data["endpoints"] = []

    env = environment(base_configs, prefill=2, decode=1, mutate=mutate)
    cluster = live(sagemaker, clients, {"prefill": 2, "decode": 1}, decode={"InstanceType": "ml.p5en.48xlarge"})
    # WHEN a move is planned
    plan = plan_for(env, cluster)
    # THEN the type mismatch (in the config and in the cluster) refuses it
    assert any(r.startswith("the groups differ in instance type (ml.p5.48xlarge and ml.p5en.48xlarge)")
               for r in plan.refusals)
    assert any("in the cluster the groups differ in instance type" in r for r in plan.refusals)


def test_idle_nodes_are_chosen_first(sagemaker: Stubber, clients: ClientFactory,
                                     base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN three prefill nodes: the first runs an 8-GPU pod, the second's pods are not known, the third runs none
    env = environment(base_configs, prefill=3, decode=1)
    cluster = live(sagemaker, clients, {"prefill": 3, "decode": 1})
    first, second, third = (node_id("prefill", i) for i in range(3))
    gpus = gpu_pods_by_instance(cluster.nodes, [f"hyperpod-{first}", f"hyperpod-{third}"],
                                {f"hyperpod-{first}": 8})
    # WHEN two nodes are planned (1 prefill replica still fits the one left)
    plan = plan_for(env, cluster, count=2, gpus=gpus)
    # THEN the idle node goes first, then the unknown one; the busy one stays
    assert plan.node_ids == (third, second)
    assert [n.why for n in plan.nodes] == ["runs no GPU pod", "pods not known"]
    assert gpus[first] == 8 and gpus[second] is None


def test_an_ambiguous_role_needs_a_group_name(base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN two decode groups, none named by the endpoint's decode role
    def mutate(data: dict[str, Any]) -> None:
        groups = data["hyperpod"]["instance_groups"]
        groups.append({**copy.deepcopy(groups[2]), "name": "decode-b"})
        data["endpoints"][0]["decode"].pop("instance_group")

    env = environment(base_configs, prefill=1, decode=1, mutate=mutate)
    # WHEN the decode group is resolved without --to-group
    with pytest.raises(HpdpdError) as raised:
        resolve_group(env, "decode", None, option="--to-group")
    # THEN one line asks for it; with it, the named group is used
    assert str(raised.value) == ("dev.yaml has several decode groups (decode, decode-b) and the endpoints do not name "
                                 "exactly one: pass --to-group NAME")
    assert resolve_group(env, "decode", "decode-b", option="--to-group").name == "decode-b"


# ---- the move and its wait -----------------------------------------------------------------------------------------


def test_the_move_names_the_nodes_and_a_deterministic_client_token(sagemaker: Stubber, clients: ClientFactory) -> None:
    # GIVEN the request of one node, built twice from the same cluster state
    nodes = [node_id("prefill", 0)]
    token = client_token(CLUSTER_ARN, "prefill", "decode", nodes, [node_id("prefill", 0), node_id("decode", 0)])
    assert token == client_token(CLUSTER_ARN, "prefill", "decode", nodes, [node_id("decode", 0), node_id("prefill", 0)])
    assert token != client_token(CLUSTER_ARN, "prefill", "decode", nodes, [node_id("prefill", 0)])
    request = move_request(cluster_arn=CLUSTER_ARN, source="prefill", target="decode", node_ids=nodes, token=token)
    # WHEN it is sent (the stub checks the exact parameters; botocore validates them against the input shape)
    sagemaker.add_response("move_cluster_nodes", {"Successful": nodes}, {
        "SourceClusterArn": CLUSTER_ARN, "SourceInstanceGroupName": "prefill", "TargetClusterArn": CLUSTER_ARN,
        "TargetInstanceGroupName": "decode", "NodeIds": nodes, "ClientToken": token})
    answer = move(clients.client("sagemaker"), request)
    # THEN the accepted node is the answer's, and the token fits the API's ClientToken (1-64 of \x21-\x7E)
    assert answer.accepted == tuple(nodes) and answer.failed == () and answer.refused == ""
    assert 1 <= len(token) <= 64 and all(0x21 <= ord(c) <= 0x7E for c in token)


def test_a_partial_move_and_a_refused_move(sagemaker: Stubber, clients: ClientFactory) -> None:
    # GIVEN two nodes, one of them busy with another operation; then a request the service refuses as a whole
    a, b = node_id("prefill", 0), node_id("prefill", 1)
    request = move_request(cluster_arn=CLUSTER_ARN, source="prefill", target="decode", node_ids=[a, b], token="t-1")
    sagemaker.add_response("move_cluster_nodes", {"Successful": [a], "Failed": [
        {"NodeId": b, "Code": "NodeIdInUse", "Message": "Another operation is in progress"}]}, None)
    sagemaker.add_client_error("move_cluster_nodes", "ValidationException",
                               "The source instance group would go below its minimum instance count",
                               http_status_code=400)
    # WHEN both are sent
    partial = move(clients.client("sagemaker"), request)
    refused = move(clients.client("sagemaker"), request)
    # THEN the failed node carries its code and message, and the refusal its reason
    assert partial.accepted == (a,) and partial.failed == ((b, "NodeIdInUse", "Another operation is in progress"),)
    assert refused.refused == "The source instance group would go below its minimum instance count"


def test_the_wait_follows_the_node_into_the_target_group(sagemaker: Stubber, clients: ClientFactory) -> None:
    # GIVEN the node detaching, then attaching, then Running in decode
    moving = node_id("prefill", 0)
    for status, group in (("DetachInProgress", "prefill"), ("AttachInProgress", "decode"), ("Running", "decode")):
        sagemaker.add_response("list_cluster_nodes", nodes_answer(
            {"prefill": 2, "decode": 1}, statuses={moving: status}, moved={moving: group}), {"ClusterName": "hpdpd-dev"})
    seen: list[str] = []
    # WHEN waiting for it
    result = wait_for(move_probe(clients.client("sagemaker"), "hpdpd-dev", node_ids=[moving], target="decode"),
                      target="move", timeout_seconds=60, backoff=Backoff(initial_seconds=0.01, max_seconds=0.01),
                      on_poll=lambda o, *_: seen.append(o.state))
    # THEN it is ready at the third poll, having shown each state
    assert result.outcome == "ready" and result.polls == 3
    assert seen == [f"{moving} DetachInProgress in prefill", f"{moving} AttachInProgress in decode",
                    f"{moving} Running in decode"]


def test_a_node_that_fails_ends_the_wait(sagemaker: Stubber, clients: ClientFactory) -> None:
    moving = node_id("prefill", 0)
    sagemaker.add_response("list_cluster_nodes", nodes_answer({"prefill": 1}, statuses={moving: "Failure"},
                                                              moved={moving: "decode"}), None)
    result = wait_for(move_probe(clients.client("sagemaker"), "hpdpd-dev", node_ids=[moving], target="decode"),
                      target="move", timeout_seconds=60, backoff=Backoff(initial_seconds=0.01, max_seconds=0.01))
    assert result.outcome == "failed" and result.message == f"{moving} is Failure in instance group decode"


# ---- who may move -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checks_policies(tmp_path_factory: pytest.TempPathFactory, base_configs: dict[str, dict[str, Any]]) -> Any:
    """The checks role of dev, synthesized once for this module (the CDK is imported here: the command tests import
    this module's helpers and need no jsii)."""
    import aws_cdk as cdk
    from aws_cdk import assertions

    from hyperpod_dpd.infra.checks_role import ChecksRole, CheckTargets

    env = environment(base_configs, prefill=1, decode=1)
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path_factory.mktemp("rebalance-checks"))), "Checks",
                      env=cdk.Environment(account=MOTO_ACCOUNT, region=REGION))
    role = ChecksRole(stack, "ChecksRole", role_name="hpdpd-dev-checks",
                      trusted_role_arn="arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev",
                      targets=CheckTargets.of(env))
    template = assertions.Template.from_stack(stack).to_json()
    return role_policies(template, stack.get_logical_id(role.role.node.default_child),  # type: ignore[arg-type]
                         Deployment(account=MOTO_ACCOUNT, region=REGION, partition="aws"))


def test_the_checks_role_can_plan_but_never_move(checks_policies: Any) -> None:
    # GIVEN the pipeline's read-only checks role
    # WHEN IAM evaluates the dry run's reads and the move on the cluster
    # THEN the reads are allowed and MoveClusterNodes is not
    for action in ("sagemaker:DescribeCluster", "sagemaker:ListClusterNodes"):
        assert checks_policies.evaluate(Request(action, CLUSTER_ARN)).allowed, action
    assert not checks_policies.evaluate(Request("sagemaker:MoveClusterNodes", CLUSTER_ARN)).allowed


def test_the_committed_config_must_pass_synthesis(base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN dev (the endpoint's prefill role names the prefill group)
    env = environment(base_configs, prefill=2, decode=1)
    # WHEN the counts after a move are checked as synthesis checks them
    # THEN counts the endpoint still fits pass, and a prefill group at 0 (parked under its endpoint) does not
    assert config_problems(env, {"prefill": 1, "decode": 2}) == []
    problems = config_problems(env, {"prefill": 0, "decode": 3})
    assert problems == ["with the new counts dev.yaml would not pass synthesis: endpoints[0].prefill.replicas: 1: "
                        "needs 1 node of instance group 'prefill', which is parked (count 0); set the group's count, "
                        "or remove the endpoint while the group is parked"]
