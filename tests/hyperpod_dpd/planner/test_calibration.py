"""The calibration table: every constant says where it comes from, calibration rows are fitted, held-out rows are
predicted within bounds that the published numbers allow (hyperpod_dpd/planner/measurements.py lists the sources)."""

from __future__ import annotations

import dataclasses

import pytest

from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.measurements import measurements, rows

ROWS = {row.measurement.key: row for row in rows()}

# Held-out error bounds of the Dynamo, NIM and transfer rows: relative error for absolute units, percentage points
# for relative changes. They are the errors the model has today (docs/planner.md, "Calibration"), rounded up; a
# change that worsens them fails here. The TensorRT-LLM and Mooncake rows are bounded per bucket below.
HELD_OUT_BOUNDS = {
    "dynamo-itl-aggregated": 0.29,  # the colocated prefill stall is overestimated (36.5 vs 28.5 ms)
    # 0.06, not the 0.031 of the open-loop engine rounded up: the closed-loop engine (engine.closed_loop_engine)
    # splits the 10 users between prefill and decode, so the colocated engine emits 215 instead of 210 tok/s
    # (published 204) while its ITL and P95 TTFT come closer; the H100 bucket bounds of test_published hold.
    # 0.065 since the LM head and embedding left the per-token matmuls: 8B's prefill efficiency refits lower
    "dynamo-tput-aggregated": 0.065,
    "dynamo-tput-disaggregated": 0.06,
    "dynamo-p95-aggregated": 0.42,  # vLLM's aggregated queue has a longer tail than M/G/1 predicts
    "dynamo-p95-disaggregated": 0.025,
    "dynamo-gain-1000": 6.6, "dynamo-gain-2000": 12.5, "dynamo-gain-4000": 9.0, "dynamo-gain-8000": 0.7,
    "dynamo-itl-change-1000": 2.5, "dynamo-itl-change-2000": 7.0, "dynamo-itl-change-4000": 13.0,
    "dynamo-itl-change-8000": 13.0,
    "transferengine-efa-peak": 0.15, "p5en-line-rate": 0.0,
    # vLLM's nightly latency tests (8 x 32 in / 128 out, BF16): the decode step on H100 and H200. The 8B H200 row
    # is 0.18: a decode step no longer streams the 1 GB input embedding (6.5% of 8B's weights), and H200's run was
    # already faster than the H100 one predicts
    "vllm-latency-llama-3.1-8b-h200-tp1": 0.18, "vllm-latency-llama-3.3-70b-h200-tp4": 0.14,
    "vllm-latency-llama-3.1-8b-h100-tp1": 0.02, "vllm-latency-llama-3.3-70b-h100-tp4": 0.015,
    # SGLang Llama-3.3-70B BF16 TP4 and Llama-3.1-405B TP8 on H200, open loop, with SGLang's per-request cost
    # (calibration.SGLANG, fitted on the 70B's 1 request/s TTFT): the 70B's queue at 4 requests/s and the 405B's
    # TTFT stay 13-15% short (the 405B's cost is larger than the 70B's), the median ITL close
    "datacrunch-ttft-r2": 0.01, "datacrunch-ttft-r4": 0.15,
    "datacrunch-itl-r1": 0.04, "datacrunch-itl-r2": 0.015, "datacrunch-itl-r4": 0.18,
    "datacrunch-llama-3.1-405b-ttft-r1": 0.13, "datacrunch-llama-3.1-405b-ttft-r2": 0.16,
    "datacrunch-llama-3.1-405b-itl-r1": 0.06, "datacrunch-llama-3.1-405b-itl-r2": 0.065,
}
# NIM 1.8.0, Llama-3.3-70B FP8 TP2 on 2 x H100 (published.NIM): per input length, the bounds of TTFT, ITL and output
# throughput at concurrency 1, 5, 25 and 50 (None: the row is a calibration row). AIPerf's users start together and
# are stepped in lock-step (planner.lockstep): ITL and throughput hold within 15%, TTFT within 16% but at 5,000
# tokens and 25+ users (-26/-25%: fewer whole prompts fit the 2,048-token step than the measured queue implies) and
# 20,000 tokens at 5 and 50 users (-35%, +25%: the KV cache admits whole requests only, TensorRT-LLM's
# GUARANTEED_NO_EVICT policy; docs/planner.md, "What the errors say").
NIM_BOUNDS = {
    5000: ((None, 0.15, 0.27, 0.26), (0.04, 0.06, 0.10, 0.12), (0.04, 0.05, 0.08, 0.10)),
    500: ((0.07, 0.15, 0.15, 0.02), (None, 0.03, 0.03, 0.07), (0.01, 0.03, 0.03, 0.06)),
    200: ((0.03, 0.07, None, 0.02), (0.01, 0.03, 0.06, 0.09), (0.01, 0.03, 0.07, 0.09)),
    1000: ((0.04, 0.03, 0.14, 0.16), (0.02, 0.04, 0.04, 0.08), (0.02, 0.04, 0.04, 0.08)),
    20000: ((0.02, 0.36, 0.13, 0.26), (0.02, 0.07, 0.14, 0.12), (0.02, 0.04, 0.14, 0.11)),
}
HELD_OUT_BOUNDS |= {f"nim-{quantity}-{isl}-c{users}": bound for isl, per_quantity in NIM_BOUNDS.items()
                    for quantity, bounds in zip(("ttft", "itl", "tput"), per_quantity, strict=True)
                    for users, bound in zip((1, 5, 25, 50), bounds, strict=True) if bound is not None}
