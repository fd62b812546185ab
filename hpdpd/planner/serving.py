"""Steady-state model of both serving modes: colocated replicas and a disaggregated prefill/decode layout.

A decode engine runs steps; every step emits one token per decoding request. A prompt prefilled on the same engine
rides along as chunks of ``chunk_tokens`` and lengthens the steps that carry them, so every decoding stream stalls
(colocated interference). Per second, the engine spends ``sum(rate_i * stall_i)`` on those extra step lengths, so

    TPOT = t_decode(B) / (1 - rho_interference),   B = rate x (output - 1) x TPOT   (Little's law)

with ``t_decode`` affine in B on both sides of the roofline, which makes the fixed point closed-form. Waiting for a
prefill slot follows Pollaczek-Khinchine (M/G/1) on the prefill work. In DPD a prompt at or above the routing
threshold goes to a prefill replica (its own M/G/1 queue), then crosses EFA, then joins the decoder's batch; shorter
prompts are prefilled locally on the decoder. A closed loop of C users is solved for its request rate by bisection
on ``rate x response_time(rate) = C``; when the decoder's KV cache is what runs out, the excess users queue and
that wait is added to TTFT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.formulas import (
    StepCosts,
    chunks,
    kv_capacity_tokens,
    kv_transfer_seconds,
    prefill_seconds,
    step_costs,
    step_seconds,
)
from hyperpod_dpd.planner.workload import Workload

_MAX_STEPS = 60
_ROOT_TOLERANCE = 1e-4  # of the concurrency
_RATE_TOLERANCE = 1e-7  # of the bracket, when the root sits on the capacity boundary
_BOUNDARY_TOLERANCE = 1e-3
_BATCH_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Point:
    """Predicted steady state of one serving mode at one load. Times in seconds; ``inf`` when saturated."""

    request_rate: float
    concurrency: float
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    max_itl_s: float
    decode_batch: float
    prefill_utilization: float
    saturated: bool = False


@dataclass(frozen=True)
class _Engine:
    """A decode engine's answer at one request rate."""

    tpot: float
    step: float
    local_ttft: tuple[float, ...]
    max_step: float
    batch: float
    prefill_busy: float


@dataclass(frozen=True)
class _State:
    """A decode engine at one decode batch: the TPOT that batch implies (``inf`` if it cannot keep up)."""

    tpot: float
    step: float
    services: tuple[float, ...]
    max_step: float
    prefill_busy: float
    second_moment: float


def _state(costs: StepCosts, batch: float, *, decode_context: float,
           local: tuple[tuple[float, tuple[tuple[int, int], ...]], ...], busy: float) -> _State:
    seen = max(batch, 1.0)  # a decoding stream always shares the step with at least itself
    context = seen * decode_context
    step = step_seconds(costs, batch=seen, context=context)
    interference = busy
    prefill_busy = second = 0.0
    services = []
    max_step = step
    for class_rate, pieces in local:
        service = 0.0
        for size, start in pieces:
            mixed = step_seconds(costs, batch=seen, context=context, chunk=size, chunk_context=start)
            service += mixed
            if mixed > max_step:
                max_step = mixed
        services.append(service)
        interference += class_rate * (service - len(pieces) * step)
        prefill_busy += class_rate * service
        second += class_rate * service * service
    stable = prefill_busy < 1.0 and interference < 1.0
    return _State(tpot=step / (1.0 - interference) if stable else math.inf, step=step, services=tuple(services),
                  max_step=max_step, prefill_busy=prefill_busy, second_moment=second)


def _decode_engine(costs: StepCosts, *, rate: float, local: tuple[tuple[float, tuple[tuple[int, int], ...]], ...],
                   decode_context: float, steps_per_request: float, kv_slots: float,
                   ingest_s_per_s: float) -> _Engine | None:
    """Solve one decode engine; ``None`` when it cannot keep up (prefill, decode or KV capacity).

    The batch B is the fixed point of B = rate x (output - 1) x TPOT(B): h(B) = that minus B starts positive and
    falls once the engine keeps up, so it is bracketed by doubling and closed by regula falsi (Illinois).
    """
    growth = rate * steps_per_request
    cap = kv_slots / decode_context

    def state(batch: float) -> _State:
        return _state(costs, batch, decode_context=decode_context, local=local, busy=ingest_s_per_s)

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


