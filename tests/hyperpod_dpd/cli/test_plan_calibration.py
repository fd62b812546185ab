"""``hpdpd plan --calibration FILE``: measured constants change the prediction and are named in the output; a wrong
file is one line per problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperpod_dpd.cli.main import main

BASE = ["plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens", "4096",
        "--output-tokens", "256", "--concurrency", "1,16", "--prefill-nodes", "1", "--baseline-nodes", "1"]
SOURCE = "staging p5 pair, router log + KV Transfer Time panel, P50 at 1 user, 2026-11-28"


def _plan(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main([*BASE, *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    path = tmp_path / "calibration.yaml"
    path.write_text(f"calibration:\n  transfer_fixed_s:\n    value: 0.050\n    source: \"{SOURCE}\"\n")
    return path


def test_a_measured_hand_off_lengthens_the_disaggregated_ttft_by_its_difference(
        capsys: pytest.CaptureFixture[str], measured: Path) -> None:
    # GIVEN the published plan and the same plan with a measured 50 ms hand-off (published: 4.73 ms)
    _, published_out, _ = _plan(capsys, "--output", "json")
    code, out, err = _plan(capsys, "--output", "json", "--calibration", str(measured))
    published, mine = json.loads(published_out), json.loads(out)
    assert (code, err) == (0, "")
    # THEN one user's DPD TTFT grows by the difference, and colocated serving does not move
    before, after = published["predictions"][0], mine["predictions"][0]
    assert after["disaggregated"]["ttft_ms"] - before["disaggregated"]["ttft_ms"] == pytest.approx(45.26, abs=0.2)
    assert after["colocated"] == before["colocated"]
    # AND the JSON names the replaced constant with the file and the source given
    block = mine["calibration"]
    assert block["measured_overrides"] == ["transfer_fixed_s"]
    assert block["constants"]["transfer_fixed_s"]["value"] == 0.05
    assert SOURCE in block["constants"]["transfer_fixed_s"]["basis"]
    assert mine["kv_transfer_fixed_ms"] == 50.0
    assert published["calibration"]["measured_overrides"] == []


def test_the_table_says_which_constants_are_yours(capsys: pytest.CaptureFixture[str], measured: Path) -> None:
    code, out, _ = _plan(capsys, "--calibration", str(measured))
    assert code == 0
    assert f"Calibration: transfer_fixed_s = 0.05, your measurement ({measured}): {SOURCE}" in out.replace(
        str(measured.resolve()), str(measured))


def test_a_wrong_file_ends_in_one_line_per_problem(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "calibration.yaml"
    path.write_text("calibration:\n  hbm_efficiency: {value: 1.5, source: bench}\n  chunk_tokens: {value: 2048}\n")
    code, out, err = _plan(capsys, "--calibration", str(path))
    assert (code, out) == (2, "")
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("hpdpd: error: ") and "calibration.hbm_efficiency.value: 1.5: must be a number" in lines[0]
    assert "calibration.chunk_tokens" in lines[1] and "pass --max-num-batched-tokens instead" in lines[1]


def test_a_missing_file_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _plan(capsys, "--calibration", str(tmp_path / "absent.yaml"))
    assert (code, out) == (2, "")
    assert "absent.yaml: <file>: 'absent.yaml': no such file" in err


def test_a_constant_an_engine_flag_sets_names_the_flag_not_the_published_default(
        capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the plan moves the KV with vLLM's NixlConnector and caps the scheduler at 64 requests
    code, out, _ = _plan(capsys, "--output", "json", "--kv-connector", "nixl", "--max-num-seqs", "64")
    constants = json.loads(out)["calibration"]["constants"]
    assert code == 0
    # THEN each constant those flags set says so, with the published default beside it; the others keep their source
    assert constants["connector_block_tokens"] == {
        "value": 16, "basis": "set by this plan's flags (published default 256: LMCache default chunk_size 256 tokens)"}
    assert constants["max_num_seqs"]["basis"].startswith("set by this plan's flags (published default 1024")
    assert constants["hbm_efficiency"]["basis"].startswith("calibrated: NIM")
