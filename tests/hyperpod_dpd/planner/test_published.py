"""The held-out error per GPU and quantity, and the AWS HyperPod DPD blog's bands (the issue's acceptance bounds).

A bucket that misses its bound is marked ``xfail(strict=True)`` with the measured errors: the bound stays the truth
and the mark must go (strict) the day the model meets it.
"""

from __future__ import annotations

import statistics

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.measurements import rows
from hyperpod_dpd.planner.plan import Plan, make_plan
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

MEDIAN_BOUND, P90_BOUND, MIN_POINTS = 0.15, 0.35, 3


def _errors(gpu: str, metric: str) -> list[float]:
    return sorted(abs(r.error) for r in rows()
                  if r.measurement.role == "held-out" and (r.measurement.gpu, r.measurement.metric) == (gpu, metric))


def _p90(values: list[float]) -> float:
    return values[min(len(values) - 1, int(0.9 * len(values)))]


MISSES: dict[tuple[str, str], str] = {}  # (GPU, quantity): the measured errors, while a bucket misses
BUCKETS = [pytest.param(gpu, metric, marks=[pytest.mark.xfail(strict=True, reason=MISSES[(gpu, metric)])]
                        if (gpu, metric) in MISSES else [])
           for gpu in ("H100", "H200") for metric in ("ttft", "tpot", "throughput")]


@pytest.mark.parametrize(("gpu", "metric"), BUCKETS)
def test_held_out_error_per_gpu_and_quantity(gpu: str, metric: str) -> None:
    # GIVEN every held-out published point of this GPU and quantity
    errors = _errors(gpu, metric)
    # THEN there are enough of them, their median error is at most 15% and their P90 at most 35%
    assert len(errors) >= MIN_POINTS
    assert statistics.median(errors) <= MEDIAN_BOUND
    assert _p90(errors) <= P90_BOUND


# AWS ML blog "Disaggregated prefill and decode for LLM inference on SageMaker HyperPod" (2026-07-10), as quoted in
# the planner's v3 issue [? the blog page is not in the stores searched]: Llama-3.3-70B TP8, 4,096 in / 256 out,
# concurrency 8-32, one prefill + one decode node against one colocated node. Changes DPD vs colocated, as
# (lowest, highest) fractions; throughput is bounded above only ("up to").
BANDS = {
    ("ml.p5.48xlarge", "tpot"): (-0.66, -0.22), ("ml.p5.48xlarge", "throughput"): (-1.0, 0.35),
    ("ml.p5.48xlarge", "e2e_p50"): (-0.32, -0.14),
    ("ml.p5en.48xlarge", "tpot"): (-0.48, -0.28), ("ml.p5en.48xlarge", "throughput"): (-1.0, 0.64),
}
BAND_MISSES = {
    ("ml.p5.48xlarge", "throughput"): "measured +31%, +57%, +55% at concurrency 8, 16, 32 (band: up to +35%); the "
                                      "LMCache send held in the prefiller's step is counted; what is left would take "
                                      "~50 ms more per request on the single prefiller (C=16), a cost no published "
                                      "measurement supports",
    ("ml.p5.48xlarge", "e2e_p50"): "measured -24%, -36%, -37% (band -14...-32%), the same prefiller-bound gap",
    ("ml.p5en.48xlarge", "tpot"): "measured -31%, -48%, -67% (band -28...-48%); a per-request decoder cost large "
                                  "enough for -48% at concurrency 32 (~48 ms per join) takes concurrency 8 to -19%, "
                                  "out of the band's other end",
}


@pytest.fixture(scope="module")
def reference() -> dict[str, Plan]:
    workload = Workload(inputs=LengthDistribution.fixed(4096), outputs=LengthDistribution.fixed(256),
                        concurrency=(8, 16, 32))
    return {name: make_plan(model=MODELS["Llama-3.3-70B"], instance=instance(name), workload=workload,
                            prefill_nodes=1, decode_nodes=1, baseline_nodes=1)
            for name in ("ml.p5.48xlarge", "ml.p5en.48xlarge")}


def _change(plan: Plan, metric: str) -> list[float]:
    out = []
    for p in plan.predictions:
        c, d = p.colocated, p.disaggregated
        before, after = {"tpot": (c.tpot_s, d.tpot_s), "throughput": (c.output_tokens_per_s, d.output_tokens_per_s),
                         "e2e_p50": (c.e2e_p50_s, d.e2e_p50_s)}[metric]
        out.append(after / before - 1)
    return out


@pytest.mark.parametrize(("name", "metric"), [
    pytest.param(n, m, marks=[pytest.mark.xfail(strict=True, reason=BAND_MISSES[(n, m)])]
                 if (n, m) in BAND_MISSES else []) for n, m in BANDS])
def test_the_aws_blog_bands_are_reproduced(reference: dict[str, Plan], name: str, metric: str) -> None:
    # GIVEN the blog's reference setup on this instance type
    low, high = BANDS[(name, metric)]
    # THEN every published concurrency's change lies within the blog's band (1% of slack for rounding)
    assert all(low - 0.01 <= change <= high + 0.01 for change in _change(reference[name], metric))