CEILINGS = {"trtllm": 0.44, "mooncake": 0.13}  # no single TensorRT-LLM or Mooncake row may be off by more


def test_every_factor_says_where_it_comes_from() -> None:
    names = {f.name for f in dataclasses.fields(Calibration)} - {"notes"}
    assert names == set(DEFAULT_CALIBRATION.notes)
    calibrated = {n for n, note in DEFAULT_CALIBRATION.notes.items() if note.startswith(("calibrated", "measured"))}
    assert {"prefill_efficiency", "low_precision_efficiency", "hbm_efficiency", "transfer_efficiency",
            "transfer_fixed_s", "join_s_per_block", "moe_prefill_efficiency"} <= calibrated


def test_the_decoder_stall_factor_is_gone() -> None:
    assert "decoder_transfer_stall" not in {f.name for f in dataclasses.fields(Calibration)}


def test_efficiencies_are_fractions_of_the_datasheet_peaks() -> None:
    for name in ("prefill_efficiency", "low_precision_efficiency", "moe_prefill_efficiency", "hbm_efficiency",
                 "transfer_efficiency", "nvlink_efficiency"):
        assert 0 < getattr(DEFAULT_CALIBRATION, name) <= 1


def test_each_fitted_constant_has_exactly_one_calibration_row_and_it_fits() -> None:
    # GIVEN the rows that fixed a constant
    fitted = [r for r in ROWS.values() if r.measurement.role == "calibration"]
    # THEN each constant is fitted once, and the fit reproduces its measurement within 2% (or 0.5 points)
    assert sorted(r.measurement.fits for r in fitted) == sorted(
        {"prefill_efficiency", "transfer_fixed_s", "join_s_per_block", "hbm_efficiency", "low_precision_efficiency",
         "transfer_efficiency", "overlap_loss", "efa_messages_per_s_per_interface (MOONCAKE_EFA)",
         "transfer_efficiency (MOONCAKE_EFA)", "request_overhead_s (SGLANG)", "chunk_tokens (NIM_TRTLLM)"})
    for row in fitted:
        if row.measurement.fits == "chunk_tokens (NIM_TRTLLM)":
            continue  # a step budget is a power of two, not a continuous fit: the next test holds it
        assert abs(row.error) <= (0.5 if row.measurement.unit == "%" else 0.02), row.measurement.key


def test_nims_step_budget_is_the_power_of_two_closest_to_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.planner import measurements
    from hyperpod_dpd.planner.calibration import NIM_TRTLLM

    # GIVEN the NIM row that fixes TensorRT-LLM's step budget, and the shipped budget
    key = "nim-ttft-200-c25"
    errors = {}
    # WHEN the row is predicted at every power-of-two budget from 1,024 to 8,192
    for budget in (1024, 2048, 4096, 8192):
        monkeypatch.setattr(measurements, "NIM_TRTLLM", {"chunk_tokens": budget})
        measurements._nim.cache_clear()
        errors[budget] = measurements.predict(key) / ROWS[key].measurement.published - 1
    measurements._nim.cache_clear()
    # THEN the shipped budget is the one closest to the published TTFT, and the others miss by far more
    assert min(errors, key=lambda b: abs(errors[b])) == NIM_TRTLLM["chunk_tokens"]
    assert sorted(abs(e) for e in errors.values())[1] > 2 * abs(errors[NIM_TRTLLM["chunk_tokens"]])


