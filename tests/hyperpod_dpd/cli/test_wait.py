"""``hpdpd wait`` as a command: ready, a terminal failure with AWS's message, a timeout, and refusals.

A state that cannot be read is never "not created yet": throttling and connection errors are retried until the
deadline, a permission denial ends the wait at once (exit 2, one line).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import wait as wait_cli
from hyperpod_dpd.cli.main import main
from tests.hyperpod_dpd.aws_faults import denied_by_iam, refusing, unreachable
from tests.hyperpod_dpd.cli.conftest import MOTO_ACCOUNT
from tests.hyperpod_dpd.moto_clusters import create_hyperpod_cluster


@pytest.fixture
def factory(moto_factory: Callable[[Any], ClientFactory]) -> ClientFactory:
    return moto_factory(wait_cli)


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    return write_config(lambda d: d.__setitem__("account", MOTO_ACCOUNT))


def _wait(config_dir: Path, *extra: str) -> int:
    return main(["wait", "--env", "dev", "--config-dir", str(config_dir), "--interval", "0.01", "--max-interval",
                 "0.02", *extra])


def test_waiting_for_a_ready_cluster(factory: ClientFactory, config_dir: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    create_hyperpod_cluster(factory.client("sagemaker"), [("prefill", "ml.p5.48xlarge", 1)])
    code = _wait(config_dir, "--for", "cluster", "--output", "json")
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert code == 0 and data["ok"] is True and data["outcome"] == "ready"
    assert data["state"] == "InService (prefill 1/1)"
    assert "waiting for cluster of dev: InService (prefill 1/1)" in captured.err  # progress, not on stdout


def test_a_failed_cluster_ends_the_wait_with_the_failure_message(factory: ClientFactory, config_dir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    group = {"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 0, "TargetCount": 1}
    answer = {"ClusterArn": f"arn:aws:sagemaker:us-west-2:{MOTO_ACCOUNT}:cluster/abc", "ClusterName": "hpdpd-dev",
              "InstanceGroups": [group]}
    with Stubber(factory.client("sagemaker")) as sagemaker:
        sagemaker.add_response("describe_cluster", {**answer, "ClusterStatus": "Creating"}, None)
        sagemaker.add_response("describe_cluster", {**answer, "ClusterStatus": "Failed", "FailureMessage":
                                                    "InsufficientInstanceCapacity for ml.p5.48xlarge in us-west-2a"},
                               None)
        code = _wait(config_dir, "--for", "cluster")
    err = capsys.readouterr().err
    assert code == 1
    assert ("hpdpd: cluster failed: Failed (prefill 0/1): InsufficientInstanceCapacity for ml.p5.48xlarge in "
            "us-west-2a") in err
    assert "Creating (prefill 0/1)" in err  # the progress line of the first poll


def test_a_timeout_exits_1_with_the_last_state(factory: ClientFactory, config_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an empty account (moto): SageMaker says the cluster does not exist
    # WHEN waiting briefly
    code = _wait(config_dir, "--for", "cluster", "--timeout", "0.05")
    err = capsys.readouterr().err
    # THEN it is "not created yet" (kept waiting), and the timeout exits 1 with that state
    assert code == 1
    assert "hpdpd: timed out waiting for cluster: not ready after 0.05 s (last state: NotFound (not created yet))" in err


def test_waiting_for_an_endpoint_nobody_can_observe_is_refused(factory: ClientFactory, config_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = _wait(config_dir, "--for", "endpoint")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "cannot observe endpoint(s)" in err and "pass --kubeconfig" in err


def test_bad_arguments_are_refused_by_the_parser(config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _wait(config_dir, "--for", "cluster", "--timeout", "-3")
    assert exited.value.code == 2 and "must be greater than 0" in capsys.readouterr().err


def test_a_denied_read_ends_the_wait_at_once(factory: ClientFactory, config_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN (moto, IAM enforced) the cluster exists but the caller lacks sagemaker:DescribeCluster
    create_hyperpod_cluster(factory.client("sagemaker"), [("prefill", "ml.p5.48xlarge", 1)])
    with denied_by_iam(monkeypatch, allow=["sagemaker:ListClusterNodes"]) as user:
        restricted = ClientFactory(region="us-west-2")
        monkeypatch.setattr(wait_cli, "factory_from_args", lambda args, default_region, **_: restricted)
        # WHEN waiting for it for up to an hour
        code = _wait(config_dir, "--for", "cluster", "--timeout", "3600", "--output", "json")
    captured = capsys.readouterr()
    # THEN the wait stops at the first poll with exit 2 and one line naming the caller and the permission
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("hpdpd: error: cannot wait for HyperPod cluster hpdpd-dev: DescribeCluster: 403: ")
    assert user in captured.err
    assert captured.err.endswith("; needs sagemaker:DescribeCluster (waiting cannot fix this)\n")


def test_a_denied_addon_listing_ends_the_wait_at_once(factory: ClientFactory, config_dir: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN ListAddons is denied
    with Stubber(factory.client("eks")) as eks:
        eks.add_client_error("list_addons", "AccessDeniedException", "not authorized to perform eks:ListAddons",
                             http_status_code=403)
        # WHEN waiting for the add-ons
        code = _wait(config_dir, "--for", "addons", "--timeout", "3600")
    err = capsys.readouterr().err
    # THEN exit 2 with one line naming the permissions
    assert code == 2 and err == ("hpdpd: error: cannot wait for the add-ons of EKS cluster hpdpd-dev: ListAddons: "
                                 "AccessDeniedException: not authorized to perform eks:ListAddons (the caller lacks "
                                 "this permission); needs eks:ListAddons and eks:DescribeAddon (waiting cannot fix "
                                 "this)\n")


def test_throttling_is_retried_until_ready(factory: ClientFactory, config_dir: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN DescribeCluster is throttled (beyond botocore's retries) twice, then answers InService
    group = {"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 1, "TargetCount": 1}
    with Stubber(factory.client("sagemaker")) as sagemaker:
        for _ in range(2):
            sagemaker.add_client_error("describe_cluster", "ThrottlingException", "Rate exceeded", http_status_code=400)
        sagemaker.add_response("describe_cluster", {
            "ClusterArn": f"arn:aws:sagemaker:us-west-2:{MOTO_ACCOUNT}:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": "InService", "InstanceGroups": [group]}, None)
        # WHEN waiting
        code = _wait(config_dir, "--for", "cluster", "--output", "json")
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    # THEN the throttled polls showed as Unknown (not NotFound) and the third poll saw the cluster ready
    assert code == 0 and data["outcome"] == "ready" and data["polls"] == 3
    assert ("waiting for cluster of dev: Unknown (DescribeCluster: ThrottlingException: Rate exceeded (throttled; "
            "retry later or raise AWS_MAX_ATTEMPTS))") in captured.err
    assert "NotFound" not in captured.err


def test_connection_errors_are_retried_until_ready(factory: ClientFactory, config_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN (moto) a ready cluster whose first two DescribeCluster sends fail to connect (one attempt each)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    create_hyperpod_cluster(factory.client("sagemaker"), [("prefill", "ml.p5.48xlarge", 1)])
    refusing(factory.client("sagemaker"), "DescribeCluster", times=2)
    # WHEN waiting
    code = _wait(config_dir, "--for", "cluster", "--output", "json")
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    # THEN the failed polls showed the connection problem, and the third saw the cluster ready
    assert code == 0 and data["outcome"] == "ready" and data["polls"] == 3
    assert ('waiting for cluster of dev: Unknown (cannot reach AWS: Could not connect to the endpoint URL: '
            '"https://api.sagemaker.us-west-2.amazonaws.com/"') in captured.err


def test_an_unreachable_service_times_out_as_unknown_not_absent(factory: ClientFactory, config_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN SageMaker's endpoint URL refuses every connection
    with unreachable(monkeypatch, "sagemaker") as url:
        # WHEN waiting two seconds
        code = _wait(config_dir, "--for", "cluster", "--timeout", "2", "--output", "json")
    data = json.loads(capsys.readouterr().out)
    # THEN it polled again and again, and timed out with the connection problem as the last state (exit 1)
    unknown = (f'Unknown (cannot reach AWS: Could not connect to the endpoint URL: "{url}/" (check the network, '
               "AWS_ENDPOINT_URL and the Region))")
    assert code == 1 and data["outcome"] == "timeout" and data["polls"] >= 2
    assert data["state"] == unknown and data["message"] == f"not ready after 2 s (last state: {unknown})"
