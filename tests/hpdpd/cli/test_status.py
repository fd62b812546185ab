"""``hpdpd status`` as a command: the documented JSON, IEC state through kubectl, exit codes."""

from __future__ import annotations

import json
import os
import stat
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

from tests.hpdpd.cli.conftest import MOTO_ACCOUNT
from tests.hpdpd.moto_clusters import create_hyperpod_cluster


@pytest.fixture
def factory(moto_factory: Callable[[Any], ClientFactory]) -> ClientFactory:
    return moto_factory(status_cli)


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    """dev with moto's account, keeping the endpoints it declares."""
    return write_config(lambda d: d.__setitem__("account", MOTO_ACCOUNT))


def fake_kubectl(directory: Path, document: dict[str, Any]) -> None:
    directory.mkdir()
    (directory / "iec.json").write_text(json.dumps(document))
    script = directory / "kubectl"
    script.write_text(f'#!/bin/sh\necho "$@" > "{directory}/args.txt"\ncat "{directory}/iec.json"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_json_status_with_the_iec_state_from_kubectl(factory: ClientFactory, config_dir: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a running cluster, ACTIVE add-ons and a kubectl that reports the endpoint's IEC as complete
    env = load_environment("dev", config_dir)
    endpoint = configured_endpoints(env)[0]
    create_hyperpod_cluster(factory.client("sagemaker"), [("system", "ml.m5.2xlarge", 2), ("prefill", "ml.p5.48xlarge", 1),
                                                 ("decode", "ml.p5.48xlarge", 1)])
    fake_kubectl(tmp_path / "bin", {"status": {"state": "DeploymentComplete", "conditions": [
        {"message": "DPD prefill and decode deployments are ready"}]}})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with Stubber(factory.client("eks")) as eks:
        eks.add_response("list_addons", {"addons": [a.name for a in expected_addons(env)]}, None)
        for addon in expected_addons(env):
            eks.add_response("describe_addon", {"addon": {"addonName": addon.name, "addonVersion": addon.configured,
                                                          "status": "ACTIVE"}}, None)
        # WHEN status runs with a kubeconfig
        code = main(["status", "--env", "dev", "--config-dir", str(config_dir), "--output", "json",
                     "--kubeconfig", str(tmp_path / "kubeconfig")])
    data = json.loads(capsys.readouterr().out)
    # THEN the documented shape is there, the IEC was asked for by its generated name, and the exit code is 0
    assert code == 0 and data["healthy"] is True
    assert data["cluster"]["name"] == "hpdpd-dev" and data["cluster"]["status"] == "InService"
    assert {"name": "prefill", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1} in \
        data["cluster"]["instance_groups"]
    assert len(data["addons"]) == len(expected_addons(env))
    assert data["endpoints"][0]["resource_name"] == iec_name(endpoint)
    assert data["endpoints"][0]["iec_state"] == "DeploymentComplete"
    assert f"get inferenceendpointconfig {iec_name(endpoint)} -n {endpoint.namespace} -o json" in \
        (tmp_path / "bin" / "args.txt").read_text()


def test_a_failed_cluster_exits_1_and_shows_why(factory: ClientFactory, config_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with Stubber(factory.client("sagemaker")) as sagemaker, Stubber(factory.client("eks")) as eks:
        sagemaker.add_response("describe_cluster", {
            "ClusterArn": f"arn:aws:sagemaker:us-west-2:{MOTO_ACCOUNT}:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": "Failed", "FailureMessage": "We currently do not have sufficient capacity.",
            "InstanceGroups": [{"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 0,
                                "TargetCount": 1}]}, None)
        sagemaker.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []}, None)
        eks.add_client_error("list_addons", "AccessDeniedException", "not authorized")
        code = main(["status", "--env", "dev", "--config-dir", str(config_dir)])
    captured = capsys.readouterr()
    out = " ".join(captured.out.split())
    assert code == 1
    assert "Failed: We currently do not have sufficient capacity." in out
    assert "unknown (no kubeconfig)" in out
    assert "hpdpd: warning: add-ons: could not read" in captured.err and "NOT healthy" in captured.err
