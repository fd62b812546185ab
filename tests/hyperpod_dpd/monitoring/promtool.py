"""Prometheus's own rule engine for the tests: ``promtool check rules`` and ``promtool test rules`` (Debian's
``prometheus`` package, which ``make setup-system`` installs), and the pieces its unit-test files are made of.

* Input series as the exporters emit them: classic histograms as cumulative ``_bucket`` series with ``le`` (plus
  ``_count`` and ``_sum``), counters, gauges; vLLM and LMCache names with ``:``; the HyperPod labels.
* The expected alerts' annotations, rendered from the rule file's own templates with the few Go template forms the
  rules use (anything else is refused, so a new form cannot slip through unrendered), and the PromQL
  ``histogram_quantile`` interpolation as the oracle of the seeded values (prometheus/prometheus
  ``promql/quantile.go``, ``bucketQuantile``: linear interpolation inside the bucket that holds the rank; the highest
  finite bound when the rank falls in ``+Inf``).
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests import cache

PROMTOOL_MISSING = ("promtool is not on PATH: run `make setup-system` (it installs Debian's prometheus package, "
                    "which ships promtool); the alert rules are checked by Prometheus's own rule engine")
PROMTOOL_CACHE = cache.CACHE_ROOT / "promtool"
STEPS = 60  # samples per input series, one a minute: an hour of scrapes


def promtool() -> str:
    """The promtool binary; the calling test FAILS (never skips) without it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(PROMTOOL_MISSING, pytrace=False)
    return path


@functools.cache
def _version(binary: str) -> str:
    """What identifies the promtool that runs: its real path and what ``promtool --version`` prints (version,
    revision, build date, Go version)."""
    printed = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=True)
    return f"{os.path.realpath(binary)}\n{printed.stdout}{printed.stderr}"


