"""``hpdpd status`` as a command: the documented JSON, the table, IEC state through kubectl, exit codes.

The HyperPod cluster row for each answer DescribeCluster can give: present, absent (moto), denied (moto with IAM
enforced), throttled (Stubber: moto does not throttle), unreachable (a port that refuses connections).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import status as status_cli
from hyperpod_dpd.cli.main import main
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.ops.addons import expected_addons
from hyperpod_dpd.ops.endpoints import configured_endpoints, iec_name
from tests.hyperpod_dpd.aws_faults import denied_by_iam, unreachable
from tests.hyperpod_dpd.cli.conftest import MOTO_ACCOUNT
from tests.hyperpod_dpd.moto_clusters import create_hyperpod_cluster

GROUPS = [("system", "ml.m5.2xlarge", 2), ("prefill", "ml.p5.48xlarge", 1), ("decode", "ml.p5.48xlarge", 1)]


@pytest.fixture
def factory(moto_factory: Callable[[Any], ClientFactory]) -> ClientFactory:
    return moto_factory(status_cli)


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    """dev with moto's account, keeping the endpoints it declares."""
    return write_config(lambda d: d.__setitem__("account", MOTO_ACCOUNT))


def stub_active_eks(stub: Stubber, config_dir: Path) -> None:
    """An ACTIVE EKS cluster with every expected add-on ACTIVE (moto has no add-ons)."""
    env = load_environment("dev", config_dir)
    stub.add_response("describe_cluster", {"cluster": {"name": "hpdpd-dev", "status": "ACTIVE", "version": "1.35"}},
                      None)
    stub.add_response("list_addons", {"addons": [a.name for a in expected_addons(env)]}, None)
    for addon in expected_addons(env):
        stub.add_response("describe_addon", {"addon": {"addonName": addon.name, "addonVersion": addon.configured,
                                                       "status": "ACTIVE"}}, None)


