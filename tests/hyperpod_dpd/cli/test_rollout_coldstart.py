"""``hpdpd rollout promote`` reports the cold start of the new generation (docs/cold-start.md), with what the fake
cluster gives evidence for and unknown for the rest."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.cli.main import main
from tests.hyperpod_dpd.cli import test_rollout as promote
from tests.hyperpod_dpd.cli.test_rollout import NEW, NS, rollout, run_json

# The fake cluster mid-rollout and the healthy checks of the promote tests (their fixtures, shared).
charts, checks, start = promote.charts, promote.checks, promote.start


def _pulled(pod: str, container: str) -> dict[str, Any]:
    """The kubelet's Pulled event of a worker container (core/v1 Event)."""
    return {"metadata": {"name": f"{pod}.pulled", "namespace": NS},
            "involvedObject": {"kind": "Pod", "namespace": NS, "name": pod, "fieldPath": f"spec.containers{{{container}}}"},
            "reason": "Pulled", "type": "Normal", "count": 1,
            "message": 'Successfully pulled image "vllm:v1" in 42.25s (42.3s including waiting). Image size: 1 bytes.',
            "firstTimestamp": "2026-03-01T10:01:00Z", "lastTimestamp": "2026-03-01T10:01:00Z"}


def test_promote_reports_the_new_generations_cold_start(start: Any, checks: tuple[str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake, cluster = start()
    url, metrics = checks
    bring_up = fake.on_iec_created

    def with_pulls(server: Any, document: dict[str, Any]) -> None:  # the new workers' image pulls, as the kubelet logs
        bring_up(server, document)
        for pod in [p for p in server.pods if p["metadata"]["name"].startswith(("prefill-" + NEW, "decode-" + NEW))]:
            server.events.append(_pulled(pod["metadata"]["name"], pod["spec"]["containers"][0]["name"]))

    fake.on_iec_created = with_pulls
    # WHEN the configured generation is promoted
    code, data, err = run_json(capsys, rollout("promote", cluster, "--url", url, "--prometheus", metrics))
    assert code == 0 and data["outcome"] == "promoted", err
    # THEN the JSON carries the new generation's cold start: both workers, every phase
    cold = data["cold_start"]
    assert cold["iec"] == NEW and cold["unknown"] is None
    assert sorted(p["role"] for p in cold["pods"]) == ["decode", "prefill"]
    for pod in cold["pods"]:
        by_phase = {p["phase"]: p for p in pod["phases"]}
        assert list(by_phase) == ["node ready", "image pulled", "weights loaded", "engine healthy"]
        assert by_phase["image pulled"]["seconds"] == 42.25  # the kubelet's own measure
        # AND the fake's nodes and pods carry no conditions: those phases are unknown, not numbers
        assert by_phase["engine healthy"]["seconds"] is None and by_phase["engine healthy"]["detail"]
        assert by_phase["node ready"]["seconds"] is None


def test_the_promote_table_shows_the_cold_start(start: Any, checks: tuple[str, str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _, cluster = start()
    url, metrics = checks
    code = main(rollout("promote", cluster, "--url", url, "--prometheus", metrics, output="table"))
    out = capsys.readouterr().out
    assert code == 0 and f"cold start of {NEW} ({NS})" in out
    assert out.count("engine healthy") == 2 and "unknown" in out