def _inputs(cwd: Path, args: Sequence[str]) -> list[bytes | str]:
    """Every file promtool can read in these runs, path and bytes: the files under ``cwd`` (the arguments are relative
    to it, and promtool prints them as the arguments name them, so their paths count relative to it) and the rule
    files a unit-test file names, wherever they are."""
    files = {p for p in cwd.rglob("*") if p.is_file()}
    for arg in args:
        if (cwd / arg).is_file() and arg.endswith((".yaml", ".yml")):
            document = yaml.safe_load((cwd / arg).read_text())
            if isinstance(document, dict):
                files |= {(cwd / arg).parent / str(f) for f in document.get("rule_files") or []
                          if ((cwd / arg).parent / str(f)).is_file()}
    parts: list[bytes | str] = []
    for path in sorted(files):
        parts += [str(path.relative_to(cwd) if path.is_relative_to(cwd) else path), path.read_bytes()]
    return parts


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """promtool with ``args`` in ``cwd``. Its exit status and output are a function of the arguments, the files it reads
    and the promtool release, so they are kept in .cache/ under that key (tests/cache.py; HPDPD_TEST_CACHE=off runs it
    every time)."""
    binary, argv = promtool(), [str(a) for a in args]
    key = cache.key(_version(binary), *argv, "--", *_inputs(cwd, argv))
    kept = PROMTOOL_CACHE / f"{key}.json"
    hit = cache.read_json(kept)
    if hit is not None:
        return subprocess.CompletedProcess([binary, *argv], hit["returncode"], hit["stdout"], hit["stderr"])
    result = subprocess.run([binary, *argv], cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    cache.write_json(kept, {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr})
    return result


# -- input series -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Series:
    """One ``input_series`` entry: ``name{labels}`` and promtool's expanding notation (``a+bxn``)."""

    name: str
    labels: Mapping[str, str]
    values: str

    def to_input(self) -> dict[str, str]:
        rendered = ", ".join(f'{k}="{v}"' for k, v in self.labels.items())
        return {"series": f"{self.name}{{{rendered}}}", "values": self.values}


def _growing(per_step: float, steps: int = STEPS) -> str:
    return f"0+{per_step:.12g}x{steps}"


def counter(name: str, labels: Mapping[str, str], per_minute: float, *, steps: int = STEPS) -> Series:
    return Series(name=name, labels=labels, values=_growing(per_minute, steps))


def gauge(name: str, labels: Mapping[str, str], value: float, *, steps: int = STEPS) -> Series:
    return Series(name=name, labels=labels, values=f"{value:g}x{steps}")


def stepped(name: str, labels: Mapping[str, str], values: Iterable[float]) -> Series:
    """A series with explicit per-minute values (for a counter that jumps once)."""
    return Series(name=name, labels=labels, values=" ".join(f"{v:g}" for v in values))


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else f"{bound:g}"


def histogram(name: str, labels: Mapping[str, str], buckets: Sequence[float], observations: Sequence[float], *,
              steps: int = STEPS) -> list[Series]:
    """A classic histogram that observes ``observations`` (in its own unit) every minute: one cumulative
    ``_bucket`` series per bound and ``+Inf``, plus ``_count`` and ``_sum``. No observations: flat series (the
    exporter registered the histogram, nothing was observed)."""
    series = [Series(name=f"{name}_bucket", labels={**labels, "le": _le(bound)},
                     values=_growing(sum(1 for o in observations if o <= bound), steps))
              for bound in (*buckets, math.inf)]
    series.append(Series(name=f"{name}_count", labels=labels, values=_growing(len(observations), steps)))
    series.append(Series(name=f"{name}_sum", labels=labels, values=_growing(sum(observations), steps)))
    return series


# -- the oracle ---------------------------------------------------------------------------------------------------------

def histogram_quantile(q: float, buckets: Sequence[float], observations: Sequence[float]) -> float:
    """What PromQL's ``histogram_quantile`` returns for these observations (any constant rate of them)."""
    if not observations:
        return math.nan
    bounds = [*buckets, math.inf]
    cumulative = [sum(1 for o in observations if o <= b) for b in bounds]
    rank = q * cumulative[-1]
    index = next(i for i, count in enumerate(cumulative) if count >= rank)
    if index == len(bounds) - 1:
        return bounds[-2]
    start, below = (bounds[index - 1], cumulative[index - 1]) if index > 0 else (0.0, 0)
    return start + (bounds[index] - start) * ((rank - below) / (cumulative[index] - below))


# -- expected annotations -----------------------------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_PRINTF = re.compile(r'^\$value \| printf "%\.(\d)f"$')
_LABEL = re.compile(r"^\$labels\.([A-Za-z_][A-Za-z0-9_]*)$")


def _unambiguous(value: float, decimals: int) -> float:
    """Refuse a seeded value whose rounding could differ between Go and Python or with float noise."""
    scaled = value * 10 ** decimals
    if abs(scaled - math.floor(scaled) - 0.5) < 1e-6:
        raise ValueError(f"seeded value {value!r} sits on a rounding boundary; choose another")
    return value


def _go_float(value: float) -> str:
    """``{{ $value }}``: Go's ``%v`` of a float64 (shortest form, exponent from 1e21)."""
    if float(value).is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def render(template: str, labels: Mapping[str, str], value: float | None) -> str:
    """Prometheus's expansion of one annotation template (``$labels`` are the expression's labels)."""
    def action(match: re.Match[str]) -> str:
        text = match.group(1)
        if (label := _LABEL.match(text)) is not None:
            return labels[label.group(1)]
        if value is None:
            raise ValueError(f"{template!r} needs $value; the scenario gives none")
        if (printf := _PRINTF.match(text)) is not None:
            decimals = int(printf.group(1))
            return f"{_unambiguous(value, decimals):.{decimals}f}"
        if text == "$value | humanizePercentage":  # Go: fmt.Sprintf("%.4g%%", v*100)
            return f"{value * 100:.4g}%"
        if text == "$value":
            return _go_float(value)
        raise ValueError(f"template action {{{{ {text} }}}} has no renderer here; add one")

    return _ACTION.sub(action, template)
