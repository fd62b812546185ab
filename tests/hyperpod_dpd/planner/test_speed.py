"""Speed stays: one plan within 0.1 s of CPU, 1,000 configurations within 2 s, ``hpdpd plan`` starting within 1 s.

CPU time (``time.process_time``, the child's rusage for the start-up) rather than wall time: the machine running the
suite is shared, and waiting for a core is not the planner's cost. ``bench/plan_sweep.py`` prints the wall times.
"""

from __future__ import annotations

import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.plan import PlanError, make_plan
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import plan_sweep  # noqa: E402  (the benchmark's own configurations: the test times what `make bench` times)

# The machine's own speed is not steady: on the 2-core VM that runs the suite the same sweep took 1.75 s of CPU alone and,
# twenty minutes later, 3.0 s alone and 3.02 s beside the other pytest workers and the type check. So the suite does
# not hold the sweep to absolute seconds (`make bench` does: bench/plan_sweep.py exits 1 above 2 s); it times a fixed
# pure-Python probe (the named tuples, float arithmetic and branches the planner's inner loop is made of) just before
# each sweep and bounds the sweep at a multiple of it. Measured: 5.7-6.3 probes per sweep, whether the host was fast or
# slow; the bound is 1.5 times that, so a regression of more than half the planner's cost fails on any machine.
PROBES_PER_SWEEP = 9.0


class _Probe(NamedTuple):
    a: float
    b: float


def _probe_seconds() -> float:
    """CPU time of a fixed loop shaped like the planner's inner one (0.5 s on the machine that measured the bound)."""
    started = time.process_time()
    total, kept = 0.0, []
    for i in range(1, 400_001):
        r = _Probe(math.sqrt(i), i * 1e-3)
        total += r.a / (1.0 + r.b) if r.a > r.b else r.b
        if i % 50 == 0:
            kept.append(total)
    return time.process_time() - started


def test_one_plan_takes_at_most_a_tenth_of_a_second_of_cpu() -> None:
    # GIVEN the heaviest single plan of the benchmark: a 7-point prompt distribution, an SLO and a 7-load sweep
    workload = Workload(inputs=LengthDistribution.parse("4096~2048"), outputs=LengthDistribution.parse("512"),
                        concurrency=(8, 16, 32))
    started = time.process_time()
    plan = make_plan(model=MODELS["Llama-3.3-70B"], instance=instance("ml.p5.48xlarge"), workload=workload,
                     slo=Slo(ttft_s=2.0, tpot_s=0.05), sweep=(1, 2, 4, 8, 16, 32, 64))
    # THEN it is planned in full within 0.1 s of CPU
    assert time.process_time() - started < plan_sweep.TARGET_PLAN_S
    assert len(plan.curve) == 7


@pytest.mark.slow  # a benchmark by intent: it plans the 1,000 configurations twice
def test_a_thousand_configurations_cost_at_most_nine_probes_of_cpu() -> None:
    # GIVEN the benchmark's 1,000 configurations (every model, instance type, length and load)
    sweep = plan_sweep.configurations()
    ratios = []
    for _ in range(3):  # the best of three runs: a cold cache or a busy neighbour core is not the planner's cost
        probe = _probe_seconds()
        started = time.process_time()
        planned = sum(plan_sweep.plan_one(key, name, i, o, (users,)) for key, name, i, o, users in sweep)
        ratios.append((time.process_time() - started) / probe)
    # THEN they are planned (or refused as not fitting) within 1.5 times their measured cost in probes
    assert len(sweep) == 1000 and planned > 800
    assert min(ratios) < PROBES_PER_SWEEP


def test_hpdpd_plan_starts_within_a_second_of_cpu() -> None:
    # WHEN `hpdpd plan --help` runs in a fresh interpreter
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "hyperpod_dpd.cli.main", "plan", "--help"], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # THEN it answers within 1 s of CPU, the planner's modules left unimported until a plan runs
    assert done.returncode == 0 and "--prefill-tp" in done.stdout
    assert (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) < 1.0


def test_building_hpdpds_parser_imports_no_configuration_model_and_no_planner() -> None:
    # GIVEN a fresh interpreter WHEN it builds hpdpd's whole parser (every subcommand's options, as `--help` does)
    probe = ("import sys; from hyperpod_dpd.cli.main import build_parser; build_parser(); "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith(('hyperpod_dpd.config', "
             "'hyperpod_dpd.planner', 'pydantic')))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    # THEN neither the configuration models (pydantic) nor the planner is loaded: they cost a command only when it runs
    assert done.stdout.split() == []


def test_refusing_a_configuration_is_part_of_the_work() -> None:
    # GIVEN a model that does not fit one node
    workload = Workload(inputs=LengthDistribution.fixed(8192), outputs=LengthDistribution.fixed(512),
                        concurrency=(8,))
    started = time.process_time()
    try:
        make_plan(model=MODELS["Llama-3.1-405B"], instance=instance("ml.p5.48xlarge"), workload=workload)
    except PlanError:
        pass
    else:  # pragma: no cover - the catalogue says 812 GB of BF16 weights cannot fit 640 GB of HBM
        raise AssertionError("405B BF16 was planned on one p5")
    assert time.process_time() - started < plan_sweep.TARGET_PLAN_S
