"""A colocated engine stepped request by request when a benchmark's users all start at once (``start="together"``).

Benchmark clients at fixed concurrency (AIPerf, genai-perf, vLLM's ``benchmark_serving --max-concurrency``) start
all their users at the same instant, and with fixed prompt and output lengths every request of a user takes the
same number of steps. The users never spread out into the steady mix ``serving`` assumes: they stay in cohorts,
each prefilled in one step that carries as many whole prompts as the step's token budget leaves room for, and a
cohort's first tokens wait for the steps of the cohorts prefilled ahead of it instead of a Poisson queue.

So this module runs the engine step by step. Each step, as vLLM's scheduler does (vllm-project/vllm
``vllm/v1/core/sched/scheduler.py`` @00024d31, ``Scheduler.schedule``: running requests first, then the waiting
queue), every decoding request emits a token, and what is left of ``budget`` (``max_num_batched_tokens``) goes to
waiting prompts in arrival order, a chunk at a time. A prompt is admitted only while the KV cache can hold every
admitted request to its end and fewer than ``max_seqs`` run. A user whose request ends sends the next one at once and
it joins the next step. The step's time is ``formulas``' step model with every chunk's attention over its own
prefix. Decode-only stretches are taken as one block (their steps differ only by the context growing one token per
request), so a run costs a few events per request, not one per token.

The statistics are those of every request after each user's first (the start-up round is left out).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

from hyperpod_dpd.planner.formulas import StepCosts

_ROUNDS = 4  # requests per user simulated; the first round of each user is the start-up and not counted


class Samples:
    """Equally likely observed values: the ``quantile`` interface of ``tails``' distributions."""

    def __init__(self, values: list[float]):
        self.values = sorted(values)

    def quantile(self, p: float) -> float:
        values = self.values
        return values[min(len(values) - 1, max(0, math.ceil(p * len(values)) - 1))]

    def share_within(self, limit: float) -> float:
        return bisect_right(self.values, limit) / len(self.values)


@dataclass(frozen=True)
class Observed:
    """Per-request TTFT, TPOT and end-to-end latency of a lock-step run: ``serving.Point.spread`` for it."""

    ttft: Samples
    tpot: Samples
    latency: Samples
    pairs: tuple[tuple[float, float], ...]  # (TTFT, TPOT) of each counted request
    itl_p50: float

    def e2e(self) -> Samples:
        return self.latency

    def attainment(self, ttft_slo_s: float | None, tpot_slo_s: float | None) -> float:
        """Share of requests that meet both targets (``None``: no target)."""
        ttft_cap = math.inf if ttft_slo_s is None else ttft_slo_s
        tpot_cap = math.inf if tpot_slo_s is None else tpot_slo_s
        met = sum(1 for ttft, tpot in self.pairs if ttft <= ttft_cap and tpot <= tpot_cap)
        return met / len(self.pairs)


@dataclass(frozen=True)
class Run:
    """The outcome of a lock-step run: means over the counted requests and their distributions."""

    request_rate: float
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    max_step_s: float
    decode_batch: float
    prefill_utilization: float
    observed: Observed


def _step(costs: StepCosts, decoders: int, context: float, pieces: list[tuple[int, int, bool]]) -> float:
    """One step: ``decoders`` decode tokens over ``context`` cached tokens, plus (chunk, tokens before it, last)."""
    chunk_tokens = sum(size for size, _, _ in pieces)
    tokens = decoders + chunk_tokens
    heads = decoders + sum(1 for _, _, last in pieces if last)
    memory = costs.dense_weights_s + (context + sum(start for _, start, _ in pieces)) * costs.kv_read_s_per_token
    if costs.expert_weights_s:
        memory += costs.expert_weights_s * (1.0 - costs.expert_miss ** tokens)
    pairs = context + sum(size * (start + size / 2) for size, start, _ in pieces)
    compute = (tokens * costs.linear_s_per_token + heads * costs.head_s_per_token
               + pairs * costs.attention_s_per_pair)
    loss = costs.overlap_loss
    overlapped = memory + loss * compute if memory > compute else compute + loss * memory
    return overlapped + costs.comm_fixed_s + tokens * costs.comm_s_per_token


