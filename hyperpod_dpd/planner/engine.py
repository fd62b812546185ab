"""One decode engine at a steady request rate: the batch, TPOT, local prefill queue and the stalls its streams see.

A decode engine runs steps; every step emits one token per decoding request. A prompt prefilled on the same engine
rides along as chunks of ``chunk_tokens`` and lengthens the steps that carry them, so every decoding stream stalls
(colocated interference). A disaggregated request costs the decoder its join (``formulas.join_seconds``). Per
second, the engine spends ``sum(rate_i * stall_i)`` on those extra step lengths, so

    TPOT = t_decode(B) / (1 - rho_interference),   B = rate x (output - 1) x TPOT   (Little's law)

Waiting for a local prefill slot follows Pollaczek-Khinchine (M/G/1) on the prefill work.

That fixed point holds when requests arrive at a rate of their own (open loops, offline runs, a DPD decoder whose
prompts are prefilled elsewhere). In a closed loop of C users a colocated engine is solved by ``closed_loop_engine``
instead: a user waiting for its first token is one user fewer in the decode batch, so the steps that carry a prefill
chunk run fewer decoders than the bare decode steps.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from hyperpod_dpd.planner.formulas import StepCosts
from hyperpod_dpd.planner.tails import Stalls

_MAX_STEPS = 60
_BATCH_TOLERANCE = 1e-6

# (arrival rate, chunks) of one class of prompts prefilled on the engine
LocalClasses = tuple[tuple[float, tuple[tuple[int, int], ...]], ...]


# The solver's records are named tuples, not frozen dataclasses: a frozen dataclass sets each field through
# object.__setattr__, and these are built hundreds of thousands of times in a 1,000-configuration sweep.
class Joins(NamedTuple):
    """Disaggregated arrivals as stall events: total rate, sum(rate x size), sum(rate x size^2)."""

    rate: float = 0.0
    busy: float = 0.0
    second: float = 0.0


class Engine(NamedTuple):
    """A decode engine's answer at one request rate."""

    tpot: float
    step: float
    local_services: tuple[float, ...]
    local_wait: float  # mean wait for a local prefill slot (M/G/1)
    max_step: float
    batch: float
    prefill_busy: float
    stalls: Stalls


class _State(NamedTuple):
    """A decode engine at one decode batch: the TPOT that batch implies (``inf`` if it cannot keep up)."""

    tpot: float
    step: float
    services: tuple[float, ...]
    max_step: float
    prefill_busy: float
    second_moment: float
    stall_rate: float
    stall_busy: float
    stall_second: float


def _state(costs: StepCosts, batch: float, *, decode_context: float, local: LocalClasses, joins: Joins) -> _State:
    seen = max(batch, 1.0)  # a decoding stream always shares the step with at least itself
    context = seen * decode_context
    # step_seconds inlined (bare below, with a chunk in the loop), in its order of operations: this is the
    # planner's innermost code; test_engine checks the bare step against step_seconds
    kv, linear, attention = costs.kv_read_s_per_token, costs.linear_s_per_token, costs.attention_s_per_pair
    experts, miss, comm = costs.expert_weights_s, costs.expert_miss, costs.comm_s_per_token
    fixed, loss, comm_fixed = costs.dense_weights_s, costs.overlap_loss, costs.comm_fixed_s
    memory = fixed + experts * (1.0 - miss ** seen) + context * kv if experts else fixed + context * kv
    compute = seen * linear + seen * costs.head_s_per_token + context * attention
    step = (memory + loss * compute if memory > compute else compute + loss * memory) + comm_fixed + seen * comm
    interference = joins.busy
    stall_rate, stall_second = joins.rate, joins.second
    prefill_busy = second = 0.0
    services = []
    max_step = step
    base_memory, base_compute = fixed + context * kv, context * attention + (seen + 1) * costs.head_s_per_token
    for class_rate, pieces in local:
        service = 0.0
        for size, start in pieces:
            tokens = seen + size
            memory = base_memory + start * kv
            if experts:
                memory += experts * (1.0 - miss ** tokens)
            compute = tokens * linear + base_compute + size * (start + size / 2) * attention
            mixed = ((memory + loss * compute if memory > compute else compute + loss * memory)
                     + comm_fixed + tokens * comm)
            service += mixed
            if mixed > max_step:
                max_step = mixed
        services.append(service)
        extra = service - len(pieces) * step
        interference += class_rate * extra
        stall_rate += class_rate
        stall_second += class_rate * extra * extra
        prefill_busy += class_rate * service
        second += class_rate * service * service
    stable = prefill_busy < 1.0 and interference < 1.0
    return _State(tpot=step / (1.0 - interference) if stable else math.inf, step=step, services=tuple(services),
                  max_step=max_step, prefill_busy=prefill_busy, second_moment=second, stall_rate=stall_rate,
                  stall_busy=interference, stall_second=stall_second)


