"""``hpdpd plan``: JSON shape, plot, endpoint block, --env limits, and one clear line for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.cli.main import main

BASE = ["plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens", "8192",
        "--output-tokens", "512"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_carries_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the 70B workload is planned at three concurrencies as JSON
    code, out, err = _run(capsys, *BASE, "--concurrency", "8,16,32", "--output", "json")
    data = json.loads(out)
    # THEN the command succeeds with the fields the issue names
    assert (code, err) == (0, "")
    assert data["kv_bytes_per_token"] == 327_680
    assert data["kv_transfer_ms"] == pytest.approx(7.895, abs=1e-3)  # 8192 x 40,960 B per rank at 42.5 GB/s
    assert {k: data["recommendation"][k] for k in ("prefill_replicas", "decode_replicas", "routing_threshold",
                                                    "pd_buffer_size_bytes", "tensor_parallel_size")} == {
        "prefill_replicas": 2, "decode_replicas": 1, "routing_threshold": 4096,
        "pd_buffer_size_bytes": 17179869184, "tensor_parallel_size": 8}
    assert [p["concurrency"] for p in data["predictions"]] == [8, 16, 32]
    for prediction in data["predictions"]:
        for mode in ("colocated", "disaggregated"):
            values = [prediction[mode][k] for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s")]
            assert all(isinstance(v, float) and v > 0 for v in values)
    assert data["verdict"]["decision"] == "DPD pays off" and len(data["verdict"]["reasons"]) >= 2


def test_the_table_names_the_verdict_and_recommendation(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "plan", "--model", "Llama-3.1-8B", "--instance", "ml.p5.48xlarge",
                        "--input-tokens", "512", "--output-tokens", "256", "--concurrency", "8,16")
    assert code == 0
    assert "Verdict: stay colocated" in out
    assert "Recommendation: prefill_replicas 1, decode_replicas 1" in out
    assert "Predictions" in out


def test_plot_writes_a_png_of_the_default_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "sweep.png"
    code, out, err = _run(capsys, *BASE, "--concurrency", "8,16,32", "--output", "json", "--plot", str(target))
    data = json.loads(out)
    assert code == 0 and [p["concurrency"] for p in data["predictions"]] == [8, 16, 32]
    assert [p["concurrency"] for p in data["sweep"]] == [1, 2, 4, 8, 16, 32, 64]
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert err == f"hpdpd: wrote {target}\n"


def test_plot_without_matplotlib_names_the_extra(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    code, out, err = _run(capsys, *BASE, "--concurrency", "8", "--plot", str(tmp_path / "p.png"))
    assert (code, out) == (2, "")
    assert err == (f"hpdpd: error: --plot: '{tmp_path / 'p.png'}': needs matplotlib: pip install "
                   "'hyperpod-dpd[plot]'\n")


def test_sweep_prints_the_table_and_slos_drive_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the reference set-up is swept with a TPOT target of 15 ms, one prefill + one decode against one node
    code, out, _ = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens",
                        "4096", "--output-tokens", "256", "--prefill-nodes", "1", "--baseline-nodes", "1",
                        "--sweep", "4,16", "--ttft-slo-ms", "2000", "--tpot-slo-ms", "15")
    # THEN both tables print with P50/P99 and goodput, the cost and the SLO verdict
    assert code == 0
    assert "Sweep" in out and "TTFT ms P50/P99" in out and "goodput req/s" in out
    assert "Verdict: DPD pays off" in out and "SLO TTFT <= 2,000 ms and TPOT <= 15.0 ms" in out
    assert "per million output tokens" in out
    # AND a first-token target flips it
    code, out, _ = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens",
                        "4096", "--output-tokens", "256", "--prefill-nodes", "1", "--baseline-nodes", "1",
                        "--concurrency", "16", "--ttft-slo-ms", "250")
    assert "Verdict: stay colocated" in out


def test_precision_prefix_and_max_model_len_reach_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *BASE, "--concurrency", "16", "--kv-dtype", "fp8", "--dtype", "fp8",
                        "--prefix-hit-rate", "0.5", "--max-model-len", "9000", "--output", "json")
    data = json.loads(out)
    assert code == 0
    assert data["precision"] == {"weights": "fp8", "kv_cache": "fp8"}
    assert data["kv_bytes_per_token"] == 163_840 and data["workload"]["prefix_hit_rate"] == 0.5
    assert data["recommendation"]["max_model_len"] == 9000


def test_emit_endpoint_prints_only_a_yaml_block_of_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *BASE, "--concurrency", "32", "--emit-endpoint")
    block = yaml.safe_load(out)
    assert code == 0 and err == ""
    (endpoint,) = block["endpoints"]
    assert list(endpoint) == ["name", "namespace", "model", "instance_type", "tensor_parallel_size",
                              "max_model_len", "prefill", "decode", "routing", "pd_buffer_size"]
    assert endpoint["name"] == "llama-3-3-70b" and endpoint["namespace"] == "llm-serving"
    assert endpoint["model"] == {"name": "Llama-3.3-70B-Instruct",
                                 "s3": {"bucket": "<BUCKET>", "prefix": "<PREFIX>", "region": "<REGION>"}}
    assert endpoint["prefill"] == {"replicas": 2, "instance_group": "prefill"}
    assert endpoint["decode"] == {"replicas": 1, "instance_group": "decode"}
    assert endpoint["routing"] == {"threshold": 4096, "strategy": "prefixaware"}
    assert endpoint["pd_buffer_size"] == 17179869184


def test_env_supplies_instance_layout_groups_and_region(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN config/dev.yaml: one prefill and one decode ml.p5.48xlarge in us-west-2
    code, out, err = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--env", "dev", "--input-tokens", "8192",
                          "--output-tokens", "512", "--concurrency", "32", "--emit-endpoint")
    endpoint = yaml.safe_load(out)["endpoints"][0]
    # THEN the plan uses that layout, says that the recommendation wants more prefill, and fills the Region
    assert code == 0
    assert endpoint["instance_type"] == "ml.p5.48xlarge"
    assert endpoint["prefill"] == {"replicas": 1, "instance_group": "prefill"}
    assert endpoint["model"]["s3"]["region"] == "us-west-2"
    assert "hpdpd: warning: the recommended 2 prefill nodes exceed environment dev's 1" in err


def test_env_refuses_a_layout_larger_than_its_instance_groups(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *BASE, "--concurrency", "8", "--env", "dev", "--prefill-nodes", "2")
    assert code == 2 and out == ""
    assert err == ("hpdpd: error: --prefill-nodes: 2: larger than environment dev's prefill instance groups "
                   "(1 x ml.p5.48xlarge in tests/fixtures/config/dev.yaml)\n")


def test_env_refuses_an_instance_type_it_does_not_have(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--instance", "ml.p6-b200.48xlarge",
                        "--env", "dev", "--input-tokens", "8192", "--output-tokens", "512", "--concurrency", "8")
    assert code == 2
    assert err == ("hpdpd: error: tests/fixtures/config/dev.yaml: hyperpod.instance_groups: 'ml.p6-b200.48xlarge': environment dev "
                   "has no prefill group of this type (prefill: 1 x ml.p5.48xlarge)\n")


def _with_parked_prefill(write_config: Any, monkeypatch: pytest.MonkeyPatch, *, spare_only: bool) -> None:
    """dev.yaml with a parked prefill group 'prefill-spare' listed first; ``spare_only`` parks 'prefill' too."""
    def park(data: dict[str, Any]) -> None:
        groups = data["hyperpod"]["instance_groups"]
        prefill = next(g for g in groups if g["name"] == "prefill")
        groups.insert(1, dict(prefill, name="prefill-spare", count=0))
        if spare_only:
            prefill["count"] = 0
            del data["endpoints"]

    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(write_config(park)))


def test_env_plans_on_the_groups_that_have_nodes_not_on_a_parked_one(capsys: pytest.CaptureFixture[str],
                                                                     write_config: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN dev with a parked prefill group listed before the active one
    _with_parked_prefill(write_config, monkeypatch, spare_only=False)
    # WHEN an endpoint block is planned for it
    code, out, _ = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--env", "dev", "--input-tokens", "8192",
                        "--output-tokens", "512", "--concurrency", "32", "--emit-endpoint")
    # THEN the block names the active group, with its node count, so the pasted block loads
    assert code == 0
    assert yaml.safe_load(out)["endpoints"][0]["prefill"] == {"replicas": 1, "instance_group": "prefill"}


def test_env_whose_prefill_groups_are_all_parked_is_refused(capsys: pytest.CaptureFixture[str], write_config: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _with_parked_prefill(write_config, monkeypatch, spare_only=True)
    code, out, err = _run(capsys, *BASE, "--concurrency", "8", "--env", "dev")
    assert (code, out) == (2, "")
    assert err.endswith("dev.yaml: hyperpod.instance_groups: 'ml.p5.48xlarge': environment dev's prefill groups of "
                        "this type are parked (count 0): prefill-spare, prefill; set a count to plan against them\n")


BAD_INPUT = {
    "unknown model": (["--model", "Llama-9B"], "--model: 'Llama-9B': unknown model; known: Llama-3.1-8B"),
    "unknown instance": (["--instance", "ml.p4d.24xlarge"],
                         "--instance: 'ml.p4d.24xlarge': unknown instance type; DPD types: ml.p5.48xlarge"),
    "CPU instance": (["--instance", "ml.m7i.2xlarge"], "--instance: 'ml.m7i.2xlarge': is not a DPD GPU type"),
    "zero input": (["--input-tokens", "0"], "--input-tokens: '0': lengths must be at least 1 token, got 0"),
    "negative output": (["--output-tokens", "-5"], "--output-tokens: '-5': lengths must be at least 1 token"),
    "one output token": (["--output-tokens", "1"], "--output-tokens: '1': output lengths must be at least 2 tokens"),
    "text length": (["--input-tokens", "long"], "--input-tokens: 'long': expected N, N,M or N:weight,M:weight"),
    "zero concurrency": (["--concurrency", "0"], "--concurrency: '0': values must be at least 1"),
    "negative nodes": (["--prefill-nodes", "-1"], "--prefill-nodes: '-1': must be at least 1"),
    "both loads": (["--request-rate", "2"], "--concurrency: '8': give exactly one of --concurrency or "
                                            "--request-rate"),
    "unknown env": (["--env", "nosuch"], "config/nosuch.yaml: <file>: 'nosuch': no such environment file"),
    "plot not png": (["--plot", "out.gif"], "--plot: 'out.gif': must be a .png or .svg file name"),
    "fp4 on H100": (["--kv-dtype", "fp4"], "--kv-dtype: 'fp4': fp4 needs a GPU with FP4 tensor cores (B200, B300); "
                                           "ml.p5.48xlarge has H100"),
    "unknown dtype": (["--dtype", "int4"], "--dtype: 'int4': unknown precision; known: bf16, fp8, fp4"),
    "hit rate of one": (["--prefix-hit-rate", "1"], "--prefix-hit-rate: '1': must be at least 0 and below 1"),
    "negative slo": (["--ttft-slo-ms", "-5"], "--ttft-slo-ms: '-5': must be a positive number of milliseconds"),
    "text slo": (["--tpot-slo-ms", "fast"], "--tpot-slo-ms: 'fast': must be a number of milliseconds"),
    "short max len": (["--max-model-len", "4096"], "max_model_len 4,096 is shorter than the longest request"),
    "bad spread": (["--input-tokens", "4096~x"], "--input-tokens: '4096~x': expected MEAN~SPREAD in tokens"),
    "model too big": (["--model", "Llama-3.1-405B"], "Llama-3.1-405B-Instruct needs 812 GB of BF16 weights"),
    "context exceeded": (["--model", "Qwen2.5-72B", "--input-tokens", "32768"],
                         "exceeds Qwen2.5-72B-Instruct's context of 32,768 tokens"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_fails_with_one_clear_line(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a valid command with one flag made bad
    change, message = BAD_INPUT[case]
    argv = BASE + ["--concurrency", "8"]
    for flag, value in zip(change[::2], change[1::2], strict=True):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    # WHEN it runs
    code, out, err = _run(capsys, *argv)
    # THEN it exits 2 with one line naming the problem and no traceback
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("hpdpd: error: ") and "Traceback" not in err
    assert message in err


def test_missing_required_flags_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "plan", "--instance", "ml.p5.48xlarge", "--concurrency", "8")
    assert (code, err) == (2, "hpdpd: error: --model: missing: is required\n")
    code, _, err = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--input-tokens", "8192",
                        "--output-tokens", "512", "--concurrency", "8")
    assert (code, err) == (2, "hpdpd: error: --instance: missing: is required\n")
