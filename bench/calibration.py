"""Prints the planner's calibration table: every published measurement, the planner's prediction and its error.

Rows marked ``calibration`` fixed a constant (their error is near zero by construction); ``held-out`` rows were left
out of every fit, so their errors are the model's real errors. Sources: ``hyperpod_dpd.planner.measurements``.

Usage: .venv/bin/python bench/calibration.py   (``make bench`` runs it)
       .venv/bin/python bench/calibration.py --commands   (each row's ``hpdpd plan`` flags and the JSON value read)
"""

from __future__ import annotations

import statistics
import sys

import commands

from hyperpod_dpd.planner.measurements import Row, rows


def _value(value: float, unit: str) -> str:
    return f"{value:+.1f} %" if unit == "%" else f"{value:,.1f} {unit}"


def _error(row: Row) -> str:
    error = row.error
    unit = row.measurement.unit
    return f"{error:+.1f} pp" if unit == "%" else f"{error:+.0%}"


def _commands() -> int:
    keys = [r.measurement.key for r in rows()]
    for key, command in commands.commands(keys).items():
        print(f"{key}\n  {command.line()}\n  reads {command.reads}")
    for name, constants in commands.PROFILES.items():
        print(f"\n{name} (a --calibration file above):\n{commands.calibration_yaml(constants)}", end="")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--commands"]:
        return _commands()
    table = rows()
    width = max(len(r.measurement.what) for r in table)
    source = max(len(r.measurement.source) for r in table)
    print(f"{'source':<{source}} {'measurement':<{width}} {'role':<12} {'published':>14} {'predicted':>14} {'error':>8}")
    for row in table:
        m = row.measurement
        print(f"{m.source:<{source}} {m.what:<{width}} {m.role:<12} {_value(m.published, m.unit):>14} "
              f"{_value(row.predicted, m.unit):>14} {_error(row):>8}" + (f"   fits {m.fits}" if m.fits else ""))
    held = [r for r in table if r.measurement.role == "held-out"]
    relative = [abs(r.error) for r in held if r.measurement.unit != "%"]
    points = [abs(r.error) for r in held if r.measurement.unit == "%"]
    print(f"held-out: {len(held)} rows; median |error| {sorted(relative)[len(relative) // 2]:.0%} (absolute units), "
          f"max {max(relative):.0%}; relative changes median {sorted(points)[len(points) // 2]:.1f} pp, "
          f"max {max(points):.1f} pp")
    print("held-out error per GPU and quantity (bounds: median <= 15%, P90 <= 35%):")
    buckets: dict[tuple[str, str], list[float]] = {}
    for r in held:
        if r.measurement.unit != "%":
            buckets.setdefault((r.measurement.gpu or "-", r.measurement.metric), []).append(abs(r.error))
    for (gpu, metric), errors in sorted(buckets.items()):
        errors.sort()
        p90 = errors[min(len(errors) - 1, int(0.9 * len(errors)))]
        print(f"  {gpu:<5} {metric:<11} {len(errors):>3} points  median {statistics.median(errors):>4.0%}  "
              f"P90 {p90:>4.0%}  max {errors[-1]:>4.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
