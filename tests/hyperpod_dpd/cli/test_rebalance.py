"""``hpdpd rebalance`` as a command: the dry run changes nothing, ``--apply`` moves with the API's shape and waits,
and refusals are one line (exit 1), problems that stop it one line (exit 2).

SageMaker's answers come from botocore's Stubber with the API's real shapes (moto has no ``MoveClusterNodes``); moto's
own HyperPod cluster shows that a cluster which does not report continuous provisioning is refused; the pods come
from the fake Kubernetes API server through the official client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import rebalance as rebalance_cli
from hyperpod_dpd.cli.main import main
from tests.fakes.kube_api import node, pod, serve
from tests.hyperpod_dpd.cli.conftest import MOTO_ACCOUNT
from tests.hyperpod_dpd.moto_clusters import create_hyperpod_cluster
from tests.hyperpod_dpd.ops.test_rebalance import CLUSTER_ARN, describe_answer, node_id, nodes_answer


@pytest.fixture
def factory(moto_factory: Callable[[Any], ClientFactory]) -> ClientFactory:
    return moto_factory(rebalance_cli)


def config(write_config: Callable[..., Path], *, prefill: int, decode: int, prefill_replicas: int = 1,
           ratio: dict[str, float] | None = None) -> Path:
    def mutate(data: dict[str, Any]) -> None:
        data["account"] = MOTO_ACCOUNT
        for group in data["hyperpod"]["instance_groups"]:
            group["count"] = {"prefill": prefill, "decode": decode}.get(group["name"], group["count"])
        data["endpoints"][0]["prefill"]["replicas"] = prefill_replicas
        if ratio:
            data["endpoints"][0]["ratio"] = ratio

    return write_config(mutate)


@pytest.fixture
def calls(factory: ClientFactory) -> Iterator[list[str]]:
    """Every SageMaker operation the command makes, in order."""
    made: list[str] = []
    factory.client("sagemaker").meta.events.register("before-parameter-build.sagemaker",
                                                     lambda model, **_: made.append(model.name))
    yield made


def _cluster(stub: Stubber, counts: dict[str, int], **kwargs: Any) -> None:
    stub.add_response("describe_cluster", describe_answer(counts), {"ClusterName": "hpdpd-dev"})
    stub.add_response("list_cluster_nodes", nodes_answer(counts, **kwargs), {"ClusterName": "hpdpd-dev"})


def _rebalance(config_dir: Path, *extra: str) -> int:
    return main(["rebalance", "--env", "dev", "--config-dir", str(config_dir), "--from", "prefill", "--to", "decode",
                 "--interval", "0.01", *extra])


def _line_of_count(config_dir: Path, group: str) -> int:
    lines = (config_dir / "dev.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"- name: {group}")
    return next(i for i in range(start, len(lines)) if lines[i].strip().startswith("count:")) + 1


def test_the_dry_run_prints_the_plan_and_changes_nothing(factory: ClientFactory, calls: list[str],
                                                         write_config: Callable[..., Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN three prefill nodes and one decode node in service, the endpoint needing one node of each
    config_dir = config(write_config, prefill=3, decode=1)
    with Stubber(factory.client("sagemaker")) as sagemaker:
        _cluster(sagemaker, {"prefill": 3, "decode": 1})
        # WHEN the move of one node is asked without --apply
        code = _rebalance(config_dir, "--count", "1")
    out = capsys.readouterr().out
    # THEN it exits 0 having read the cluster only: no MoveClusterNodes
    assert code == 0 and calls == ["DescribeCluster", "ListClusterNodes"]
    # AND it prints the node, the new counts and the lines to commit, with where they are in the file
    assert "rebalance dev: 1 node(s) of cluster hpdpd-dev from 'prefill' to 'decode' (dry run)" in out
    assert node_id("prefill", 0) in out
    assert (f"hyperpod.instance_groups[1].count: 3 -> 2   # instance group 'prefill' (line "
            f"{_line_of_count(config_dir, 'prefill')})") in out
    assert (f"hyperpod.instance_groups[2].count: 1 -> 2   # instance group 'decode' (line "
            f"{_line_of_count(config_dir, 'decode')})") in out
    assert "dry run: nothing changed; run again with --apply to move" in out


def test_apply_moves_the_nodes_and_waits(factory: ClientFactory, calls: list[str], write_config: Callable[..., Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the same cluster; the move is accepted, the node detaches, then runs in decode
    config_dir = config(write_config, prefill=3, decode=1)
    moving = node_id("prefill", 0)
    with Stubber(factory.client("sagemaker")) as sagemaker:
        _cluster(sagemaker, {"prefill": 3, "decode": 1})
        sagemaker.add_response("move_cluster_nodes", {"Successful": [moving]}, {
            "SourceClusterArn": CLUSTER_ARN, "SourceInstanceGroupName": "prefill", "TargetClusterArn": CLUSTER_ARN,
            "TargetInstanceGroupName": "decode", "NodeIds": [moving], "ClientToken": _token()})
        for status, group in (("DetachInProgress", "prefill"), ("Running", "decode")):
            sagemaker.add_response("list_cluster_nodes", nodes_answer(
                {"prefill": 3, "decode": 1}, statuses={moving: status}, moved={moving: group}), None)
        sagemaker.add_response("describe_cluster", describe_answer({"prefill": 2, "decode": 2}), None)
        # WHEN it is applied
        code = _rebalance(config_dir, "--count", "1", "--apply", "--output", "json")
        sagemaker.assert_no_pending_responses()
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    # THEN the move was one MoveClusterNodes call of that shape, followed until the node ran in decode
    assert code == 0 and calls == ["DescribeCluster", "ListClusterNodes", "MoveClusterNodes", "ListClusterNodes",
                                   "ListClusterNodes", "DescribeCluster"]
    assert data["ok"] is True and data["applied"] is True and data["outcome"] == "moved"
    assert data["accepted"] == [moving] and data["counts"] == {"prefill": {"before": 3, "after": 2},
                                                               "decode": {"before": 1, "after": 2}}
    assert data["client_token"] == _token()
    # AND the groups' counts the cluster reports afterwards match the plan: no warning
    assert data["counts_after"] == {"prefill": {"current": 2, "target": 2}, "decode": {"current": 2, "target": 2}}
    assert data["warnings"] == []
    assert f"moving {moving} to decode: {moving} DetachInProgress in prefill" in captured.err


def _token() -> str:
    """The token the plan derives from the cluster of :func:`test_apply_moves_the_nodes_and_waits`."""
    from hyperpod_dpd.ops.rebalance_live import client_token

    before = [node_id("prefill", i) for i in range(3)] + [node_id("decode", 0)]
    return client_token(CLUSTER_ARN, "prefill", "decode", [node_id("prefill", 0)], before)


def test_a_move_that_strands_the_endpoint_is_refused_before_any_call(
        factory: ClientFactory, calls: list[str], write_config: Callable[..., Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two prefill nodes holding the endpoint's two prefill replicas
    config_dir = config(write_config, prefill=2, decode=1, prefill_replicas=2)
    with Stubber(factory.client("sagemaker")) as sagemaker:
        _cluster(sagemaker, {"prefill": 2, "decode": 1})
        # WHEN one node is moved with --apply
        code = _rebalance(config_dir, "--count", "1", "--apply")
    err = capsys.readouterr().err
    # THEN exit 1, one line with the reason, and no MoveClusterNodes
    assert code == 1 and "MoveClusterNodes" not in calls and err.count("\n") == 1
    assert err.startswith("hpdpd: rebalance refused: instance group 'prefill' would keep 1 node(s) (8 GPUs), but the "
                          "endpoints on it need 2")


def test_a_partial_move_exits_1_naming_the_nodes(factory: ClientFactory, write_config: Callable[..., Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two nodes to move (the endpoint allows 1 prefill per 3 decode): the service accepts one, the other is busy
    config_dir = config(write_config, prefill=3, decode=1, ratio={"min": 0.25, "max": 4})
    first, second = node_id("prefill", 0), node_id("prefill", 1)
    with Stubber(factory.client("sagemaker")) as sagemaker:
        _cluster(sagemaker, {"prefill": 3, "decode": 1})
        sagemaker.add_response("move_cluster_nodes", {"Successful": [first], "Failed": [
            {"NodeId": second, "Code": "NodeIdInUse", "Message": "Another operation is in progress for this node"}]},
            None)
        sagemaker.add_response("list_cluster_nodes", nodes_answer({"prefill": 3, "decode": 1}, moved={first: "decode"}),
                               None)
        # (whether a move lowers the source's target count is not documented: here it did not)
        sagemaker.add_response("describe_cluster", describe_answer({"prefill": 2, "decode": 2}, prefill={
            "TargetCount": 3}), None)
        # WHEN applied
        code = _rebalance(config_dir, "--count", "2", "--apply")
    err = capsys.readouterr().err
    # THEN the moved node is waited for, and the command exits 1 naming the one that did not move and why
    assert code == 1
    assert (f"hpdpd: rebalance partial: moved {first}; not moved: {second}: NodeIdInUse: Another operation is in "
            "progress for this node") in err.splitlines()
    # AND it warns that the source group still targets its old count
    assert ("hpdpd: warning: instance group 'prefill' targets 3 node(s) after the move (runs 2), not 2: check it with "
            "hpdpd status before the next deploy") in err.splitlines()


def test_a_move_that_outlasts_the_timeout_exits_1_with_the_last_state(
        factory: ClientFactory, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a move the service accepts, whose node is still detaching at both polls the budget leaves room for
    config_dir = config(write_config, prefill=3, decode=1)
    moving = node_id("prefill", 0)
    with Stubber(factory.client("sagemaker")) as sagemaker:
        _cluster(sagemaker, {"prefill": 3, "decode": 1})
        sagemaker.add_response("move_cluster_nodes", {"Successful": [moving]}, None)
        for _ in range(2):
            sagemaker.add_response("list_cluster_nodes", nodes_answer(
                {"prefill": 3, "decode": 1}, statuses={moving: "DetachInProgress"}), None)
        # WHEN applied with a short --timeout (and a first poll interval longer than it)
        code = _rebalance(config_dir, "--count", "1", "--apply", "--timeout", "0.3", "--interval", "100")
    err = capsys.readouterr().err
    # THEN exit 1, one last line saying the move did not finish and where the node was last seen
    assert code == 1
    assert err.splitlines()[-1].startswith("hpdpd: rebalance timeout: not ready after ")
    assert err.splitlines()[-1].endswith(f"(last state: {moving} DetachInProgress in prefill)")


def test_a_cluster_without_continuous_provisioning_is_refused(factory: ClientFactory, write_config: Callable[..., Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN moto's HyperPod cluster (it reports neither an orchestrator nor a provisioning mode)
    config_dir = config(write_config, prefill=2, decode=1)
    create_hyperpod_cluster(factory.client("sagemaker"), [("system", "ml.m5.2xlarge", 2),
                                                          ("prefill", "ml.p5.48xlarge", 2),
                                                          ("decode", "ml.p5.48xlarge", 1)])
    # WHEN a move is planned
    code = _rebalance(config_dir, "--count", "1", "--output", "json")
    data = json.loads(capsys.readouterr().out)
    # THEN it is refused for what MoveClusterNodes requires, failing safe on what the cluster does not say
    assert code == 1 and data["outcome"] == "refused" and data["applied"] is False
    assert "cluster hpdpd-dev reports NodeProvisioningMode none; MoveClusterNodes needs Continuous" in data["refusals"]
    assert "cluster hpdpd-dev reports no EKS orchestrator; MoveClusterNodes needs EKS orchestration" in data["refusals"]


def test_with_cluster_access_an_idle_node_is_chosen(factory: ClientFactory, write_config: Callable[..., Path],
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN three prefill nodes; the first runs the endpoint's prefill pod (8 GPUs), the others run nothing
    config_dir = config(write_config, prefill=3, decode=1)
    names = [f"hyperpod-{node_id('prefill', i)}" for i in range(3)]
    with serve() as kube, Stubber(factory.client("sagemaker")) as sagemaker:
        kube.nodes.extend(node(name) for name in names)
        kube.pods.append(pod("prefill-llama-0", namespace="llm-serving", node_name=names[0], role="prefill"))
        _cluster(sagemaker, {"prefill": 3, "decode": 1})
        # WHEN the dry run reads the pods through a kubeconfig
        code = _rebalance(config_dir, "--count", "1", "--output", "json",
                          "--kubeconfig", kube.kubeconfig(tmp_path / "kubeconfig"))
    data = json.loads(capsys.readouterr().out)
    # THEN the node that runs no pod is chosen
    assert code == 0 and data["nodes"] == [{"instance_id": node_id("prefill", 1), "gpus_in_use": 0,
                                            "why": "runs no GPU pod"}]
    assert data["chosen_by"].startswith("GPU pods on each node")


def test_pods_that_cannot_be_read_leave_the_choice_to_the_node_listing(
        factory: ClientFactory, write_config: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an API server that refuses to list nodes
    config_dir = config(write_config, prefill=3, decode=1)
    with serve() as kube, Stubber(factory.client("sagemaker")) as sagemaker:
        kube.fail("/api/v1/nodes", 403, "nodes is forbidden")
        _cluster(sagemaker, {"prefill": 3, "decode": 1})
        # WHEN the dry run is asked with that cluster's kubeconfig
        code = _rebalance(config_dir, "--count", "1", "--output", "json",
                          "--kubeconfig", kube.kubeconfig(tmp_path / "kubeconfig"))
    data = json.loads(capsys.readouterr().out)
    # THEN the plan still stands (the pods only rank the nodes), chosen by instance id, with a note saying why
    assert code == 0 and data["nodes"][0] == {"instance_id": node_id("prefill", 0), "gpus_in_use": None,
                                              "why": "pods not known"}
    assert any(n.startswith("the cluster's pods could not be read (") and "nodes chosen without them" in n
               for n in data["notes"]), data["notes"]


@pytest.mark.parametrize(("arguments", "message"), [
    (["--to", "prefill"], "hpdpd: error: --from and --to are both prefill: move nodes from one role to the other\n"),
    (["--from-group", "nope"], "hpdpd: error: 'nope' is not a prefill instance group of "),
])
def test_what_cannot_run_is_one_line_exit_2(factory: ClientFactory, write_config: Callable[..., Path],
                                            arguments: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    config_dir = config(write_config, prefill=2, decode=1)
    code = main(["rebalance", "--env", "dev", "--config-dir", str(config_dir), "--from", "prefill", "--to", "decode",
                 "--count", "1", *arguments])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(message)


def test_a_missing_cluster_is_exit_2(factory: ClientFactory, write_config: Callable[..., Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an account (moto) without the cluster
    code = _rebalance(config(write_config, prefill=2, decode=1), "--count", "1")
    assert code == 2
    assert capsys.readouterr().err == ("hpdpd: error: HyperPod cluster hpdpd-dev not found in us-west-2: deploy the "
                                       "platform first\n")


def test_a_count_beyond_the_api_is_refused_by_the_parser(write_config: Callable[..., Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _rebalance(config(write_config, prefill=2, decode=1), "--count", "51")
    assert exited.value.code == 2 and "must be 1 to 50 (MoveClusterNodes moves at most 50" in capsys.readouterr().err
