"""The summary `make synth` prints: stacks, instance groups and GPUs per environment, and the promotion order."""

from __future__ import annotations

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.synth_summary import main, summarize


def test_environment_summary_lists_stacks_groups_and_gpus(synthesized) -> None:
    lines = summarize(load_environment("prod"), synthesized.outdir)
    assert lines[0] == "prod  account 333333333333  region us-east-1  GPU AZ us-east-1a"
    assert [line.split()[1] for line in lines if line.strip().startswith("stack")] == [
        "hpdpd-prod-endpoints", "hpdpd-prod-network", "hpdpd-prod-platform"]
    assert "  group prefill      prefill    3 x ml.p6-b200.48xlarge    (8x B200 each, EFA 3,200 Gbps)" in lines
    assert lines[-1] == "  GPUs  32 total: decode 8, prefill 24"


def test_main_prints_every_environment_and_the_pipeline(synthesized, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(synthesized.outdir)]) == 0
    out = capsys.readouterr().out
    for env in ("dev", "staging", "prod"):
        assert f"{env}  account" in out
    assert "stack hpdpd-dev-endpoints" in out
    assert "promotes dev -> staging -> prod (approval first)" in out