def status(config_dir: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``hpdpd status --env dev``."""
    code = main(["status", "--env", "dev", "--config-dir", str(config_dir), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def flat(text: str) -> str:
    return " ".join(text.split())


def test_json_status_with_the_iec_state_from_the_api_server(factory: ClientFactory, config_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fakes.kube_api import serve

    # GIVEN a running cluster, ACTIVE add-ons and an API server that reports the endpoint's IEC as complete
    env = load_environment("dev", config_dir)
    endpoint = configured_endpoints(env)[0]
    create_hyperpod_cluster(factory.client("sagemaker"), GROUPS)
    with serve() as fake, Stubber(factory.client("eks")) as eks:
        fake.iecs[(endpoint.namespace, iec_name(endpoint))] = {"status": {"state": "DeploymentComplete", "conditions": [
            {"message": "DPD prefill and decode deployments are ready"}]}}
        stub_active_eks(eks, config_dir)
        # WHEN status runs with a kubeconfig
        code, out, _ = status(config_dir, capsys, "--output", "json", "--kubeconfig",
                              fake.kubeconfig(tmp_path / "kubeconfig"))
    data = json.loads(out)
    # THEN the documented shape is there, the IEC was asked for by its generated name, and the exit code is 0
    assert code == 0 and data["healthy"] is True
    assert data["cluster"]["name"] == "hpdpd-dev" and data["cluster"]["status"] == "InService"
    assert data["cluster"]["reason"] is None
    assert {"name": "prefill", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1} in \
        data["cluster"]["instance_groups"]
    assert data["eks_cluster"] == {"name": "hpdpd-dev", "status": "ACTIVE", "version": "1.35", "reason": None}
    assert len(data["addons"]) == len(expected_addons(env))
    assert data["endpoints"][0]["resource_name"] == iec_name(endpoint)
    assert data["endpoints"][0]["iec_state"] == "DeploymentComplete" and data["endpoints"][0]["iec_reason"] is None
    assert f"/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/{endpoint.namespace}/inferenceendpointconfigs/" \
        f"{iec_name(endpoint)}" in fake.calls("GET")


def test_a_present_cluster_in_the_table(factory: ClientFactory, config_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN (moto) a running cluster, and an ACTIVE EKS cluster and add-ons
    create_hyperpod_cluster(factory.client("sagemaker"), GROUPS)
    with Stubber(factory.client("eks")) as eks:
        stub_active_eks(eks, config_dir)
        # WHEN status prints its table
        code, out, err = status(config_dir, capsys)
    # THEN both clusters are rows with their status, the groups and nodes follow, and it is healthy
    assert code == 0 and err.endswith("healthy\n") and "NOT healthy" not in err
    assert "│ HyperPod │ hpdpd-dev │ InService │ │" in flat(out)
    assert "│ EKS │ hpdpd-dev │ ACTIVE │ Kubernetes 1.35 │" in flat(out)
    assert "│ prefill │ ml.p5.48xlarge │ 1 │ 1 │" in flat(out) and "Nodes: 4/4 Running" in out
    # AND the IEC, not read without a kubeconfig, is Unknown with the reason in the Detail column
    assert "│ Unknown │ - │ - │ IEC: no kubeconfig │" in flat(out)


def test_an_absent_cluster_is_not_found(factory: ClientFactory, config_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an empty account (moto): SageMaker and EKS both answer "not found"
    # WHEN status runs, as JSON and as a table
    code, out, _ = status(config_dir, capsys, "--output", "json")
    table_code, table, err = status(config_dir, capsys)
    data = json.loads(out)
    # THEN both clusters are NotFound with no reason, the expected add-ons are not installed, and the exit code is 1
    assert code == table_code == 1
    assert (data["cluster"]["status"], data["cluster"]["reason"]) == ("NotFound", None)
    assert (data["eks_cluster"]["status"], data["eks_cluster"]["reason"]) == ("NotFound", None)
    assert {a["status"] for a in data["addons"]} == {"NOT_INSTALLED"}
    assert "│ HyperPod │ hpdpd-dev │ NotFound │ │" in flat(table) and "│ EKS │ hpdpd-dev │ NotFound │ │" in flat(table)
    assert "EKS add-ons: EKS cluster hpdpd-dev NotFound" in table and "Unknown │ - │ - │ IEC" in flat(table)
    assert "hpdpd: warning: add-ons: EKS cluster hpdpd-dev not found" in err and "NOT healthy" in err


def test_a_denied_cluster_is_unknown_naming_the_permission(factory: ClientFactory, config_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN (moto, IAM enforced) the cluster exists but the caller lacks sagemaker:DescribeCluster
    create_hyperpod_cluster(factory.client("sagemaker"), GROUPS)
    with denied_by_iam(monkeypatch, allow=["sagemaker:ListClusterNodes"]) as user:
        restricted = ClientFactory(region="us-west-2")
        monkeypatch.setattr(status_cli, "factory_from_args", lambda args, default_region, **_: restricted)
        with Stubber(restricted.client("eks")) as eks:
            stub_active_eks(eks, config_dir)
            stub_active_eks(eks, config_dir)
            # WHEN status runs, as JSON and as a table
            code, out, _ = status(config_dir, capsys, "--output", "json")
            table_code, table, err = status(config_dir, capsys)
    data = json.loads(out)
    # THEN the cluster is Unknown (not NotFound), the reason names the caller and the permission, and exit code is 1
    assert code == table_code == 1 and data["healthy"] is False
    assert data["cluster"]["status"] == "Unknown" and data["cluster"]["instance_groups"] == []
    reason = data["cluster"]["reason"]
    assert reason.startswith("DescribeCluster: 403: ") and user in reason
    assert reason.endswith("; needs sagemaker:DescribeCluster")
    assert data["warnings"] == [f"HyperPod cluster hpdpd-dev: could not read ({reason})"]
    assert "│ HyperPod │ hpdpd-dev │ Unknown │ DescribeCluster: 403:" in flat(table)
    assert "needs sagemaker:DescribeCluster" in flat(table) and "NotFound" not in table
    assert "hpdpd: warning: HyperPod cluster hpdpd-dev: could not read (DescribeCluster: 403:" in err


def test_a_throttled_cluster_is_unknown(factory: ClientFactory, config_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN DescribeCluster is throttled beyond botocore's retries
    with Stubber(factory.client("sagemaker")) as sagemaker, Stubber(factory.client("eks")) as eks:
        for _ in range(2):
            sagemaker.add_client_error("describe_cluster", "ThrottlingException", "Rate exceeded", http_status_code=400)
            stub_active_eks(eks, config_dir)
        # WHEN status runs, as JSON and as a table
        code, out, _ = status(config_dir, capsys, "--output", "json")
        table_code, table, _ = status(config_dir, capsys)
    data = json.loads(out)
    # THEN the cluster is Unknown with the throttling as the reason, and the exit code is 1
    assert code == table_code == 1
    assert data["cluster"]["status"] == "Unknown"
    assert data["cluster"]["reason"] == ("DescribeCluster: ThrottlingException: Rate exceeded (throttled; retry later "
                                         "or raise AWS_MAX_ATTEMPTS)")
    assert data["eks_cluster"]["status"] == "ACTIVE"
    assert "│ HyperPod │ hpdpd-dev │ Unknown │ DescribeCluster: ThrottlingException: Rate exceeded" in flat(table)


def test_an_unreachable_cluster_is_unknown(factory: ClientFactory, config_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN SageMaker's endpoint URL refuses connections (EndpointConnectionError), EKS answers
    with unreachable(monkeypatch, "sagemaker") as url, Stubber(factory.client("eks")) as eks:
        stub_active_eks(eks, config_dir)
        stub_active_eks(eks, config_dir)
        # WHEN status runs, as JSON and as a table
        code, out, _ = status(config_dir, capsys, "--output", "json")
        table_code, table, err = status(config_dir, capsys)
    data = json.loads(out)
    # THEN the cluster is Unknown with the connection problem as the reason, and the exit code is 1 (not 2)
    assert code == table_code == 1
    assert data["cluster"]["status"] == "Unknown"
    assert data["cluster"]["reason"] == (f'cannot reach AWS: Could not connect to the endpoint URL: "{url}/" (check '
                                         "the network, AWS_ENDPOINT_URL and the Region)")
    assert "│ HyperPod │ hpdpd-dev │ Unknown │ cannot reach AWS: Could not connect to the endpoint URL" in flat(table)
    assert "Traceback" not in err and "NOT healthy" in err


def test_a_failed_cluster_exits_1_and_shows_why(factory: ClientFactory, config_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a Failed cluster, and add-ons that cannot be listed (denied)
    with Stubber(factory.client("sagemaker")) as sagemaker, Stubber(factory.client("eks")) as eks:
        sagemaker.add_response("describe_cluster", {
            "ClusterArn": f"arn:aws:sagemaker:us-west-2:{MOTO_ACCOUNT}:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": "Failed", "FailureMessage": "We currently do not have sufficient capacity.",
            "InstanceGroups": [{"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 0,
                                "TargetCount": 1}]}, None)
        sagemaker.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []}, None)
        eks.add_response("describe_cluster", {"cluster": {"name": "hpdpd-dev", "status": "ACTIVE", "version": "1.35"}},
                         None)
        eks.add_client_error("list_addons", "AccessDeniedException", "not authorized")
        # WHEN status prints its table
        code, out, err = status(config_dir, capsys)
    # THEN the failure message is the cluster's Detail, the add-ons are Unknown with the reason once, and exit is 1
    assert code == 1
    assert "│ HyperPod │ hpdpd-dev │ Failed │ We currently do not have sufficient capacity. │" in flat(out)
    assert ("EKS add-ons: Unknown (ListAddons: AccessDeniedException: not authorized (the caller lacks this "
            "permission); needs eks:ListAddons and eks:DescribeAddon)") in flat(out)
    assert "│ vpc-cni │ - │ Unknown │" in flat(out)
    assert "hpdpd: warning: add-ons: could not read" in err and "NOT healthy" in err
