"""The sweep as four panels, both modes: TTFT and TPOT (P50 solid, P99 dashed) with the SLO lines, output throughput,
and goodput within the SLO, each marking the recommended operating point. PNG or SVG by the file's suffix
(matplotlib, headless Agg backend; the ``hyperpod-dpd[plot]`` extra). Saturated points are left out."""

from __future__ import annotations

import math
from pathlib import Path

from hyperpod_dpd.planner.plan import Plan

_MODES = (("colocated", "tab:blue", "o"), ("disaggregated", "tab:orange", "s"))


def write_plot(plan: Plan, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    curve = plan.curve
    loads = [p.load for p in curve]
    slo = plan.slo
    labels = {"colocated": f"colocated, {plan.layout.baseline_nodes} node(s) ({plan.layout.colocated_replicas} x "
                           f"TP{plan.layout.colocated_tp})",
              "disaggregated": f"DPD, {plan.layout.prefill_nodes}P + {plan.layout.decode_nodes}D"}
    figure, axes = pyplot.subplots(2, 2, figsize=(12, 8.2), constrained_layout=True)
    ttft_axes, tpot_axes, tput_axes, good_axes = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    operating = dict(zip(("colocated", "disaggregated"), plan.operating, strict=True))
    for mode, colour, marker in _MODES:
        points = [getattr(p, mode) for p in curve]
        for panel, metric in ((ttft_axes, "ttft"), (tpot_axes, "tpot")):
            for quantile, style in (("p50", "-"), ("p99", "--")):
                pairs = [(x, getattr(pt, f"{metric}_{quantile}_s") * 1e3) for x, pt in zip(loads, points, strict=True)
                         if not pt.saturated and math.isfinite(getattr(pt, f"{metric}_{quantile}_s"))]
                if pairs:
                    panel.plot(*zip(*pairs, strict=True), style, color=colour, marker=marker, markersize=4,
                               label=f"{labels[mode]} {quantile.upper()}")
        tput = [(x, pt.output_tokens_per_s) for x, pt in zip(loads, points, strict=True) if not pt.saturated]
        good = [(x, pt.goodput(slo.ttft_s, slo.tpot_s)) for x, pt in zip(loads, points, strict=True)
                if not pt.saturated]
        for panel, pairs in ((tput_axes, tput), (good_axes, good)):
            if pairs:
                panel.plot(*zip(*pairs, strict=True), "-", color=colour, marker=marker, markersize=4,
                           label=labels[mode])
        op = operating[mode]
        chosen = curve[[p.load for p in curve].index(op.load)]
        point = getattr(chosen, mode)
        if not point.saturated:
            for panel, value in ((ttft_axes, point.ttft_p99_s * 1e3), (tpot_axes, point.tpot_p99_s * 1e3),
                                 (tput_axes, point.output_tokens_per_s), (good_axes, op.goodput_rps)):
                panel.plot([op.load], [value], marker="*", markersize=16, color=colour, markeredgecolor="black",
                           linestyle="none", label=f"{mode} operating point" if panel is good_axes else None)
    for panel, limit, name in ((ttft_axes, slo.ttft_s, "TTFT SLO"), (tpot_axes, slo.tpot_s, "TPOT SLO")):
        if limit is not None:
            panel.axhline(limit * 1e3, color="tab:red", linestyle=":", linewidth=1.5, label=f"{name} {limit * 1e3:g} ms")
    unit = "concurrent requests" if plan.workload.closed_loop else "requests per second"
    titles = ((ttft_axes, "Time to first token (P50 solid, P99 dashed)", "ms"),
              (tpot_axes, "Time per output token (P50 solid, P99 dashed)", "ms"),
              (tput_axes, "Output throughput", "tokens/s"),
              (good_axes, f"Goodput within SLO ({slo.describe()})", "requests/s"))
    for panel, title, ylabel in titles:
        panel.set_title(title, fontsize=10)
        panel.set_xlabel(unit)
        panel.set_ylabel(ylabel)
        if len(loads) > 2 and min(loads) > 0 and max(loads) / min(loads) >= 8:
            panel.set_xscale("log", base=2)
            panel.set_xticks(loads, [f"{x:g}" for x in loads])
        panel.grid(True, alpha=0.3)
        panel.set_ylim(bottom=0)
        panel.legend(fontsize=7)
    figure.suptitle(f"{plan.model.name} on {plan.instance.name} ({plan.model.weight_dtype.upper()} weights, "
                    f"{plan.model.kv_dtype.upper()} KV): prompts {plan.workload.inputs.describe()}, outputs "
                    f"{plan.workload.outputs.describe()} tokens. Verdict: {plan.verdict.decision}")
    figure.savefig(path, format=path.suffix.lower().lstrip(".") or "png", dpi=110)
    pyplot.close(figure)