def decode_engine(costs: StepCosts, *, rate: float, local: LocalClasses, decode_context: float,
                  steps_per_request: float, kv_slots: float, joins: Joins = Joins()) -> Engine | None:
    """Solve one decode engine; ``None`` when it cannot keep up (prefill, decode or KV capacity).

    The batch B is the fixed point of B = rate x (output - 1) x TPOT(B): h(B) = that minus B starts positive and
    falls once the engine keeps up, so it is bracketed by doubling and closed by regula falsi (Illinois).
    """
    growth = rate * steps_per_request
    cap = kv_slots / decode_context

    def state(batch: float) -> _State:
        return _state(costs, batch, decode_context=decode_context, local=local, joins=joins)

    low, current = 0.0, state(0.0)
    if growth <= 0.0:
        return _engine(current, 0.0) if math.isfinite(current.tpot) else None
    h_low = growth * current.tpot
    high = min(cap, max(1.0, h_low)) if math.isfinite(h_low) else min(cap, 1.0)
    while True:
        candidate = state(high)
        h_high = growth * candidate.tpot - high
        if h_high <= 0.0:
            break
        if high >= cap:
            return None  # the batch this rate needs does not fit in the KV cache, or decode cannot keep up
        low, h_low, high = high, h_high, min(cap, high * 2)
    best, best_batch = candidate, high
    side = 0
    for _ in range(_MAX_STEPS):
        if high - low <= _BATCH_TOLERANCE * high:
            break
        if math.isfinite(h_low):
            middle = (low * h_high - high * h_low) / (h_high - h_low)
        else:
            middle = (low + high) / 2
        current = state(middle)
        gap = growth * current.tpot - middle
        if gap > 0.0:
            low, h_low = middle, gap
            if side == 1:
                h_high /= 2
            side = 1
        else:
            high, h_high, best, best_batch = middle, gap, current, middle
            if side == -1 and math.isfinite(h_low):
                h_low /= 2
            side = -1
        if abs(gap) <= _BATCH_TOLERANCE * max(1.0, middle):
            best, best_batch = current, middle
            break
    if not math.isfinite(best.tpot):
        return None
    return _engine(best, best_batch)


def closed_loop_engine(costs: StepCosts, *, rate: float, users: float, local: LocalClasses, decode_context: float,
                       steps_per_request: float, kv_slots: float) -> Engine | None:
    """A colocated engine inside a closed loop of ``users`` (each sends its next request when the last one ends).

    vLLM's scheduler is decode-first: each step it schedules every running request's next token, then fills what is
    left of the step's token budget (``max_num_batched_tokens``, ``chunk_tokens`` here) with the waiting prompts, a
    chunk at a time (vllm-project/vllm ``vllm/v1/core/sched/scheduler.py`` @00024d31, ``Scheduler.schedule``: "First,
    schedule the RUNNING requests", then the WAITING queue). So a step without a chunk means no prompt is waiting,
    and in a closed loop the users waiting for their first token are exactly those not decoding:

    * a decode-only step runs all ``U = min(users, KV slots)`` users (the KV cache and ``max_num_seqs``, through
      ``kv_slots``, cap it);
    * a step carrying a chunk runs ``B_stall = U - Q / phi`` decoders, where ``Q = rate x (wait + service)`` users
      are in prefill (Little) and ``phi`` is the share of time in chunk steps, so the queue sits in those steps;
    * tokens come out at ``(1 - phi) x U / step(U) + chunk steps per second x B_stall``, and TPOT is the decoding
      users, ``U - Q``, over that (Little). The outer closed-loop solve (``serving``) makes that supply equal
      ``rate x (output - 1)``.

    The wait for a prefill is the Pollaczek-Khinchine mean on the prefill work, as in ``decode_engine`` (the finite
    population bounds only the TTFT tail, ``serving._System._finish``). A chunk's service depends (weakly) on the
    batch it rides with, so the split is iterated three times. ``None`` when the prefill work alone fills the
    engine or, with more users than it admits, it cannot emit the tokens the rate needs; ``serving`` uses
    ``decode_engine`` for open loops, offline runs and loads past the KV cache or ``max_num_seqs``.
    """
    running = min(users, kv_slots / decode_context)
    if running <= 0.0:
        return None
    chunk_steps = sum(class_rate * len(pieces) for class_rate, pieces in local)
    bare = _state(costs, running, decode_context=decode_context, local=(), joins=Joins())
    stalled, wait, phi = running, 0.0, 0.0
    state = bare
    for _ in range(3):  # the services depend (weakly) on the batch they carry
        state = _state(costs, stalled, decode_context=decode_context, local=local, joins=Joins())
        phi = state.prefill_busy
        if phi >= 1.0:
            return None
        wait = state.second_moment / (2 * (1.0 - phi)) if phi else 0.0
        stalled = max(0.0, running - (rate * wait + phi) / phi) if phi else running
    supply = (1.0 - phi) * running / bare.step + chunk_steps * stalled
    if supply <= 0.0 or (users > running and rate * steps_per_request > supply * (1 + 1e-9)):
        return None  # a full engine cannot emit the tokens this rate needs
    decoding = (1.0 - phi) * running + phi * stalled
    stalls = Stalls()
    if state.stall_rate > 0:
        stalls = Stalls(rate=state.stall_rate, mean_s=state.stall_busy / state.stall_rate,
                        second_s2=state.stall_second / state.stall_rate)
    return Engine(tpot=decoding / supply, step=bare.step, local_services=state.services, local_wait=wait,
                  max_step=max(state.max_step, bare.step), batch=decoding, prefill_busy=phi, stalls=stalls)


def _engine(state: _State, batch: float) -> Engine:
    wait = state.second_moment / (2 * (1.0 - state.prefill_busy)) if state.prefill_busy else 0.0
    stalls = Stalls()
    if state.stall_rate > 0:
        stalls = Stalls(rate=state.stall_rate, mean_s=state.stall_busy / state.stall_rate,
                        second_s2=state.stall_second / state.stall_rate)
    return Engine(tpot=state.tpot, step=state.step, local_services=state.services, local_wait=wait,
                  max_step=state.max_step, batch=batch, prefill_busy=state.prefill_busy, stalls=stalls)