def _engine(state: _State, batch: float) -> _Engine:
    wait = state.second_moment / (2 * (1.0 - state.prefill_busy)) if state.prefill_busy else 0.0
    return _Engine(tpot=state.tpot, step=state.step, local_ttft=tuple(wait + s for s in state.services),
                   max_step=state.max_step, batch=batch, prefill_busy=state.prefill_busy)


class _System:
    """Common closed-loop and open-loop solving over ``evaluate(rate)``."""

    mean_output: float

    def evaluate(self, rate: float) -> Point | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _response(self, point: Point) -> float:
        return point.ttft_s + (self.mean_output - 1) * point.tpot_s

    def at_rate(self, rate: float) -> Point:
        point = self.evaluate(rate)
        if point is None:
            return _saturated(rate, math.inf)
        return point

    def at_concurrency(self, users: float) -> Point:
        """Closed loop: ``users`` clients that each send their next request when the previous one finishes."""
        probe = self.evaluate(1e-9)
        if probe is None:
            return _saturated(0.0, users)
        # f(rate) = rate x response(rate) - users rises with the rate; bracket it, then regula falsi (Illinois)
        # while both ends are stable, bisection while the upper end is past capacity.
        low, f_low, best = 0.0, -users, probe
        high = users / self._response(probe)
        f_high: float | None = None
        side = 0
        for _ in range(_MAX_STEPS):
            if f_high is None:
                middle = (low + high) / 2
            else:
                middle = (low * f_high - high * f_low) / (f_high - f_low)
            point = self.evaluate(middle)
            if point is None:
                high, f_high, side = middle, None, 0
            else:
                gap = middle * self._response(point) - users
                if gap < 0:
                    low, f_low, best = middle, gap, point
                    if side == -1 and f_high is not None:
                        f_high /= 2
                    side = -1
                else:
                    high, f_high = middle, gap
                    if side == 1:
                        f_low /= 2
                    side = 1
                if abs(gap) <= _ROOT_TOLERANCE * users:
                    if gap >= 0:
                        low, best = middle, point
                    break
            if high - low <= _RATE_TOLERANCE * high:
                break
        if low == 0.0:
            return _saturated(0.0, users)
        in_system = low * self._response(best)
        waiting = 0.0
        if in_system < users * (1 - _BOUNDARY_TOLERANCE):
            waiting = (users - in_system) / low  # users beyond what the bottleneck admits queue in front of it
        return Point(request_rate=low, concurrency=users, ttft_s=best.ttft_s + waiting, tpot_s=best.tpot_s,
                     output_tokens_per_s=low * self.mean_output, max_itl_s=best.max_itl_s,
                     decode_batch=best.decode_batch, prefill_utilization=best.prefill_utilization)


def _saturated(rate: float, concurrency: float) -> Point:
    return Point(request_rate=rate, concurrency=concurrency, ttft_s=math.inf, tpot_s=math.inf,
                 output_tokens_per_s=0.0, max_itl_s=math.inf, decode_batch=math.inf, prefill_utilization=1.0,
                 saturated=True)


