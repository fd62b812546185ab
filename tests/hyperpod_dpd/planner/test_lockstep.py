"""Users that start together, stepped request by request: cohorts, the step budget, KV admission and replicas."""

from __future__ import annotations

import time

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner import lockstep
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION as CAL
from hyperpod_dpd.planner.formulas import chunks, prefill_seconds, step_costs, step_seconds
from hyperpod_dpd.planner.serving import Colocated
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

P5 = instance("ml.p5.48xlarge")
MODEL = MODELS["Llama-3.3-70B"].with_precision(weights="fp8", kv="fp8")
COSTS = step_costs(model=MODEL, instance=P5, tensor_parallel=2, calibration=CAL)
ROOMY = 1e9  # KV tokens: more than any test needs


def _run(users: int, *, inputs: int = 500, outputs: int = 100, budget: int = 8192,
         kv_slots: float = ROOMY, max_seqs: int = 1024) -> lockstep.Run:
    found = lockstep.run(COSTS, inputs=inputs, outputs=outputs, users=users, budget=budget, max_seqs=max_seqs,
                         kv_slots=kv_slots)
    assert found is not None
    return found


def test_a_lone_user_waits_for_its_own_prefill_only() -> None:
    # GIVEN one user of 5,000-token prompts, stepped with a 2,048-token budget
    found = _run(1, inputs=5000, budget=2048)
    # THEN its TTFT is its chunked prefill, step by step (three chunks), and its TPOT a bare decode step's
    assert found.ttft_s == pytest.approx(prefill_seconds(COSTS, tokens=5000, chunk_tokens=2048), rel=1e-4)
    assert len(chunks(5000, 2048)) == 3
    middle = step_seconds(COSTS, batch=1, context=5000 + 50)
    assert found.tpot_s == pytest.approx(middle, rel=0.01)
    assert found.request_rate == pytest.approx(1 / (found.ttft_s + 99 * found.tpot_s), rel=1e-6)


def test_a_cohort_that_fits_the_budget_is_prefilled_in_one_step() -> None:
    # GIVEN four users of 500-token prompts that start together and a budget that holds all four prompts
    found = _run(4, budget=2048)
    # THEN every request's first token comes from one step carrying the four prompts (no decoder is left)
    both = lockstep._step(COSTS, 0, 0.0, [(500, 0, True)] * 4)
    assert found.ttft_s == pytest.approx(both, rel=1e-9)
    assert found.observed.ttft.quantile(0.0) == found.observed.ttft.quantile(1.0)
    # AND they decode as one batch of four
    assert found.decode_batch == pytest.approx(4 * 99 * found.tpot_s / (found.ttft_s + 99 * found.tpot_s), rel=0.02)


def test_a_budget_smaller_than_the_cohort_splits_it_into_smaller_steps() -> None:
    # GIVEN the same four users with room for two whole prompts per step
    whole = _run(4, budget=2048)
    split = _run(4, budget=1000)
    # THEN no request waits for a four-prompt step any more: the cohort splits, the fastest first token is one prompt
    # riding with the other users' decode tokens, and every TTFT is shorter than the whole cohort's step
    riding = lockstep._step(COSTS, 2, 1000.0, [(500, 0, True)])
    assert split.observed.ttft.quantile(0.0) == pytest.approx(riding, rel=0.02)
    assert split.observed.ttft.quantile(1.0) < whole.ttft_s
    assert split.ttft_s < 0.6 * whole.ttft_s


def test_the_kv_cache_admits_whole_requests_and_the_rest_queue() -> None:
    # GIVEN eight users and a KV cache that holds two requests of 600 tokens to their end
    capped = _run(8, inputs=500, outputs=100, kv_slots=1200)
    free = _run(8, inputs=500, outputs=100)
    # THEN at most two decode at once, the others wait their turn in TTFT, and fewer requests finish per second
    assert capped.decode_batch <= 2 + 1e-9
    assert capped.ttft_s > 2 * 99 * capped.tpot_s
    assert capped.request_rate < free.request_rate
    # AND a request larger than the cache cannot run at all
    assert lockstep.run(COSTS, inputs=500, outputs=100, users=1, budget=8192, max_seqs=8, kv_slots=599) is None


def test_max_num_seqs_caps_the_running_requests() -> None:
    assert _run(8, max_seqs=3).decode_batch <= 3 + 1e-9