def run(costs: StepCosts, *, inputs: int, outputs: int, users: int, budget: int, max_seqs: int,
        kv_slots: float, overhead_s: float = 0.0) -> Run | None:
    """Step ``users`` closed-loop users of ``inputs``/``outputs`` tokens that start together; ``None`` when one
    request does not fit in the KV cache. ``overhead_s`` is the per-request cost outside the steps (added to TTFT and
    latency, and before each next request reaches the engine)."""
    if inputs + outputs > kv_slots:
        return None
    admit = max(1, min(max_seqs, int(kv_slots // (inputs + outputs))))
    now = 0.0
    waiting: list[list[float]] = [[overhead_s, overhead_s, 0] for _ in range(users)]  # [ready, sent, prefilled]
    decoding: list[list[float]] = []  # [tokens left, context, sent, first token at]
    ttfts: list[float] = []
    tpots: list[float] = []
    latencies: list[float] = []
    finished, target = 0, users * _ROUNDS
    window_start = window_tokens = busy_prefill = batch_time = 0.0
    max_step = 0.0
    counting = False
    while finished < target:
        eligible = [w for w in waiting if w[0] <= now]
        if not decoding and not eligible:
            now = min(w[0] for w in waiting)
            continue
        context = sum(d[1] for d in decoding)
        left = budget - len(decoding)
        held = len(decoding) + sum(1 for w in waiting if w[2] > 0)
        chosen: list[tuple[list[float], int]] = []
        pieces: list[tuple[int, int, bool]] = []
        for w in eligible:
            if left <= 0:
                break
            if w[2] == 0:
                if held >= admit:
                    break
                held += 1
            size = int(min(inputs - w[2], left))
            pieces.append((size, int(w[2]), w[2] + size >= inputs))
            chosen.append((w, size))
            left -= size
        steps = 1
        if pieces:
            elapsed = _step(costs, len(decoding), context, pieces)
        else:  # decode only until the next request ends or the next prompt can join
            steps = int(min(d[0] for d in decoding))
            ready = min((w[0] for w in waiting if held < admit), default=math.inf)
            first = _step(costs, len(decoding), context, [])
            if ready < math.inf:
                steps = max(1, min(steps, math.ceil((ready - now) / first)))
            elapsed = steps * _step(costs, len(decoding), context + len(decoding) * (steps - 1) / 2, [])
        max_step = max(max_step, elapsed / steps)
        if counting:
            batch_time += len(decoding) * elapsed
            window_tokens += len(decoding) * steps + sum(1 for *_, last in pieces if last)
            if pieces:
                busy_prefill += elapsed
        now += elapsed
        still = []
        for d in decoding:
            d[0] -= steps
            d[1] += steps
            if d[0] > 0:
                still.append(d)
                continue
            finished += 1
            if counting:
                ttft, latency = d[3] - d[2] + overhead_s, now - d[2] + overhead_s
                ttfts.append(ttft)
                latencies.append(latency)
                tpots.append((now - d[3]) / (outputs - 1))
            waiting.append([now + overhead_s, now + overhead_s, 0])
            if not counting and finished >= users:  # every user is past its first request: the loop is warm
                counting, window_start = True, now
        decoding = still
        for w, size in chosen:
            w[2] += size
            if w[2] >= inputs:
                waiting.remove(w)
                decoding.append([outputs - 1, inputs + 1, w[1], now])
    window = now - window_start
    observed = Observed(ttft=Samples(ttfts), tpot=Samples(tpots), latency=Samples(latencies),
                        pairs=tuple(zip(ttfts, tpots, strict=True)), itl_p50=Samples(tpots).quantile(0.5))
    return Run(request_rate=len(ttfts) / window, ttft_s=sum(ttfts) / len(ttfts), tpot_s=sum(tpots) / len(tpots),
               output_tokens_per_s=window_tokens / window, max_step_s=max_step, decode_batch=batch_time / window,
               prefill_utilization=busy_prefill / window, observed=observed)


def replicas(costs: StepCosts, *, inputs: int, outputs: int, users: int, count: int, budget: int, max_seqs: int,
             kv_slots: float, overhead_s: float = 0.0) -> Run | None:
    """``users`` spread over ``count`` identical replicas as a round-robin router deals them (the first
    ``users mod count`` replicas hold one more); ``None`` when a replica cannot hold one request."""
    share, extra = divmod(users, count)
    runs = []
    for held, replicas_holding in ((share + 1, extra), (share, count - extra)):
        if held and replicas_holding:
            found = run(costs, inputs=inputs, outputs=outputs, users=held, budget=budget, max_seqs=max_seqs,
                        kv_slots=kv_slots, overhead_s=overhead_s)
            if found is None:
                return None
            runs.append((found, replicas_holding))
    if len(runs) == 1 and runs[0][1] == 1:
        return runs[0][0]
    rate = sum(r.request_rate * n for r, n in runs)
    ttfts = [v for r, n in runs for v in r.observed.ttft.values * n]
    tpots = [v for r, n in runs for v in r.observed.tpot.values * n]
    pairs = tuple(p for r, n in runs for p in r.observed.pairs * n)
    latencies = [v for r, n in runs for v in r.observed.latency.values * n]
    observed = Observed(ttft=Samples(ttfts), tpot=Samples(tpots), latency=Samples(latencies), pairs=pairs,
                        itl_p50=Samples(tpots).quantile(0.5))
    return Run(request_rate=rate, ttft_s=sum(r.ttft_s * r.request_rate * n for r, n in runs) / rate,
               tpot_s=sum(r.tpot_s * r.request_rate * n for r, n in runs) / rate,
               output_tokens_per_s=sum(r.output_tokens_per_s * n for r, n in runs),
               max_step_s=max(r.max_step_s for r, _ in runs),
               decode_batch=sum(r.decode_batch * n for r, n in runs) / count,
               prefill_utilization=max(r.prefill_utilization for r, _ in runs), observed=observed)
