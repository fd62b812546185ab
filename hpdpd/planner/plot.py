"""TTFT and TPOT against load for both serving modes, as a PNG (matplotlib, headless Agg backend)."""

from __future__ import annotations

import math
from pathlib import Path

from hyperpod_dpd.planner.plan import Plan


def write_plot(plan: Plan, path: Path) -> None:
    """Two panels, TTFT and TPOT in ms; saturated points are left out rather than drawn at infinity."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    loads = [p.load for p in plan.predictions]
    figure, (ttft_axes, tpot_axes) = pyplot.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    modes = (("colocated", f"colocated, {plan.layout.baseline_nodes} nodes", "tab:blue", "o"),
             ("disaggregated", f"DPD, {plan.layout.prefill_nodes}P + {plan.layout.decode_nodes}D", "tab:orange", "s"))
    for attribute, label, colour, marker in modes:
        points = [getattr(p, attribute) for p in plan.predictions]
        for axes, metric in ((ttft_axes, "ttft_s"), (tpot_axes, "tpot_s")):
            xs = [load for load, point in zip(loads, points, strict=True) if math.isfinite(getattr(point, metric))]
            ys = [getattr(point, metric) * 1e3 for point in points if math.isfinite(getattr(point, metric))]
            axes.plot(xs, ys, label=label, color=colour, marker=marker)
    unit = "concurrent requests" if plan.workload.closed_loop else "requests per second"
    for axes, title in ((ttft_axes, "Time to first token"), (tpot_axes, "Time per output token")):
        axes.set_title(title)
        axes.set_xlabel(unit)
        axes.set_ylabel("ms")
        axes.grid(True, alpha=0.3)
        axes.set_ylim(bottom=0)
        axes.legend()
    figure.suptitle(f"{plan.model.name} on {plan.instance.name}: prompts {plan.workload.inputs.describe()}, "
                    f"outputs {plan.workload.outputs.describe()} tokens - {plan.verdict.decision}")
    figure.savefig(path, format="png", dpi=110)
    pyplot.close(figure)