def test_replicas_deal_the_users_round_robin_and_add_up() -> None:
    # GIVEN five users on two replicas: three on one, two on the other
    both = lockstep.replicas(COSTS, inputs=500, outputs=100, users=5, count=2, budget=8192, max_seqs=1024,
                             kv_slots=ROOMY)
    three, two = _run(3), _run(2)
    # THEN rates and tokens add, and TTFT is the per-request mean over both
    assert both is not None
    assert both.request_rate == pytest.approx(three.request_rate + two.request_rate)
    assert both.output_tokens_per_s == pytest.approx(three.output_tokens_per_s + two.output_tokens_per_s)
    weighted = (three.ttft_s * three.request_rate + two.ttft_s * two.request_rate) / both.request_rate
    assert both.ttft_s == pytest.approx(weighted)
    assert both.decode_batch == pytest.approx((three.decode_batch + two.decode_batch) / 2)


def test_attainment_counts_the_requests_that_meet_both_targets() -> None:
    found = _run(4, budget=1000)
    observed = found.observed
    fastest, median, slowest = (observed.ttft.quantile(p) for p in (0.0, 0.5, 1.0))
    assert fastest < slowest  # the split cohort's requests do not all wait alike
    assert observed.attainment(None, None) == observed.attainment(slowest, None) == 1.0
    assert observed.attainment(fastest * 0.99, None) == 0.0
    assert 0.5 <= observed.attainment(median, None) < 1.0
    assert observed.attainment(None, min(observed.tpot.values) * 0.99) == 0.0


def _together(users: int, inputs: int = 1000, outputs: int = 200, nodes: int = 1) -> Colocated:
    workload = Workload(inputs=LengthDistribution.fixed(inputs), outputs=LengthDistribution.fixed(outputs),
                        concurrency=(users,), start="together")
    return Colocated(model=MODEL, instance=P5, tensor_parallel=2, nodes=nodes, workload=workload,
                     calibration=CAL.with_overrides(chunk_tokens=2048))


def test_a_colocated_point_of_users_that_start_together_carries_their_distribution() -> None:
    # GIVEN ten users that start together on one replica
    point = _together(10).at_concurrency(10)
    # THEN the point is the stepped run, with quantiles and attainment from its requests
    assert not point.saturated and point.concurrency == 10
    assert point.ttft_p50_s <= point.ttft_p99_s
    assert point.e2e_p50_s > point.ttft_p50_s
    assert point.attainment(point.ttft_p99_s, None) == 1.0
    # AND Little's law holds over the loop: users = rate x (TTFT + (output - 1) x TPOT)
    assert point.request_rate * (point.ttft_s + 199 * point.tpot_s) == pytest.approx(10, rel=0.03)


def test_replicas_that_cannot_hold_one_request_give_none() -> None:
    assert lockstep.replicas(COSTS, inputs=500, outputs=100, users=4, count=2, budget=8192, max_seqs=8,
                             kv_slots=599) is None


@pytest.mark.parametrize(("field", "value", "message"), [
    ("request_rates", (2.0,), "closed loop"),
    ("inputs", LengthDistribution.parse("100,200"), "fixed input and output lengths"),
    ("prefix_hit_rate", 0.5, "prefix hit rate"),
    ("start", "later", "start must be one of steady, together"),
])
def test_a_workload_that_cannot_stay_in_step_is_refused(field: str, value: object, message: str) -> None:
    values: dict[str, object] = dict(inputs=LengthDistribution.fixed(100), outputs=LengthDistribution.fixed(10),
                                     concurrency=(4,), start="together")
    values[field] = value
    if field == "request_rates":
        values["concurrency"] = ()
    with pytest.raises(ValueError, match=message):
        Workload(**values)  # type: ignore[arg-type]


def test_a_long_benchmark_row_is_stepped_fast() -> None:
    # GIVEN NIM's longest setup: 50 users of 20,000 / 2,000 tokens, whose KV cache admits a few at a time
    system = _together(50, inputs=20_034, outputs=2_000)
    start = time.process_time()
    point = system.at_concurrency(50)
    # THEN it is planned well within the 0.1 s of CPU a plan may take
    assert time.process_time() - start < 0.1
    assert point.ttft_s > 10 * point.tpot_s * 2000 / 50  # most users wait for a KV slot


@pytest.mark.parametrize(("decoders", "context", "chunk", "start"), [(0, 0.0, 500, 0), (12, 24_000.0, 2048, 4096),
                                                                      (40, 90_000.0, 0, 0)])
def test_a_lock_step_is_the_planners_step(decoders: int, context: float, chunk: int, start: int) -> None:
    # GIVEN one step with at most one chunk THEN the lock-step run times it as the planner's step model does
    pieces = [(chunk, start, True)] if chunk else []
    expected = step_seconds(COSTS, batch=decoders, context=context, chunk=chunk, chunk_context=start)
    assert lockstep._step(COSTS, decoders, context, pieces) == pytest.approx(expected, rel=1e-12)
