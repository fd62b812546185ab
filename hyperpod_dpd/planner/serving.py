"""Steady-state model of both serving modes: colocated replicas and a disaggregated prefill/decode layout.

Each decode engine is solved by ``engine.decode_engine``; a colocated replica in a closed loop (``--concurrency``)
by ``engine.closed_loop_engine``, which splits the users between the prefill queue and the decode batch. In DPD a
prompt at or above the routing threshold goes to a prefill replica (its own M/G/1 queue), its KV crosses EFA (only
the tail a layer-wise transfer cannot hide reaches TTFT; LMCache's send is not layer-wise and runs inside the
prefiller's step, so it lengthens the prefiller's service instead, plus a fixed hand-off cost), waits for a slot in the
decoder's PD buffer when that is full (M/M/c, Erlang C), and joins the decoder's batch, costing the decoder its join
(HBM traffic and connector work). Shorter prompts are prefilled locally on the decoder. A closed loop of C users is solved for its request rate on
``rate x response_time(rate) = C``; when the decoder's KV cache is what runs out, the excess users queue and that
wait is added to TTFT. Every point carries its latency distributions (``tails.Spread``) for P50/P99 and SLOs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.planner import lockstep
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.engine import Engine, Joins, closed_loop_engine, decode_engine
from hyperpod_dpd.planner.formulas import (
    cached_tokens,
    chunks,
    exposed_transfer_seconds,
    join_seconds,
    kv_capacity_tokens,
    kv_transfer_seconds,
    prefill_seconds,
    step_costs,
)
from hyperpod_dpd.planner.tails import QueueDelay, Spread
from hyperpod_dpd.planner.workload import Workload

_MAX_STEPS = 60
_ROOT_TOLERANCE = 1e-4  # of the concurrency
_RATE_TOLERANCE = 1e-7  # of the bracket, when the root sits on the capacity boundary
_BOUNDARY_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Point:
    """Predicted steady state of one serving mode at one load. Times in seconds (means); ``inf`` when saturated."""

    request_rate: float
    concurrency: float
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    max_itl_s: float
    decode_batch: float
    prefill_utilization: float
    saturated: bool = False
    spread: Spread | lockstep.Observed | None = field(default=None, compare=False, repr=False)

    def _quantile(self, which: str, p: float) -> float:
        if self.spread is None:
            return math.inf if self.saturated else getattr(self, f"{which}_s")
        distribution = self.spread.e2e() if which == "e2e" else getattr(self.spread, which)
        return float(distribution.quantile(p))

    def quantile(self, which: str, p: float) -> float:
        """The ``p`` quantile of ``ttft``, ``tpot`` or ``e2e`` in seconds."""
        return self._quantile(which, p)

    @cached_property
    def ttft_p50_s(self) -> float:
        return self._quantile("ttft", 0.5)

    @cached_property
    def ttft_p95_s(self) -> float:
        return self._quantile("ttft", 0.95)

    @cached_property
    def ttft_p99_s(self) -> float:
        return self._quantile("ttft", 0.99)

    @property
    def itl_p50_s(self) -> float:
        """The median gap between two tokens (a bare decode step unless most steps carry an interruption)."""
        if self.spread is None:
            return math.inf if self.saturated else self.tpot_s
        return self.spread.itl_p50

    @cached_property
    def tpot_p50_s(self) -> float:
        return self._quantile("tpot", 0.5)

    @cached_property
    def tpot_p99_s(self) -> float:
        return self._quantile("tpot", 0.99)

    @cached_property
    def e2e_p50_s(self) -> float:
        return self._quantile("e2e", 0.5)

    @cached_property
    def e2e_p99_s(self) -> float:
        return self._quantile("e2e", 0.99)

    def attainment(self, ttft_slo_s: float | None, tpot_slo_s: float | None) -> float:
        """Share of requests meeting both SLOs."""
        if self.saturated or self.spread is None:
            return 0.0
        return self.spread.attainment(ttft_slo_s, tpot_slo_s)

    def goodput(self, ttft_slo_s: float | None, tpot_slo_s: float | None) -> float:
        """Requests per second that meet both SLOs."""
        return self.request_rate * self.attainment(ttft_slo_s, tpot_slo_s)


class _Eval(NamedTuple):
    """A system at one rate: the mean point and the TTFT parts behind its spread: (weight, shift, rho, mean wait,
    mean service of the queue, servers of the queue)."""

    point: Point
    ttft_parts: tuple[tuple[float, float, float, float, float, float], ...]
    engine: Engine


class _System:
    """Common closed-loop and open-loop solving over ``evaluate(rate)``."""

    mean_output: float
    outputs: tuple[tuple[int, float], ...]
    overhead: float = 0.0  # per-request latency outside the steps (Calibration.request_overhead_s)

    def evaluate(self, rate: float, users: float | None = None) -> _Eval | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _response(self, point: Point) -> float:
        return point.ttft_s + (self.mean_output - 1) * point.tpot_s

    def _finish(self, found: _Eval, *, rate: float, users: float, waiting: float = 0.0,
                closed: bool = False) -> Point:
        engine = found.engine
        parts = tuple((w, shift + waiting, rho, wait,
                       # at most the users neither in the per-request overhead (Little: rate x overhead) nor
                       # being served can be ahead
                       max(0.0, users - 1 - rate * self.overhead) * service / servers if closed else math.inf)
                      for w, shift, rho, wait, service, servers in found.ttft_parts)
        spread = Spread(ttft=QueueDelay(parts), outputs=self.outputs,
                        tpot=engine.stalls.tpot(step=engine.step, tpot=engine.tpot, outputs=self.outputs),
                        itl_p50=engine.stalls.median_gap(step=engine.step, tpot=engine.tpot))
        point = found.point
        return Point(request_rate=rate, concurrency=users, ttft_s=point.ttft_s + waiting, tpot_s=point.tpot_s,
                     output_tokens_per_s=rate * self.mean_output, max_itl_s=point.max_itl_s,
                     decode_batch=point.decode_batch, prefill_utilization=point.prefill_utilization, spread=spread)

    def at_rate(self, rate: float) -> Point:
        found = self.evaluate(rate)
        if found is None:
            return _saturated(rate, math.inf)
        return self._finish(found, rate=rate, users=found.point.concurrency)

    def at_concurrency(self, users: float) -> Point:
        """Closed loop: ``users`` clients that each send their next request when the previous one finishes."""
        probe = self.evaluate(1e-9, users)
        if probe is None:
            return _saturated(0.0, users)
        # f(rate) = rate x response(rate) - users rises with the rate; bracket it, then regula falsi (Illinois)
        # while both ends are stable, bisection while the upper end is past capacity.
        low, f_low, best = 0.0, -users, probe
        high = users / self._response(probe.point)
        f_high: float | None = None
        side = 0
        for _ in range(_MAX_STEPS):
            middle = (low + high) / 2 if f_high is None else (low * f_high - high * f_low) / (f_high - f_low)
            found = self.evaluate(middle, users)
            if found is None:
                high, f_high, side = middle, None, 0
            else:
                gap = middle * self._response(found.point) - users
                if gap < 0:
                    low, f_low, best = middle, gap, found
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
                        low, best = middle, found
                    break
            if high - low <= _RATE_TOLERANCE * high:
                break
        if low == 0.0:
            return _saturated(0.0, users)
        in_system = low * self._response(best.point)
        waiting = 0.0
        if in_system < users * (1 - _BOUNDARY_TOLERANCE):
            waiting = (users - in_system) / low  # users beyond what the bottleneck admits queue in front of it
        return self._finish(best, rate=low, users=users, waiting=waiting, closed=True)


def _saturated(rate: float, concurrency: float) -> Point:
    return Point(request_rate=rate, concurrency=concurrency, ttft_s=math.inf, tpot_s=math.inf,
                 output_tokens_per_s=0.0, max_itl_s=math.inf, decode_batch=math.inf, prefill_utilization=1.0,
                 saturated=True)


def _local_classes(workload: Workload, calibration: Calibration,
                   keep: tuple[tuple[int, float], ...]) -> tuple[tuple[float, tuple[tuple[int, int], ...]], ...]:
    hit = workload.prefix_hit_rate
    return tuple((p, chunks(n, calibration.chunk_tokens, cached_tokens(n, hit))) for n, p in keep)


def _boundary(engine: Engine, users: float | None = None) -> float:
    """Mean wait for the step in flight to end before a new prompt or KV joins (none when the engine idles).

    A step is in flight with probability ``min(1, batch)``. An open-loop (Poisson) arrival sees the time-average
    batch (PASTA); in a closed loop of ``users`` per engine it sees the others only: an arrival sees the steady state
    of the loop with one user fewer (the arrival theorem; Reiser and Lavenberg, J. ACM 27(2), 1980, the basis of mean
    value analysis), taken here as the batch scaled by ``(users - 1) / users``. A lone user finds its engine idle.

    An arrival lands in a step with probability proportional to its length, so it waits the step's mean residual
    E[S^2] / 2E[S], not half a mean step (renewal theory; Kleinrock, *Queueing Systems* vol. 1, section 5.2). Steps
    are bare decode steps of ``step`` plus, at ``stalls.rate`` per second, steps lengthened by a stall x: per second
    of engine time E[S^2] / E[S] = step + rate (step E[x] + E[x^2]).
    """
    stalls = engine.stalls
    length_biased = engine.step + stalls.rate * (engine.step * stalls.mean_s + stalls.second_s2)
    seen = engine.batch
    if users is not None:  # a closed loop: the others only
        seen = engine.batch * max(0.0, users - 1.0) / users if users > 0 else 0.0
    return 0.5 * length_biased * min(1.0, seen)


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
        self.slots = _scheduler_slots(self.kv_slots, workload, calibration)
        self.weights = tuple(p for _, p in workload.inputs.points)
        self.classes = _local_classes(workload, calibration, workload.inputs.points)
        self.overhead = calibration.request_overhead_s
        self.decode_context = workload.decode_context
        self.mean_output = workload.outputs.mean
        self.outputs = workload.outputs.points
        self.offline = workload.offline
        self.workload, self.calibration = workload, calibration

    def at_concurrency(self, users: float) -> Point:
        """As ``_System.at_concurrency``; users that start together are stepped through (``lockstep``)."""
        workload = self.workload
        if workload.start != "together":
            return super().at_concurrency(users)
        found = lockstep.replicas(self.costs, inputs=workload.inputs.maximum, outputs=workload.outputs.maximum,
                                  users=int(users), count=self.nodes, budget=self.calibration.chunk_tokens,
                                  max_seqs=self.calibration.max_num_seqs, kv_slots=self.kv_slots,
                                  overhead_s=self.overhead)
        if found is None:
            return _saturated(0.0, users)
        return Point(request_rate=found.request_rate, concurrency=users, ttft_s=found.ttft_s, tpot_s=found.tpot_s,
                     output_tokens_per_s=found.output_tokens_per_s, max_itl_s=found.max_step_s,
                     decode_batch=found.decode_batch, prefill_utilization=found.prefill_utilization,
                     spread=found.observed)

    def evaluate(self, rate: float, users: float | None = None) -> _Eval | None:
        share = rate / self.nodes
        local = tuple((share * p, c) for p, c in self.classes)
        if users is None or self.offline or users / self.nodes > self.slots / self.decode_context:
            engine = decode_engine(self.costs, rate=share, local=local, decode_context=self.decode_context,
                                   steps_per_request=self.mean_output - 1, kv_slots=self.slots)
        else:
            # the users inside the per-request overhead (rate x overhead, Little's law) are at neither station
            engine = closed_loop_engine(self.costs, rate=share, users=(users - rate * self.overhead) / self.nodes,
                                        local=local,
                                        decode_context=self.decode_context, steps_per_request=self.mean_output - 1,
                                        kv_slots=self.slots)
        if engine is None:
            return None
        boundary = _boundary(engine, None if users is None else users / self.nodes)
        rho = engine.prefill_busy
        mean_service = sum(p * s for p, s in zip(self.weights, engine.local_services, strict=True))
        parts = tuple((p, boundary + s + self.overhead, rho, engine.local_wait, mean_service, self.nodes)
                      for p, s in zip(self.weights, engine.local_services, strict=True))
        ttft = sum(part[0] * (part[1] + part[3]) for part in parts)
        return _Eval(_point(rate, ttft, engine, self.mean_output, rho), parts, engine)


class Disaggregated(_System):
    """``prefill`` prefill replicas and ``decode`` decode replicas; prompts >= ``threshold`` are disaggregated."""

    def __init__(self, *, model: ModelSpec, instance: InstanceSpec, tensor_parallel: int, prefill: int,
                 decode: int, threshold: int, workload: Workload, calibration: Calibration,
                 pd_buffer_bytes: float, prefill_tensor_parallel: int | None = None):
        """``tensor_parallel`` is the decoders'; prefillers use ``prefill_tensor_parallel`` (default the same).
        ``prefill`` and ``decode`` count replicas (a node holds GPUs / TP of them)."""
        self.prefill, self.decode = prefill, decode
        prefill_tp = prefill_tensor_parallel or tensor_parallel
        self.costs = step_costs(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                calibration=calibration)
        prefill_costs = (self.costs if prefill_tp == tensor_parallel else
                         step_costs(model=model, instance=instance, tensor_parallel=prefill_tp,
                                    calibration=calibration))
        # the KV moves rank to rank: the side with fewer ranks drives fewer interfaces and holds bigger slices
        link_tp = min(prefill_tp, tensor_parallel)
        self.kv_slots = kv_capacity_tokens(model=model, instance=instance, tensor_parallel=tensor_parallel,
                                           utilization=calibration.dpd_memory_utilization,
                                           calibration=calibration, reserved_bytes=pd_buffer_bytes)
        self.slots = _scheduler_slots(self.kv_slots, workload, calibration)
        hit = workload.prefix_hit_rate
        remote = tuple((n, p) for n, p in workload.inputs.points if n >= threshold)
        self.remote_share = sum(p for _, p in remote)
        self.fixed_s = calibration.transfer_fixed_s
        self.overhead = calibration.request_overhead_s
        rows = []
        for n, p in remote:
            service = prefill_seconds(prefill_costs, tokens=n, chunk_tokens=calibration.chunk_tokens,
                                      cached=cached_tokens(n, hit))
            bulk = kv_transfer_seconds(model=model, instance=instance, tensor_parallel=link_tp, tokens=n,
                                       calibration=calibration)
            exposed = exposed_transfer_seconds(bulk_s=bulk, prefill_s=service, layers=model.layers,
                                               layerwise=calibration.transfer_layerwise)
            if calibration.transfer_holds_prefiller:
                # LMCache's send runs inside the prefiller's step: the copy into its PD buffer (a read and a write
                # of each byte) and the transfer's exposed part keep the prefiller busy, then TTFT goes on from there
                copy = n * prefill_costs.kv_read_s_per_token * 2 * calibration.pd_buffer_copies
                service, exposed = service + copy + exposed, 0.0
            join = join_seconds(self.costs, tokens=n, calibration=calibration)
            rows.append((p, service, bulk, exposed, join))
        self.remote = tuple(rows)
        self.service = sum(p * s for p, s, _, _, _ in rows)
        self.service_second = sum(p * s * s for p, s, _, _, _ in rows)
        # per request (weighted by class): decoder join busy, its second moment, PD buffer bytes and hold
        self.join_busy = sum(p * j for p, _, _, _, j in rows)
        self.join_second = sum(p * j * j for p, _, _, _, j in rows)
        per_rank = model.kv_bytes_per_token_per_rank(tensor_parallel)
        remote_bytes = sum(p * n * per_rank for n, p in remote)
        self.buffer_slots = (pd_buffer_bytes * self.remote_share / remote_bytes if remote_bytes and pd_buffer_bytes > 0
                             else math.inf)  # 0: no PD buffer (NixlConnector writes into the paged cache)
        self.bulk_mean = sum(p * b for p, _, b, _, _ in rows) / self.remote_share if self.remote_share else 0.0
        self.local_weights = tuple((n, p) for n, p in workload.inputs.points if n < threshold)
        self.local = _local_classes(workload, calibration, self.local_weights)
        self.decode_context = workload.decode_context
        self.mean_output = workload.outputs.mean
        self.outputs = workload.outputs.points

    def evaluate(self, rate: float, users: float | None = None) -> _Eval | None:
        per_prefill = rate / self.prefill
        busy = per_prefill * self.service
        if busy >= 1.0:
            return None
        wait = per_prefill * self.service_second / (2 * (1.0 - busy)) if busy else 0.0
        share = rate / self.decode
        joins = Joins(rate=share * self.remote_share, busy=share * self.join_busy, second=share * self.join_second)
        engine = decode_engine(self.costs, rate=share, local=tuple((share * p, c) for p, c in self.local),
                               decode_context=self.decode_context, steps_per_request=self.mean_output - 1,
                               kv_slots=self.slots, joins=joins)
        if engine is None:
            return None
        buffer_wait = self._buffer_wait(share * self.remote_share, engine.tpot)
        if buffer_wait is None:
            return None
        boundary = _boundary(engine, None if users is None else users / self.decode)
        local_share = 1.0 - self.remote_share
        local_service = (sum(p * s for (_, p), s in zip(self.local_weights, engine.local_services, strict=True))
                         / local_share if local_share > 0 else 0.0)
        parts = [(p, boundary + s + self.overhead, engine.prefill_busy, engine.local_wait, local_service * local_share,
                  self.decode)
                 for (_, p), s in zip(self.local_weights, engine.local_services, strict=True)]
        for p, service, _, exposed, _ in self.remote:
            parts.append((p, service + exposed + self.fixed_s + buffer_wait + boundary + engine.step + self.overhead,
                          busy, wait,
                          self.service, self.prefill))
        ttft = sum(part[0] * (part[1] + part[3]) for part in parts)
        return _Eval(_point(rate, ttft, engine, self.mean_output, max(busy, engine.prefill_busy)), tuple(parts),
                     engine)

    def _buffer_wait(self, remote_rate: float, tpot: float) -> float | None:
        """Mean wait for a PD-buffer slot: transfers hold one from their start until the decoder has joined them
        (bulk transfer plus about one TPOT); M/M/c with c whole slots. ``None`` when the buffer cannot keep up."""
        if remote_rate <= 0 or math.isinf(self.buffer_slots):
            return 0.0
        hold = self.bulk_mean + tpot
        offered = remote_rate * hold
        slots = int(self.buffer_slots)
        if offered >= slots:
            return None
        if offered < 0.5 * slots:
            return 0.0
        return _erlang_c(slots, offered) * hold / (slots - offered)


def _scheduler_slots(kv_slots: float, workload: Workload, calibration: Calibration) -> float:
    """KV tokens the scheduler may fill: the cache, or ``max_num_seqs`` running requests of the mean decode context
    if fewer (vLLM admits no more than max_num_seqs at once; the rest wait in its queue)."""
    return min(kv_slots, calibration.max_num_seqs * workload.decode_context)


def _erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with ``offered`` Erlangs (Erlang B recursion)."""
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    return servers * blocking / (servers - offered * (1 - blocking))


def _point(rate: float, ttft: float, engine: Engine, mean_output: float, prefill_busy: float) -> Point:
    concurrency = rate * (ttft + (mean_output - 1) * engine.tpot)
    return Point(request_rate=rate, concurrency=concurrency, ttft_s=ttft, tpot_s=engine.tpot,
                 output_tokens_per_s=rate * mean_output, max_itl_s=engine.max_step, decode_batch=engine.batch,
                 prefill_utilization=prefill_busy)
