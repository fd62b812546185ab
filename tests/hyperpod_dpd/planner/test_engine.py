"""The closed-loop colocated engine: in a closed loop the users waiting for a first token are the ones not decoding."""

from __future__ import annotations

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION as CAL
from hyperpod_dpd.planner.engine import Joins, _state, closed_loop_engine
from hyperpod_dpd.planner.formulas import chunks, prefill_seconds, step_costs, step_seconds
from hyperpod_dpd.planner.serving import Colocated
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

P5 = instance("ml.p5.48xlarge")
LLAMA_70B = MODELS["Llama-3.3-70B"]
COSTS = step_costs(model=LLAMA_70B, instance=P5, tensor_parallel=8, calibration=CAL)


def _colocated(inputs: int, outputs: int, users: int, *, offline: bool = False) -> Colocated:
    workload = Workload(inputs=LengthDistribution.fixed(inputs), outputs=LengthDistribution.fixed(outputs),
                        concurrency=(users,), offline=offline)
    return Colocated(model=LLAMA_70B, instance=P5, tensor_parallel=8, nodes=1, workload=workload, calibration=CAL)


def test_the_users_are_either_in_prefill_or_in_the_decode_batch() -> None:
    # GIVEN 16 users sending 8k prompts with 512-token outputs to one colocated node, solved as a closed loop
    system = _colocated(8192, 512, 16)
    point = system.at_concurrency(16)
    found = system.evaluate(point.request_rate, 16)
    assert found is not None
    engine = found.engine
    # THEN the users in prefill (Little: rate x (wait + service)) and the decoding ones add up to the 16 users
    in_prefill = point.request_rate * (engine.local_wait + engine.local_services[0])
    assert 0 < in_prefill < 16
    assert engine.batch + in_prefill == pytest.approx(16, rel=1e-9)
    # AND that batch, below the 16 users, is the one the point reports
    assert point.decode_batch == engine.batch < 16


def test_a_decode_only_step_runs_every_user() -> None:
    # GIVEN a closed loop of 8 users whose prompts need no prefill on the engine (no local prompt classes)
    context = 4096.0
    engine = closed_loop_engine(COSTS, rate=1.0, users=8, local=(), decode_context=context,
                                steps_per_request=255, kv_slots=1e9)
    assert engine is not None
    # THEN every step is a bare decode step of all 8 users, one token each: TPOT is that step
    bare = step_seconds(COSTS, batch=8, context=8 * context)
    assert (engine.step, engine.tpot, engine.batch, engine.prefill_busy) == (bare, bare, 8, 0.0)


@pytest.mark.parametrize("key", ["Llama-3.3-70B", "Qwen3-235B-A22B"])
@pytest.mark.parametrize("batch", [0.3, 1.0, 7.5, 64.0])
def test_the_engines_inlined_bare_step_is_step_seconds_to_the_last_bit(key: str, batch: float) -> None:
    # GIVEN a dense and a mixture-of-experts model (whose step reads only the experts its tokens touch)
    costs = step_costs(model=MODELS[key], instance=P5, tensor_parallel=8, calibration=CAL)
    # WHEN the engine state is taken at a (possibly fractional) decode batch with no prefill on it
    state = _state(costs, batch, decode_context=2048.0, local=(), joins=Joins())
    # THEN its bare step is exactly step_seconds' (a decoding stream always shares the step with itself)
    seen = max(batch, 1.0)
    assert state.step == step_seconds(costs, batch=seen, context=seen * 2048.0)
    assert state.step > 0


def test_a_step_that_carries_a_chunk_runs_fewer_decoders_than_a_bare_step() -> None:
    # GIVEN 16 users with 8k prompts on one engine at a rate where the prefill work is a third of its time
    pieces = chunks(8192, CAL.chunk_tokens)
    service = prefill_seconds(COSTS, tokens=8192, chunk_tokens=CAL.chunk_tokens)
    rate = 1 / (3 * service)
    engine = closed_loop_engine(COSTS, rate=rate, users=16, local=((rate, pieces),), decode_context=8448,
                                steps_per_request=511, kv_slots=1e9)
    assert engine is not None and engine.prefill_busy == pytest.approx(1 / 3, rel=0.05)
    # THEN the mean decode batch lies below the 16 users of a bare step: the users queued for a prefill are not
    # decoding, and they are all queued while chunk steps run (a bare step means no prompt waits)
    in_prefill = rate * (engine.local_wait + engine.local_services[0])
    assert engine.batch == pytest.approx(16 - in_prefill)
    chunk_batch = 16 - in_prefill / engine.prefill_busy
    assert 0 < chunk_batch < engine.batch < 16
    # AND TPOT is the decoding users over the tokens both kinds of step emit per second
    supply = (1 - engine.prefill_busy) * 16 / engine.step + rate * len(pieces) * chunk_batch
    assert engine.tpot == pytest.approx(engine.batch / supply)


def test_an_engine_that_only_prefills_cannot_keep_up() -> None:
    # GIVEN prompts arriving faster than the engine can prefill them
    service = prefill_seconds(COSTS, tokens=8192, chunk_tokens=CAL.chunk_tokens)
    local = ((1.01 / service, chunks(8192, CAL.chunk_tokens)),)
    # THEN there is no steady state
    assert closed_loop_engine(COSTS, rate=1.01 / service, users=16, local=local, decode_context=8448,
                              steps_per_request=511, kv_slots=1e9) is None


def test_open_loops_offline_runs_and_loads_past_the_kv_cache_keep_the_open_loop_engine() -> None:
    # GIVEN the same workload as an open loop, an offline run and a closed loop past the scheduler's slots
    closed = _colocated(8192, 512, 16)
    offline = _colocated(8192, 512, 16, offline=True)
    rate = 1.0
    open_loop = closed.evaluate(rate)
    assert open_loop is not None
    # THEN an offline run and a closed loop of more users than the engine admits use the open-loop engine
    assert offline.evaluate(rate, 16) == open_loop
    past = closed.slots / closed.decode_context * 2
    assert closed.evaluate(rate, past) == open_loop
    # AND a closed loop within the engine's slots does not
    assert closed.evaluate(rate, 16) != open_loop