def test_sglangs_request_cost_is_what_its_calibration_row_leaves_over(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.planner import measurements
    from hyperpod_dpd.planner.calibration import SGLANG

    # GIVEN SGLang's 70B median TTFT at 1 request/s, predicted without any per-request cost
    key = "datacrunch-ttft-r1"
    monkeypatch.setattr(measurements, "SGLANG", {"request_overhead_s": 0.0})
    measurements._online.cache_clear()
    try:
        steps = measurements.predict(key)
    finally:
        measurements._online.cache_clear()
    # THEN the shipped cost is the rest of the published value (an open loop: the median shifts by the cost), rounded
    assert SGLANG["request_overhead_s"] == pytest.approx((ROWS[key].measurement.published - steps) / 1e3, abs=5e-5)
    # AND vLLM, the operator's engine, carries none: Dynamo's unqueued TTFT leaves no room for one
    assert DEFAULT_CALIBRATION.request_overhead_s == 0.0


def test_every_held_out_row_is_bounded() -> None:
    held = {k for k, r in ROWS.items() if r.measurement.role == "held-out"}
    assert held == set(HELD_OUT_BOUNDS) | {k for k in held if k.startswith(tuple(CEILINGS))}
    for key, bound in HELD_OUT_BOUNDS.items():
        assert abs(ROWS[key].error) <= bound + 1e-9, (key, ROWS[key].predicted, ROWS[key].error)
    for key in held - set(HELD_OUT_BOUNDS):
        assert abs(ROWS[key].error) <= CEILINGS[key.split("-")[0]], (key, ROWS[key].predicted, ROWS[key].error)


def test_the_table_holds_at_least_forty_published_points() -> None:
    assert len(ROWS) >= 40 + 30 + 10  # 30 Dynamo, NIM and transfer rows, TensorRT-LLM, Mooncake, vLLM and SGLang
    assert sum(1 for k in ROWS if k.startswith(("trtllm", "mooncake"))) >= 40


def test_the_constants_are_the_fit_of_their_rows() -> None:
    # GIVEN the fit of every calibrated constant on its own row, started from the shipped values
    from hyperpod_dpd.planner.fit import FITS, fit

    refit = fit(rounds=1)
    # THEN the shipped constants are that fit, rounded (within 1%)
    for one in FITS:
        shipped, fitted = getattr(DEFAULT_CALIBRATION, one.constant), getattr(refit, one.constant)
        assert shipped == pytest.approx(fitted, rel=0.01, abs=1e-6), one.constant


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_assumed_allreduce_cost_matches_vllms_tp4_against_tp1(gpu: str) -> None:
    # GIVEN vLLM's nightly latency tests of Llama-3 8B on one GPU and 70B on four (160 all-reduces per step)
    tp1, tp4 = ROWS[f"vllm-latency-llama-3.1-8b-{gpu}-tp1"], ROWS[f"vllm-latency-llama-3.3-70b-{gpu}-tp4"]
    # THEN the TP4 row is off by the same share as the TP1 row (within 5 points): the assumed all-reduce latency
    # and NVLink efficiency add what tensor parallelism costs, no more, no less
    assert abs(tp4.error - tp1.error) <= 0.05, (tp1.error, tp4.error)


def test_the_transfer_never_beats_the_published_efa_peak() -> None:
    # GIVEN TransferEngine's 400 Gbit/s per GPU on EFA, the fastest published KV path
    row = ROWS["transferengine-efa-peak"]
    # THEN the planner's NIXL path stays below it
    assert row.predicted < row.measurement.published


def test_disaggregation_gains_grow_with_the_prompt_as_measured() -> None:
    # WHEN the Dynamo ISL sweep is predicted
    gains = [ROWS[f"dynamo-gain-{isl}"].predicted for isl in (1000, 2000, 4000)]
    itl = [ROWS[f"dynamo-itl-change-{isl}"].predicted for isl in (1000, 2000, 4000, 8000)]
    # THEN the gain rises to double digits with the prompt, and ITL falls further with every length
    assert gains == sorted(gains) and gains[2] > 10
    assert itl == sorted(itl, reverse=True)


@pytest.mark.xfail(strict=True, reason="measured +6.6 pp at ISL 1000 (published 0) since the v3 overlap loss; "
                                       "the planner overstates DPD's gain on short prompts")
def test_disaggregation_is_about_even_at_one_thousand_tokens() -> None:
    assert abs(ROWS["dynamo-gain-1000"].predicted) < 3


def test_every_measurement_names_its_source_and_role() -> None:
    for m in measurements():
        assert m.source and m.what and m.role in ("calibration", "held-out")
        assert (m.role == "calibration") == bool(m.fits)


@pytest.mark.parametrize("key", ["nim-itl-5000-c25", "nim-ttft-5000-c50"])
def test_fp8_points_use_fp8_weights(key: str) -> None:
    assert "FP8" in ROWS[key].measurement.source


def test_every_measurement_has_a_key_of_its_own() -> None:
    # GIVEN every row of the table THEN no two share a key (a second row would hide the first from bench and tests)
    keys = [m.key for m in measurements()]
    assert len(keys) == len(set(keys))