class Colocated(_System):
    """``nodes`` identical replicas; each prefills and decodes its share of the requests."""

    def __init__(self, *, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, nodes: int,
                 workload: Workload, calibration: Calibration):
        self.nodes = nodes
        self.costs = step_costs(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                calibration=calibration)
        self.kv_slots = kv_capacity_tokens(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                           utilization=calibration.colocated_memory_utilization,
                                           calibration=calibration)
        self.classes = tuple((p, chunks(n, calibration.chunk_tokens)) for n, p in workload.inputs.points)
        self.decode_context = workload.decode_context
        self.mean_output = workload.outputs.mean

    def evaluate(self, rate: float) -> Point | None:
        share = rate / self.nodes
        engine = _decode_engine(self.costs, rate=share, local=tuple((share * p, c) for p, c in self.classes),
                                decode_context=self.decode_context, steps_per_request=self.mean_output - 1,
                                kv_slots=self.kv_slots, ingest_s_per_s=0.0)
        if engine is None:
            return None
        ttft = sum(p * t for (p, _), t in zip(self.classes, engine.local_ttft, strict=True))
        return _point(rate, ttft, engine, self.mean_output, engine.prefill_busy)


class Disaggregated(_System):
    """``prefill`` prefill replicas and ``decode`` decode replicas; prompts >= ``threshold`` are disaggregated."""

    def __init__(self, *, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, prefill: int,
                 decode: int, threshold: int, workload: Workload, calibration: Calibration,
                 pd_buffer_bytes: float):
        self.prefill, self.decode = prefill, decode
        self.costs = step_costs(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                calibration=calibration)
        self.kv_slots = kv_capacity_tokens(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                           utilization=calibration.dpd_memory_utilization,
                                           calibration=calibration, reserved_bytes=pd_buffer_bytes)
        remote = [(n, p) for n, p in workload.inputs.points if n >= threshold]
        self.remote_share = sum(p for _, p in remote)
        self.remote = tuple(
            (p,
             prefill_seconds(self.costs, tokens=n, chunk_tokens=calibration.chunk_tokens),
             kv_transfer_seconds(model=model, instance=instance, tensor_parallel=tensor_parallel, tokens=n,
                                 calibration=calibration))
            for n, p in remote)
        # decoder time per request: copying received KV from the PD buffer into the paged cache (a read and a write
        # per byte) and the calibrated stall while the bulk transfer lands
        self.decoder_busy = sum(
            p * (2 * n * self.costs.kv_read_s_per_token
                 + calibration.decoder_transfer_stall * (transfer - calibration.transfer_fixed_s))
            for (n, p), (_, _, transfer) in zip(remote, self.remote, strict=True))
        self.service = sum(p * s for p, s, _ in self.remote)
        self.service_second = sum(p * s * s for p, s, _ in self.remote)
        self.local = tuple((p, chunks(n, calibration.chunk_tokens))
                           for n, p in workload.inputs.points if n < threshold)
        self.decode_context = workload.decode_context
        self.mean_output = workload.outputs.mean

    def evaluate(self, rate: float) -> Point | None:
        per_prefill = rate / self.prefill
        busy = per_prefill * self.service
        if busy >= 1.0:
            return None
        wait = per_prefill * self.service_second / (2 * (1.0 - busy)) if busy else 0.0
        share = rate / self.decode
        engine = _decode_engine(self.costs, rate=share, local=tuple((share * p, c) for p, c in self.local),
                                decode_context=self.decode_context, steps_per_request=self.mean_output - 1,
                                kv_slots=self.kv_slots, ingest_s_per_s=share * self.decoder_busy)
        if engine is None:
            return None
        ttft = sum(p * t for (p, _), t in zip(self.local, engine.local_ttft, strict=True))
        ttft += sum(p * (wait + service + transfer + engine.step) for p, service, transfer in self.remote)
        return _point(rate, ttft, engine, self.mean_output, max(busy, engine.prefill_busy))


def _point(rate: float, ttft: float, engine: _Engine, mean_output: float, prefill_busy: float) -> Point:
    concurrency = rate * (ttft + (mean_output - 1) * engine.tpot)
    return Point(request_rate=rate, concurrency=concurrency, ttft_s=ttft, tpot_s=engine.tpot,
                 output_tokens_per_s=rate * mean_output, max_itl_s=engine.max_step, decode_batch=engine.batch,
                 prefill_utilization=prefill_busy)
