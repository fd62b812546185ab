"""``hpdpd plan``: JSON shape, plot, endpoint block, --env limits, and one clear line for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.cli.main import main

BASE = ["plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens", "8192",
        "--output-tokens", "512"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_carries_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the 70B workload is planned at two concurrencies as JSON
    code, out, err = _run(capsys, *BASE, "--concurrency", "8,16", "--output", "json")
    data = json.loads(out)
    # THEN the command succeeds with the fields the issue names
    assert (code, err) == (0, "")
    assert data["kv_bytes_per_token"] == 327_680
    assert data["kv_transfer_ms"] == pytest.approx(7.895, abs=1e-3)  # 8192 x 40,960 B per rank at 42.5 GB/s
    assert {k: data["recommendation"][k] for k in ("prefill_replicas", "decode_replicas", "routing_threshold",
                                                    "pd_buffer_size_bytes", "tensor_parallel_size")} == {
        "prefill_replicas": 1, "decode_replicas": 1, "routing_threshold": 4096,
        "pd_buffer_size_bytes": 8589934592, "tensor_parallel_size": 8}  # 16 x 8,192 x 40,960 B + 10% = 5.5 GiB: the 8 GiB floor
    assert [p["concurrency"] for p in data["predictions"]] == [8, 16]
    for prediction in data["predictions"]:
        for mode in ("colocated", "disaggregated"):
            values = [prediction[mode][k] for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s")]
            assert all(isinstance(v, float) and v > 0 for v in values)
    # AND without an SLO, DPD's longer TTFT tail outweighs its gain: the verdict names the trade, not a win
    verdict = data["verdict"]
    assert verdict["decision"] == "stay colocated" and len(verdict["reasons"]) >= 2
    assert verdict["goodput_gain_per_node"] > 0.05  # a gain past the margin, so the trade is what decides
    assert verdict["latency_trade"]["metric"] == "ttft_p99_ms"
    assert verdict["latency_trade"]["change"] > verdict["goodput_gain_per_node"]


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
    assert "hpdpd: warning: the workload would want 2 prefill nodes; environment dev has 1" in err


def test_env_recommendation_and_verdict_use_one_layout(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN dev's one prefill and one decode node, and a workload that would want two prefill nodes
    code, out, _ = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--env", "dev", "--input-tokens", "8192",
                        "--output-tokens", "512", "--concurrency", "32", "--output", "json")
    data = json.loads(out)
    # THEN the recommendation, the layout the predictions use and the verdict's DPD layout are the same one
    assert code == 0
    assert data["recommendation"]["prefill_replicas"] == data["layout"]["prefill_nodes"] == 1
    assert data["recommendation"]["sized_prefill_replicas"] == 2 and data["layout"]["what_if"] == []
    assert any("(1P + 1D" in reason for reason in data["verdict"]["reasons"])
    assert any("all that environment dev has" in reason for reason in data["recommendation"]["reasons"])


def test_env_plans_a_larger_layout_as_a_labelled_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN two prefill nodes are asked for on dev, which has one
    code, out, err = _run(capsys, *BASE, "--concurrency", "8", "--env", "dev", "--prefill-nodes", "2", "--output",
                          "json")
    data = json.loads(out)
    # THEN the layout is planned as asked, and it and its same-size colocated baseline are labelled as beyond the
    # environment
    assert (code, err) == (0, "")
    assert data["layout"]["prefill_nodes"] == data["recommendation"]["prefill_replicas"] == 2
    prefill, baseline = data["layout"]["what_if"]
    assert prefill.startswith("what if: 2 prefill node(s), beyond environment dev's 1 x ml.p5.48xlarge "
                              "(tests/fixtures/config/dev.yaml)")
    assert baseline.startswith("what if: 3 colocated baseline node(s), beyond environment dev's 2 x")
    assert {prefill, baseline} <= set(data["warnings"])


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
    "odd prefill TP": (["--prefill-tp", "3"], "prefill tensor parallelism 3 is not possible for Llama-3.3-70B on "
                                              "ml.p5.48xlarge: it must be a power of two up to 8 GPUs"),
    "decode TP too small": (["--decode-tp", "1"], "decode tensor parallelism 1: 131.4 GiB of BF16 weights per GPU"),
    "zero block size": (["--block-size", "0"], "--block-size: '0': must be at least 1"),
    "huge seqs": (["--max-num-seqs", "100000000"], "--max-num-seqs: 100000000: must be at most 65,536"),
    "offline and concurrency": (["--offline", "8"], "--offline: '8': give only one of --offline, --concurrency"),
    "too many per node": (["--prefill-tp", "4", "--prefill-per-node", "3"],
                          "3 prefill replicas per node do not fit: ml.p5.48xlarge holds 1 to 2 replicas of TP4"),
    "both models": (["--model-config", "x.json"], "--model-config: 'x.json': give either --model or --model-config"),
    "unknown connector": (["--kv-connector", "rdma"], "--kv-connector: 'rdma': must be one of lmcache, nixl"),
    "unknown mode": (["--mode", "mixed"], "--mode: 'mixed': must be one of both, colocated, disaggregated"),
    "negative threshold": (["--routing-threshold", "-1"],
                           "--routing-threshold: '-1': must be a whole number of at least 0"),
    "unknown start": (["--start", "staggered"], "--start: 'staggered': must be one of steady, together"),
    "together with both modes": (["--start", "together"],
                                 "--mode: missing: --start together models colocated replicas only"),
    "together with lengths that vary": (["--start", "together", "--mode", "colocated", "--input-tokens", "100,200"],
                                        "--input-tokens: '100,200': --start together needs one fixed length"),
    "together offline": (["--start", "together", "--offline", "8"], "--start: 'together': users that start together "
                                                                    "are a closed loop: give --concurrency, not"),
    "together with a prefix cache": (["--start", "together", "--mode", "colocated", "--prefix-hit-rate", "0.5"],
                                     "--prefix-hit-rate: '0.5': is not modelled with --start together"),
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
    # GIVEN no model at all THEN the line names both ways to give one and the catalogue's models
    code, _, err = _run(capsys, "plan", "--instance", "ml.p5.48xlarge", "--concurrency", "8")
    assert (code, err) == (2, "hpdpd: error: --model: missing: is required (or --model-config FILE): one of "
                              f"{', '.join(MODELS)}\n")
    code, _, err = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--input-tokens", "8192",
                        "--output-tokens", "512", "--concurrency", "8")
    assert (code, err) == (2, "hpdpd: error: --instance: missing: is required\n")


def test_users_that_start_together_need_a_closed_loop(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN users that start together are asked for at a request rate (an open loop has no users)
    code, out, err = _run(capsys, *BASE, "--request-rate", "2", "--start", "together", "--mode", "colocated")
    # THEN it is refused in one line naming --start
    assert (code, out) == (2, "")
    assert err == ("hpdpd: error: --start: 'together': users that start together are a closed loop: give "
                   "--concurrency\n")


def test_users_that_start_together_are_stepped_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN 16 users of 1,000 / 200 tokens on one TP8 node, once steady and once starting together
    argv = [*BASE[:6], "1000", "--output-tokens", "200", "--concurrency", "16", "--mode", "colocated",
            "--baseline-nodes", "1"]
    steady = _json(capsys, *argv)
    together = _json(capsys, *argv, "--start", "together")
    # THEN the JSON names the start, and the stepped cohort's prompts share steps: each waits for the whole cohort's
    # prefill step instead of a short queue, so TTFT is longer while the decode step stays the same within 10%
    assert (steady["workload"]["start"], together["workload"]["start"]) == ("steady", "together")
    s, t = steady["predictions"][0]["colocated"], together["predictions"][0]["colocated"]
    assert t["ttft_ms"] > 1.5 * s["ttft_ms"]
    assert t["tpot_ms"] == pytest.approx(s["tpot_ms"], rel=0.1)
    assert t["ttft_p99_ms"] >= t["ttft_p50_ms"] > 0


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *argv, "--output", "json")
    assert code == 0, err
    return json.loads(out)


DYNAMO = ["plan", "--model", "Llama-3.1-8B", "--instance", "ml.p5.48xlarge", "--input-tokens", "8000",
          "--output-tokens", "50", "--concurrency", "10", "--prefill-tp", "1", "--decode-tp", "1",
          "--prefill-per-node", "1", "--decode-per-node", "1", "--colocated-tp", "1", "--colocated-replicas", "1",
          "--prefill-nodes", "1", "--decode-nodes", "1", "--baseline-nodes", "1", "--kv-connector", "nixl"]


def test_published_setups_are_expressible_through_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.planner.measurements import rows

    predicted = {r.measurement.key: r.predicted for r in rows()}
    # GIVEN Dynamo's p5 guide: one H100 per aggregated, prefill and decode worker, NixlConnector, ISL 8000 / OSL 50
    data = _json(capsys, *DYNAMO)
    point = data["predictions"][0]
    # THEN the flags reproduce the published setup exactly as the calibration table models it
    assert point["colocated"]["tpot_ms"] == pytest.approx(predicted["dynamo-itl-aggregated"], abs=0.01)
    assert point["colocated"]["output_tokens_per_s"] == pytest.approx(predicted["dynamo-tput-aggregated"], abs=0.1)
    assert point["disaggregated"]["tpot_ms"] == pytest.approx(predicted["dynamo-itl-disaggregated"], abs=0.01)
    assert point["disaggregated"]["output_tokens_per_s"] == pytest.approx(predicted["dynamo-tput-disaggregated"],
                                                                          abs=0.1)
    assert data["layout"]["prefill_replicas_per_node"] == data["layout"]["decode_replicas_per_node"] == 1
    # GIVEN NIM's benchmark: Llama-3.3-70B FP8 weights and KV, one TP2 engine on an H100 node, colocated only, AIPerf's
    # users starting together, each prompt carrying the chat template, TensorRT-LLM's 2,048-token step budget
    data = _json(capsys, "plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens", "5034",
                 "--output-tokens", "500", "--concurrency", "50", "--dtype", "fp8", "--kv-dtype", "fp8",
                 "--colocated-tp", "2", "--colocated-replicas", "1", "--baseline-nodes", "1", "--mode", "colocated",
                 "--start", "together", "--max-num-batched-tokens", "2048")
    point = data["predictions"][0]
    # THEN the colocated prediction is the table's, and the disaggregated one is not reported
    assert data["mode"] == "colocated" and "disaggregated" not in point and data["workload"]["start"] == "together"
    assert point["colocated"]["tpot_ms"] == pytest.approx(predicted["nim-itl-5000-c50"], abs=0.01)
    assert point["colocated"]["output_tokens_per_s"] == pytest.approx(predicted["nim-tput-5000-c50"], abs=0.1)


def test_mode_table_offline_and_engine_limits(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN only the disaggregated mode is asked for, as a table
    code, out, _ = _run(capsys, *DYNAMO, "--mode", "disaggregated")
    # THEN the table names that mode alone and no verdict is printed
    assert code == 0 and "Predictions (disaggregated)" in out and "Verdict" not in out
    # WHEN an offline run holds 64 requests in flight
    offline = _json(capsys, *BASE, "--offline", "64")
    assert offline["workload"]["offline"] is True and [p["concurrency"] for p in offline["predictions"]] == [64]
    # AND the scheduler may run only 8 of them at once
    limited = _json(capsys, *BASE, "--offline", "64", "--max-num-seqs", "8")
    # THEN it serves less, and its queue shows in TTFT
    for mode in ("colocated", "disaggregated"):
        free, capped = offline["predictions"][0][mode], limited["predictions"][0][mode]
        assert capped["output_tokens_per_s"] < free["output_tokens_per_s"]
        assert capped["ttft_ms"] > free["ttft_ms"]
    # WHEN the chunked-prefill budget is halved, the longest colocated step (a prefill chunk) shrinks
    small = _json(capsys, *BASE, "--concurrency", "16", "--max-num-batched-tokens", "2048")
    default = _json(capsys, *BASE, "--concurrency", "16")
    assert small["predictions"][0]["colocated"]["max_itl_ms"] < default["predictions"][0]["colocated"]["max_itl_ms"]
    # WHEN the connector moves 16-token blocks, the decoder's per-block join work grows and TPOT with it
    blocks = _json(capsys, *BASE, "--concurrency", "16", "--block-size", "16")
    assert blocks["predictions"][0]["disaggregated"]["tpot_ms"] > default["predictions"][0]["disaggregated"]["tpot_ms"]


def test_every_gpu_instance_of_the_catalogue_can_be_planned(capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES

    for name, spec in DPD_INSTANCE_TYPES.items():
        # FP4 where the GPU has FP4 tensor cores, FP8 elsewhere
        dtype = "fp4" if spec.gpu is not None and spec.gpu.model in ("B200", "B300") else "fp8"
        data = _json(capsys, "plan", "--model", "Llama-3.3-70B", "--instance", name, "--input-tokens", "4096",
                     "--output-tokens", "256", "--concurrency", "16", "--dtype", dtype, "--kv-dtype", dtype)
        assert data["instance_type"] == name and data["precision"] == {"weights": dtype, "kv_cache": dtype}
        assert data["predictions"][0]["disaggregated"]["output_tokens_per_s"] > 0


def test_a_model_from_its_config_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN Llama-3.3-70B-Instruct's config.json fields (huggingface.co/meta-llama/Llama-3.3-70B-Instruct)
    config = {"_name_or_path": "meta-llama/Llama-3.3-70B-Instruct", "num_hidden_layers": 80, "hidden_size": 8192,
              "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
              "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    from_file = _json(capsys, "plan", "--model-config", str(path), *BASE[3:], "--concurrency", "16")
    catalogue = _json(capsys, *BASE, "--concurrency", "16")
    # THEN it plans like the catalogue entry (same KV bytes; the recounted parameters match the published count)
    assert from_file["model"] == "Llama-3.3-70B-Instruct"
    assert from_file["kv_bytes_per_token"] == catalogue["kv_bytes_per_token"]
    a, b = (d["predictions"][0]["disaggregated"]["tpot_ms"] for d in (from_file, catalogue))
    assert a == pytest.approx(b, rel=0.01)
    # AND a config the planner cannot model is one line naming the file and field
    config["kv_lora_rank"] = 512
    path.write_text(json.dumps(config))
    code, out, err = _run(capsys, "plan", "--model-config", str(path), *BASE[3:], "--concurrency", "16")
    assert (code, out) == (2, "")
    assert err == (f"hpdpd: error: {path}: kv_lora_rank: 512: is not supported by the planner: multi-head latent "
                   "attention (DeepSeek-V2/V3 style) has a different KV size\n")
