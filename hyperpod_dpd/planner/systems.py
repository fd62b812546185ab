"""The serving systems behind one plan, built once per layout, and the sizing steps that search over them.

``make_plan`` (plan.py) asks these for points; each closed loop is solved once per layout, threshold and load.
Node counts are converted to replicas here: a node holds GPUs / TP replicas of a role.
"""

from __future__ import annotations

from typing import Any

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE
from hyperpod_dpd.planner import recommend
from hyperpod_dpd.planner.calibration import Calibration
from hyperpod_dpd.planner.formulas import free_bytes_per_gpu, kv_capacity_tokens, valid_tensor_parallel_sizes
from hyperpod_dpd.planner.serving import Colocated, Disaggregated, Point
from hyperpod_dpd.planner.verdict import Slo
from hyperpod_dpd.planner.workload import Workload


class Planner:
    """Builds the serving systems once per layout and threshold, so a plan solves each closed loop only once."""

    def __init__(self, model: ModelSpec, instance: InstanceSpec, workload: Workload, tp: int,
                 calibration: Calibration, prefill_tp: int | None = None, prefill_per_node: int | None = None,
                 decode_per_node: int | None = None):
        """``tp`` is the decoders' tensor parallelism, ``prefill_tp`` the prefillers' (default the same); a node
        holds ``*_per_node`` replicas of its role (default: as many as its GPUs fit)."""
        self.model, self.instance, self.workload, self.tp, self.calibration = (
            model, instance, workload, tp, calibration)
        self.prefill_tp = prefill_tp or tp
        self.prefill_per_node = prefill_per_node or instance.gpu_count // self.prefill_tp
        self.decode_per_node = decode_per_node or instance.gpu_count // tp
        self._points: dict[tuple[Any, ...], Point] = {}
        self._systems: dict[tuple[Any, ...], Disaggregated] = {}

    def colocated(self, replicas: int, tp: int, load: float) -> Point:
        key = ("c", replicas, tp, load)
        if key not in self._points:
            system = Colocated(model=self.model, instance=self.instance, tensor_parallel=tp, nodes=replicas,
                               workload=self.workload, calibration=self.calibration)
            self._points[key] = self._solve(system, load)
        return self._points[key]

    def disaggregated(self, prefill: int, decode: int, threshold: int, buffer: float, load: float) -> Point:
        key = ("d", prefill, decode, threshold, buffer, load)
        if key not in self._points:
            self._points[key] = self._solve(self.dpd_system(prefill, decode, threshold, buffer), load)
        return self._points[key]

    def dpd_system(self, prefill: int, decode: int, threshold: int, buffer: float) -> Disaggregated:
        """``prefill`` and ``decode`` are nodes; each holds GPUs / TP replicas of its role."""
        key = (prefill, decode, threshold, buffer)
        if key not in self._systems:
            self._systems[key] = Disaggregated(
                model=self.model, instance=self.instance, tensor_parallel=self.tp,
                prefill=prefill * self.prefill_per_node, decode=decode * self.decode_per_node,
                threshold=threshold, workload=self.workload, calibration=self.calibration, pd_buffer_bytes=buffer,
                prefill_tensor_parallel=self.prefill_tp)
        return self._systems[key]

    def _solve(self, system: Colocated | Disaggregated, load: float) -> Point:
        return system.at_concurrency(load) if self.workload.closed_loop else system.at_rate(load)


def prefill_pool(planner: Planner, decode: int, threshold: int, peak: float, estimate: int,
                  load_label: str) -> recommend.Decision:
    """Closed loop: the smallest prefill pool that runs at most ``prefill_target_utilization`` busy at the peak
    load, with its own queue in the loop (the rate one decoder sustains with unlimited prefill, ``estimate``'s basis,
    overstates what the loop delivers once prompts queue)."""
    target = planner.calibration.prefill_target_utilization

    def busy(prefill: int) -> float:
        return prefill_busy(planner, prefill, decode, threshold, peak)

    prefill = estimate
    while busy(prefill) > target and prefill < 4 * estimate:
        prefill += 1
    while prefill > 1 and busy(prefill - 1) <= target:
        prefill -= 1
    fewer = f"; {prefill - 1} would run {busy(prefill - 1):.0%} busy" if prefill > 1 else ""
    return recommend.Decision(prefill, (
        f"{prefill} prefill : {decode} decode: at {load_label} the prefill pool runs {busy(prefill):.0%} busy "
        f"(sized for at most {target:.0%}, queueing included){fewer}",))


def prefill_busy(planner: Planner, prefill: int, decode: int, threshold: int, peak: float) -> float:
    point = planner.disaggregated(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
    return 1.0 if point.saturated else point.prefill_utilization


def pd_buffer(planner: Planner, prefill: int, decode: int, threshold: int, peak: float, share: float,
            remote: list[tuple[int, float]]) -> recommend.Decision:
    workload, model, instance, tp, calibration = (planner.workload, planner.model, planner.instance, planner.tp,
                                                  planner.calibration)
    point = planner.disaggregated(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE, peak)
    if workload.closed_loop:
        in_flight = peak * share
    elif point.saturated:  # past saturation: as many as the decoders' KV cache holds
        system = planner.dpd_system(prefill, decode, threshold, DEFAULT_PD_BUFFER_SIZE)
        in_flight = system.kv_slots / workload.decode_context * decode * share
    else:
        in_flight = point.concurrency * share
    decoder_free = free_bytes_per_gpu(model=model, instance=instance, tensor_parallel=tp,
                                      utilization=calibration.dpd_memory_utilization, calibration=calibration)
    return recommend.pd_buffer_size(in_flight=in_flight if share else 0.0,
                                    prompt_tokens=max((n for n, _ in remote), default=workload.inputs.maximum),
                                    bytes_per_token_per_rank=model.kv_bytes_per_token_per_rank(tp),
                                    decoder_free_bytes=decoder_free)


def colocated_layout(planner: Planner, nodes: int, peak: float, slo: Slo, max_len: int, *, tp: int | None = None,
                     replicas: int | None = None) -> tuple[int, int]:
    """The best colocated layout on ``nodes``: one replica per node (TP = GPUs per node) or as many replicas as fit
    (the smallest TP whose replica holds the weights and one max_model_len request), whichever serves the most goodput
    at the highest load (ties: one replica per node). ``tp`` and ``replicas`` fix the layout as published."""
    instance, model, calibration = planner.instance, planner.model, planner.calibration
    if tp is not None:
        return tp, replicas or nodes * instance.gpu_count // tp
    sizes = valid_tensor_parallel_sizes(model, instance)
    full = sizes[-1]  # the node's GPU count, unless the attention heads do not split that far (vLLM refuses it)
    if replicas is not None:
        return full, replicas
    fitting = [tp for tp in sizes
               if kv_capacity_tokens(model=model, instance=instance, tensor_parallel=tp,
                                     utilization=calibration.colocated_memory_utilization,
                                     calibration=calibration) >= max_len][:1]
    if full not in fitting:
        fitting.append(full)
    best = (full, nodes * instance.gpu_count // full)
    if len(fitting) == 1:
        return best
    scores = {}
    for tp in fitting:
        replicas = nodes * instance.gpu_count // tp
        scores[(tp, replicas)] = planner.colocated(replicas, tp, peak).goodput(slo.ttft_s, slo.tpot_s)
    return max(scores, key=lambda key: (scores[key] * (1 - 1e-9), key[0]))
