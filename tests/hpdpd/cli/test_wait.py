"""``hpdpd wait`` as a command: ready, a terminal failure with AWS's message, a timeout, and refusals."""

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

from tests.hpdpd.cli.conftest import MOTO_ACCOUNT
from tests.hpdpd.moto_clusters import create_hyperpod_cluster


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
    code = _wait(config_dir, "--for", "cluster", "--timeout", "0.05")
    err = capsys.readouterr().err
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
