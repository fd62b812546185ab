"""The routing threshold, chosen from the workload's prompt-length distribution.

A threshold only matters through the set of prompt lengths it sends to the prefillers, so the candidates are the
distinct routing sets of the distribution: "lengths from n_i up disaggregate", for each length n_i, and "none". Each
candidate is planned in full (its own prefill:decode ratio, the prefill queue, the decoder's load) and scored by
goodput per node at the highest load. The measured default (4096) is kept unless another set serves at least
``THRESHOLD_GAIN`` more requests within the SLO per node; a candidate's threshold is the default when the default
routes the same lengths (no cliff: any value between two lengths behaves the same), else a round number just above
the next shorter length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

THRESHOLD_GAIN = 0.10
_ROUND = 256


@dataclass(frozen=True)
class Candidate:
    threshold: int
    remote_share: float
    prefill_replicas: int
    goodput_per_node: float
    saturated: bool


def candidate_thresholds(lengths: Sequence[int], default: int) -> list[int]:
    """One threshold per distinct routing set of ``lengths`` (sorted ascending), the default where it applies."""
    values: list[int] = []
    for i in range(len(lengths) + 1):
        lower = lengths[i - 1] if i > 0 else 0
        if i == len(lengths):  # nothing disaggregates
            value = default if default > lower else (lower // _ROUND + 1) * _ROUND
        else:
            upper = lengths[i]
            if lower < default <= upper:
                value = default
            else:
                rounded = upper // _ROUND * _ROUND
                value = rounded if rounded > lower else upper
        if value not in values:
            values.append(value)
    return values


@dataclass(frozen=True)
class Choice:
    chosen: Candidate
    candidates: tuple[Candidate, ...]
    reasons: tuple[str, ...]


def choose(lengths: Sequence[int], default: int, score: Callable[[int], Candidate], *,
           load_label: str) -> Choice:
    """Score every candidate with ``score`` and keep the default unless another one clearly wins."""
    candidates = tuple(score(t) for t in candidate_thresholds(lengths, default))
    by_value = {c.threshold: c for c in candidates}
    base = by_value[default]
    best = max(candidates, key=lambda c: (c.goodput_per_node, c.threshold == default))
    gain = best.goodput_per_node / base.goodput_per_node - 1 if base.goodput_per_node > 0 else float("inf")
    if best is base or (base.goodput_per_node > 0 and gain < THRESHOLD_GAIN) or best.goodput_per_node <= 0:
        others = [c for c in candidates if c is not base]
        if not others:
            reason = (f"routing_threshold {default}: every prompt length routes the same way below and above it "
                      f"({base.remote_share:.0%} disaggregate); the measured default stands")
        else:
            runner = max(others, key=lambda c: c.goodput_per_node)
            change = (f"{runner.goodput_per_node / base.goodput_per_node - 1:+.0%}" if base.goodput_per_node > 0
                      else "no better")
            reason = (f"routing_threshold {default} (measured default): the best alternative, {runner.threshold:,} "
                      f"({runner.remote_share:.0%} disaggregated, {runner.prefill_replicas} prefill), changes goodput "
                      f"per node by {change} at {load_label}; a change needs +{THRESHOLD_GAIN:.0%}")
        return Choice(base, candidates, (reason,))
    direction = "lower" if best.threshold < default else "raise"
    return Choice(best, candidates, (
        f"{direction} routing_threshold to {best.threshold:,}: {best.remote_share:.0%} of prompts disaggregate with "
        f"{best.prefill_replicas} prefill node(s), {best.goodput_per_node:.3f} req/s within SLO per node against "
        f"{base.goodput_per_node:.3f} at the default {default} ({gain:+.0%}) at {load_label}",))
