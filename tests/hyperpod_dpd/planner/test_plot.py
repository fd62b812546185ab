"""The sweep plot: a real PNG or SVG, drawn headless, both modes, P50 and P99, SLO lines and operating points."""

from __future__ import annotations

from pathlib import Path

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import make_plan
from hyperpod_dpd.planner.plot import write_plot
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write(tmp_path: Path, workload: Workload, name: str = "plan.png") -> Path:
    plan = make_plan(model=MODELS["Llama-3.3-70B"], instance=instance("ml.p5.48xlarge"), workload=workload,
                     slo=Slo(ttft_s=1.5, tpot_s=0.018), sweep=(1, 2, 4, 8, 16, 32, 64) if workload.closed_loop else ())
    target = tmp_path / name
    write_plot(plan, target)
    return target


def test_writes_a_png_of_both_modes(tmp_path: Path) -> None:
    workload = Workload(inputs=LengthDistribution.fixed(8192), outputs=LengthDistribution.fixed(512),
                        concurrency=(8, 16, 32))
    target = _write(tmp_path, workload)
    data = target.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000


def test_saturated_rates_are_left_out_instead_of_failing(tmp_path: Path) -> None:
    workload = Workload(inputs=LengthDistribution.fixed(8192), outputs=LengthDistribution.fixed(512),
                        request_rates=(1.0, 2.0, 500.0))
    assert _write(tmp_path, workload).read_bytes().startswith(PNG_SIGNATURE)


def test_writes_an_svg_with_slo_lines_and_operating_points(tmp_path: Path) -> None:
    workload = Workload(inputs=LengthDistribution.fixed(8192), outputs=LengthDistribution.fixed(512),
                        concurrency=(32,))
    text = _write(tmp_path, workload, "plan.svg").read_text()
    assert text.startswith("<?xml") and "<svg" in text
    for label in ("TTFT SLO 1500 ms", "TPOT SLO 18 ms", "colocated operating point", "disaggregated operating point",
                  "P99", "P50", "Goodput within SLO"):
        assert label in text
