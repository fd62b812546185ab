"""``hpdpd wait --for endpoint`` reports where the cold start of each endpoint spent its time, in the table and in
the JSON output, against a fake Kubernetes API (pods, nodes and events shaped like the real API's)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import wait as wait_cli
from hyperpod_dpd.cli.main import main
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.ops.endpoints import iec_name
from tests.fakes import kube_api
from tests.hyperpod_dpd.cli.conftest import MOTO_ACCOUNT
from tests.hyperpod_dpd.ops.test_coldstart import cluster, seed


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    return write_config(lambda d: d.__setitem__("account", MOTO_ACCOUNT))


@pytest.fixture
def fake(moto_factory: Callable[[Any], ClientFactory], config_dir: Path) -> Iterator[tuple[kube_api.FakeKube, str]]:
    """The fake cluster with the dev endpoint's IEC, ready, and its pods' cold start; and the IEC's name."""
    moto_factory(wait_cli)
    endpoint = load_environment("dev", config_dir).endpoints[0]
    iec = iec_name(endpoint)
    with kube_api.serve() as server:
        server.iecs[(endpoint.namespace, iec)] = {
            "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
            "metadata": {"name": iec, "namespace": endpoint.namespace},
            "status": {"state": "DeploymentComplete", "conditions": [{"message": "deployments are ready"}]}}
        seed(server, cluster(iec, endpoint.namespace))
        yield server, iec


def _wait(config_dir: Path, server: kube_api.FakeKube, tmp_path: Path, *extra: str) -> int:
    return main(["wait", "--for", "endpoint", "--env", "dev", "--config-dir", str(config_dir), "--interval", "0.01",
                 "--max-interval", "0.02", "--kubeconfig", server.kubeconfig(tmp_path / "kubeconfig"), *extra])


def test_the_json_output_carries_each_phase_with_its_duration(fake: tuple[kube_api.FakeKube, str], config_dir: Path,
                                                              tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    server, iec = fake
    # WHEN waiting for the endpoint, with JSON output
    code = _wait(config_dir, server, tmp_path, "--output", "json")
    data = json.loads(capsys.readouterr().out)
    # THEN the wait is ready, and the cold start of the IEC is there, pod by pod and phase by phase
    assert code == 0 and data["ok"] is True
    [cold] = data["cold_start"]
    assert (cold["iec"], cold["unknown"]) == (iec, None)
    by_role = {p["role"]: {ph["phase"]: ph for ph in p["phases"]} for p in cold["pods"]}
    assert {k: v["seconds"] for k, v in by_role["prefill"].items()} == {
        "node ready": 240.0, "image pulled": 114.5, "weights loaded": 290.0, "engine healthy": 330.0}
    assert by_role["prefill"]["engine healthy"]["start"] == "2026-03-01T10:11:00Z"
    assert by_role["prefill"]["engine healthy"]["end"] == "2026-03-01T10:16:30Z"
    # AND what has no evidence is null with its reason, not a number
    assert by_role["decode"]["engine healthy"]["seconds"] is None
    assert by_role["decode"]["engine healthy"]["detail"].startswith("Ready is False")
    assert by_role["decode"]["image pulled"]["seconds"] == 0.0


def test_the_table_shows_durations_and_unknown(fake: tuple[kube_api.FakeKube, str], config_dir: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    server, iec = fake
    server.events.clear()  # the events expired: the image phases cannot be known
    code = _wait(config_dir, server, tmp_path)
    out = capsys.readouterr().out
    assert code == 0
    assert f"cold start of {iec}" in out
    lines = out.splitlines()
    image_rows = [line for line in lines if "image pulled" in line]
    assert len(image_rows) == 2 and all("unknown" in line for line in image_rows)
    engine = [line for line in lines if "engine healthy" in line]
    assert "5 min 30 s" in engine[0] and "prefill" in engine[0]  # the prefill pod's worker start to Ready
    assert "unknown" in engine[1] and "Ready is False" in engine[1]  # the decode pod is not Ready yet


def test_an_unreadable_cold_start_does_not_change_the_outcome(fake: tuple[kube_api.FakeKube, str], config_dir: Path,
                                                              tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    server, _ = fake
    server.fail("/api/v1/nodes", 403, "nodes is forbidden")
    code = _wait(config_dir, server, tmp_path, "--output", "json")
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["outcome"] == "ready"
    [cold] = data["cold_start"]
    assert cold["pods"] == [] and "list on nodes (cluster scope)" in cold["unknown"]
