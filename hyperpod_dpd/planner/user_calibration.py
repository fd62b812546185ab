"""Constants measured on your own cluster (``hpdpd plan --calibration FILE``), in place of the published ones.

The planner's constants come from public measurements (``calibration.py``, each with its source). Some rest on a
path that is not HyperPod's own (the KV transfer's fixed cost and the decoder's join were fitted on Dynamo's NIXL
pull path, docs/planner.md "Assumptions and limits"), so the best values for a deployment are the ones measured on
it. A calibration file replaces named constants, and every replacement carries the measurement it came from::

    calibration:
      transfer_fixed_s:
        value: 0.012
        source: "prod-us-east-1, router log + KV Transfer Time panel, P50 at 16 users, 2026-11-28"
      hbm_efficiency:
        value: 0.70
        source: "prod-us-east-1 decoder, vllm:inter_token_latency_seconds P50 at 1 user"

Each constant has bounds that keep it physical (an efficiency is a share of a datasheet peak, so at most 1). The
engine settings that ``hpdpd plan`` takes as flags (``--max-num-seqs``, ``--max-num-batched-tokens``,
``--block-size``) and the connector's behaviour (``--kv-connector``) are refused here, so one setting has one
place. A wrong file ends in one line per problem naming
the file, the field path, the value and what is allowed; the plan's JSON lists each replaced constant with its
published default and the source given.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from hyperpod_dpd.errors import MISSING, ConfigError, Issue

Kind = Literal["float", "int"]


@dataclass(frozen=True)
class Bound:
    """What a constant may be: its kind and its closed or open range (``low_open``: the low end is excluded)."""

    kind: Kind
    low: float = 0.0
    high: float = 1.0
    low_open: bool = False
    unit: str = ""

    def allowed(self) -> str:
        low = f"above {self.low:g}" if self.low_open else f"at least {self.low:g}"
        what = "a whole number" if self.kind == "int" else "a number"
        unit = f" ({self.unit})" if self.unit else ""
        return f"must be {what} {low} and at most {self.high:g}{unit}"

    def check(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if not math.isfinite(value) or value > self.high:
            return False
        return value > self.low if self.low_open else value >= self.low


_SHARE = Bound("float", 0.0, 1.0, low_open=True, unit="a share of the catalogue peak")
# Upper bounds are sanity limits (a value past them is a unit mistake), not the engines' limits.
OVERRIDABLE: dict[str, Bound] = {
    "prefill_efficiency": _SHARE,
    "low_precision_efficiency": _SHARE,
    "moe_prefill_efficiency": _SHARE,
    "hbm_efficiency": _SHARE,
    "transfer_efficiency": _SHARE,
    "nvlink_efficiency": _SHARE,
    "overlap_loss": Bound("float", 0.0, 1.0, unit="share of the shorter of HBM and compute time"),
    "step_overhead_s": Bound("float", 0.0, 0.1, unit="seconds per engine step"),
    "request_overhead_s": Bound("float", 0.0, 10.0, unit="seconds per request outside the engine's steps"),
    "allreduce_latency_s": Bound("float", 0.0, 0.01, unit="seconds per all-reduce"),
    "efa_messages_per_s_per_interface": Bound("float", 0.0, 1e9, low_open=True, unit="RDMA writes per second"),
    "transfer_fixed_s": Bound("float", 0.0, 10.0, unit="seconds per disaggregated request"),
    "join_s_per_block": Bound("float", 0.0, 0.1, unit="decoder seconds per KV block received"),
    "colocated_memory_utilization": _SHARE,
    "dpd_memory_utilization": _SHARE,
    "non_kv_overhead_bytes": Bound("float", 0.0, 1e12, unit="bytes per GPU"),
    "prefill_target_utilization": _SHARE,
    "slo_attainment_target": _SHARE,
}
# Settings with a flag of their own: the flag is the one place to set them. How the connector moves the KV (layer-wise
# or not, inside the prefiller's step or not, through a PD buffer or not) is read from the connectors' code
# (calibration.py), not measured: --kv-connector chooses it.
FLAGGED = {"max_num_seqs": "--max-num-seqs", "chunk_tokens": "--max-num-batched-tokens",
           "connector_block_tokens": "--block-size", "transfer_layerwise": "--kv-connector",
           "transfer_holds_prefiller": "--kv-connector", "pd_buffer_copies": "--kv-connector"}
MAX_SOURCE = 500
USER_BASIS = "your measurement"  # how the plan's JSON marks a replaced constant's basis


@dataclass(frozen=True)
class Override:
    """One replaced constant: its name, the measured value and where it was measured."""

    name: str
    value: float
    source: str


@dataclass(frozen=True)
class UserCalibration:
    """The constants a file replaces, in file order, and the file they came from."""

    file: str
    overrides: tuple[Override, ...]

    def apply(self, calibration: Any) -> Any:
        """``calibration`` with these constants replaced, each noted with its source."""
        notes = {**calibration.notes, **{o.name: f"{USER_BASIS} ({self.file}): {o.source}" for o in self.overrides}}
        return calibration.with_overrides(**{o.name: o.value for o in self.overrides},
                                          notes=MappingProxyType(notes))


def _constant(name: Any, entry: Any) -> tuple[list[Issue], Override | None]:
    path = f"calibration.{name}"
    if not isinstance(name, str) or name not in OVERRIDABLE:
        if isinstance(name, str) and name in FLAGGED:
            return [Issue(path, entry, f"is set with a flag of hpdpd plan: pass {FLAGGED[name]} instead")], None
        close = difflib.get_close_matches(str(name), OVERRIDABLE, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return [Issue(path, entry, f"is not a planner constant; {hint}one of: {', '.join(OVERRIDABLE)}")], None
    if not isinstance(entry, dict):
        return [Issue(path, entry, "must be a mapping with 'value' and 'source'")], None
    problems = [Issue(f"{path}.{key}", entry[key], "is not allowed; only 'value' and 'source'")
                for key in entry if key not in ("value", "source")]
    bound = OVERRIDABLE[name]
    value = entry.get("value", MISSING)
    if value is MISSING:
        problems.append(Issue(f"{path}.value", MISSING, f"is required; it {bound.allowed()}"))
    elif not bound.check(value):
        problems.append(Issue(f"{path}.value", value, bound.allowed()))
    source = entry.get("source", MISSING)
    if not isinstance(source, str) or not source.strip():
        problems.append(Issue(f"{path}.source", source, "is required: where and how the value was measured "
                                                        "(cluster, metric or log line, load, date)"))
    elif len(source) > MAX_SOURCE:
        problems.append(Issue(f"{path}.source", source, f"must be at most {MAX_SOURCE} characters"))
    if problems:
        return problems, None
    assert isinstance(source, str)
    return [], Override(name=name, value=value, source=" ".join(source.split()))


def parse_calibration(data: Any, *, source: str) -> UserCalibration:
    """Check already-parsed file contents; one :class:`ConfigError` listing every problem."""
    if not isinstance(data, dict):
        raise ConfigError.single(source, "<root>", data, "must be a mapping with 'calibration', the constants to "
                                 "replace")
    problems = [Issue(str(key), data[key], "is not allowed; the file has one key, 'calibration'")
                for key in data if key != "calibration"]
    constants = data.get("calibration", MISSING)
    if constants is MISSING or not isinstance(constants, dict) or not constants:
        problems.append(Issue("calibration", constants, "must be a non-empty mapping of planner constants to "
                                                        "{value, source}"))
        raise ConfigError(source, problems)
    overrides = []
    for name, entry in constants.items():
        found, override = _constant(name, entry)
        problems += found
        if override is not None:
            overrides.append(override)
    if problems:
        raise ConfigError(source, problems)
    return UserCalibration(file=source, overrides=tuple(overrides))


def load_calibration(path: Path) -> UserCalibration:
    """Read and check a calibration file with the configuration's bounded YAML reader."""
    from hyperpod_dpd.config.files import display_path
    from hyperpod_dpd.config.loader import read_yaml

    return parse_calibration(read_yaml(path), source=display_path(path))


def calibration_dict(calibration: Any) -> dict[str, Any]:
    """Every constant the plan used with its basis (published source, documented default or your measurement), and
    the names your calibration file replaced."""
    from dataclasses import fields

    from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION

    notes = calibration.notes
    constants = {}
    for f in fields(calibration):
        if f.name == "notes":
            continue
        value, basis = getattr(calibration, f.name), notes.get(f.name, "")
        default = getattr(DEFAULT_CALIBRATION, f.name)
        if value != default and not basis.startswith(USER_BASIS):  # an engine flag (--kv-connector, --block-size ...)
            basis = f"set by this plan's flags (published default {default!r}: {basis})"
        constants[f.name] = {"value": value, "basis": basis}
    measured = [name for name, entry in constants.items() if entry["basis"].startswith(USER_BASIS)]
    return {"constants": constants, "measured_overrides": measured}
