"""The calibrated model reproduces the public measurement it was fitted to: Dynamo on p5.48xlarge over EFA.

Source (ai-dynamo/dynamo docs/kubernetes/disagg-communication-guide.md): Llama-3.1-8B, one H100 per
worker (4 EFA interfaces each), OSL 50, concurrency 10, aggregated worker vs one prefill + one decode worker.
At ISL 8000: 204 vs 248 output tok/s, ITL 28.5 vs 16.9 ms. Over ISL 1000/2000/4000/8000: throughput ~0/+3/+14/+22%,
ITL -7/-11/-18/-41%.
"""

from __future__ import annotations

import dataclasses

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.serving import Colocated, Disaggregated, Point
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

GIB = 1024**3


def _dynamo(isl: int, calibration: Calibration = DEFAULT_CALIBRATION) -> tuple[Point, Point]:
    workload = Workload(inputs=LengthDistribution.fixed(isl), outputs=LengthDistribution.fixed(50), concurrency=(10,))
    common = {"model": MODELS["Llama-3.1-8B"], "instance": instance("ml.p5.48xlarge"), "tensor_parallel": 1,
              "workload": workload, "calibration": calibration}
    aggregated = Colocated(nodes=1, **common).at_concurrency(10)
    disaggregated = Disaggregated(prefill=1, decode=1, threshold=0, pd_buffer_bytes=8 * GIB,
                                  **common).at_concurrency(10)
    return aggregated, disaggregated


def test_every_factor_says_where_it_comes_from() -> None:
    names = {f.name for f in dataclasses.fields(Calibration)} - {"notes"}
    assert names == set(DEFAULT_CALIBRATION.notes)
    calibrated = [n for n, note in DEFAULT_CALIBRATION.notes.items() if note.startswith("calibrated")]
    assert {"prefill_efficiency", "hbm_efficiency", "efa_efficiency", "transfer_fixed_s",
            "decoder_transfer_stall", "moe_prefill_efficiency"} <= set(calibrated)


def test_efficiencies_are_fractions_of_the_datasheet_peaks() -> None:
    for name in ("prefill_efficiency", "moe_prefill_efficiency", "hbm_efficiency", "efa_efficiency",
                 "nvlink_efficiency", "decoder_transfer_stall"):
        assert 0 < getattr(DEFAULT_CALIBRATION, name) <= 1


def test_throughput_at_isl_8000_matches_the_measurement() -> None:
    # WHEN the Dynamo setup is predicted at ISL 8000
    aggregated, disaggregated = _dynamo(8000)
    # THEN both throughputs land within 10% of 204 and 248 output tok/s
    assert aggregated.output_tokens_per_s == pytest.approx(204, rel=0.10)
    assert disaggregated.output_tokens_per_s == pytest.approx(248, rel=0.10)
    # AND the disaggregated ITL within 15% of 16.9 ms
    assert disaggregated.tpot_s == pytest.approx(16.9e-3, rel=0.15)


def test_the_disaggregation_gain_grows_with_the_prompt_as_measured() -> None:
    # WHEN the ISL sweep is predicted
    ratios = {isl: _dynamo(isl) for isl in (1000, 2000, 4000, 8000)}
    itl = [d.tpot_s / a.tpot_s - 1 for a, d in ratios.values()]
    throughput = {isl: d.output_tokens_per_s / a.output_tokens_per_s - 1 for isl, (a, d) in ratios.items()}
    # THEN the ITL gain grows with the prompt, starting near the measured -7%
    assert itl == sorted(itl, reverse=True)
    assert itl[0] == pytest.approx(-0.07, abs=0.05)
    # AND throughput is about even at ISL 1000 and up by more than 10% from ISL 4000
    assert abs(throughput[1000]) <= 0.10
    assert throughput[4000] > 0.10 and throughput[8000] > 0.10


def test_without_the_transfer_stall_the_disaggregated_itl_is_far_too_low() -> None:
    # GIVEN the same setup with a transfer that never stalls the decoder
    _, disaggregated = _dynamo(8000, DEFAULT_CALIBRATION.with_overrides(decoder_transfer_stall=0.0))
    # THEN ITL falls under half the measured 16.9 ms: the stall is what the measurement needs
    assert disaggregated.tpot_s < 16.9e-3 / 2
