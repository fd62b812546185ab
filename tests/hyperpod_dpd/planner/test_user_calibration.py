"""A calibration file of the user's own measurements: what it may replace, how it is checked, what the plan says."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.planner.calibration import DEFAULT_CALIBRATION, Calibration
from hyperpod_dpd.planner.user_calibration import (
    FLAGGED,
    OVERRIDABLE,
    USER_BASIS,
    calibration_dict,
    load_calibration,
    parse_calibration,
)

MEASURED = {"calibration": {
    "transfer_fixed_s": {"value": 0.012, "source": "prod-us-east-1 router log, P50 at 16 users, 2026-11-28"},
    "hbm_efficiency": {"value": 0.7, "source": "prod-us-east-1 decoder ITL P50 at 1 user"},
}}


def test_every_constant_is_either_replaceable_or_set_by_a_flag() -> None:
    # GIVEN the planner's constants
    names = {f.name for f in fields(Calibration)} - {"notes"}
    # THEN each is classified exactly once: a new constant must say whether a measurement may replace it
    assert set(OVERRIDABLE) | set(FLAGGED) == names
    assert not set(OVERRIDABLE) & set(FLAGGED)


@pytest.mark.parametrize("name", sorted(OVERRIDABLE))
def test_the_published_value_lies_within_its_bounds(name: str) -> None:
    # GIVEN a replaceable constant's published value THEN its own file would accept it (the bounds are physical)
    assert OVERRIDABLE[name].check(getattr(DEFAULT_CALIBRATION, name)), OVERRIDABLE[name].allowed()


def test_a_file_replaces_the_named_constants_and_says_where_they_were_measured() -> None:
    # WHEN the measured file is applied to the published calibration
    user = parse_calibration(MEASURED, source="mine/cal.yaml")
    calibration = user.apply(DEFAULT_CALIBRATION)
    # THEN the two constants take the measured values, each noted with the file and the source given
    assert (calibration.transfer_fixed_s, calibration.hbm_efficiency) == (0.012, 0.7)
    assert calibration.notes["transfer_fixed_s"] == (
        f"{USER_BASIS} (mine/cal.yaml): prod-us-east-1 router log, P50 at 16 users, 2026-11-28")
    # AND every other constant, and the published calibration itself, are unchanged
    for f in fields(Calibration):
        if f.name not in ("transfer_fixed_s", "hbm_efficiency", "notes"):
            assert getattr(calibration, f.name) == getattr(DEFAULT_CALIBRATION, f.name)
    assert DEFAULT_CALIBRATION.transfer_fixed_s == 0.00475
    assert DEFAULT_CALIBRATION.notes["transfer_fixed_s"].startswith("calibrated: Dynamo")
    # AND the plan's calibration block lists the replaced constants
    block = calibration_dict(calibration)
    assert sorted(block["measured_overrides"]) == ["hbm_efficiency", "transfer_fixed_s"]
    assert block["constants"]["hbm_efficiency"] == {"value": 0.7, "basis": calibration.notes["hbm_efficiency"]}


def test_the_published_calibration_names_the_basis_of_every_constant() -> None:
    block = calibration_dict(DEFAULT_CALIBRATION)
    assert block["measured_overrides"] == []
    assert set(block["constants"]) == {f.name for f in fields(Calibration)} - {"notes"}
    assert all(entry["basis"] for entry in block["constants"].values())


@pytest.mark.parametrize(("data", "line"), [
    ({"calibration": {"hbm_efficiency": {"value": 1.4, "source": "x"}}},
     "calibration.hbm_efficiency.value: 1.4: must be a number above 0 and at most 1"),
    ({"calibration": {"hbm_efficiency": {"value": 0, "source": "x"}}},
     "calibration.hbm_efficiency.value: 0: must be a number above 0"),
    ({"calibration": {"transfer_fixed_s": {"value": True, "source": "x"}}},
     "calibration.transfer_fixed_s.value: true: must be a number at least 0 and at most 10"),
    ({"calibration": {"transfer_fixed_s": {"value": "12ms", "source": "x"}}},
     "calibration.transfer_fixed_s.value: '12ms': must be a number"),
    ({"calibration": {"transfer_fixed_s": {"value": float("nan"), "source": "x"}}},
     "calibration.transfer_fixed_s.value: nan: must be a number"),
    ({"calibration": {"transfer_fixed_s": {"value": 0.01}}},
     "calibration.transfer_fixed_s.source: missing: is required: where and how the value was measured"),
    ({"calibration": {"transfer_fixed_s": {"value": 0.01, "source": "  "}}},
     "calibration.transfer_fixed_s.source: '  ': is required"),
    ({"calibration": {"transfer_fixed_s": {"source": "x"}}},
     "calibration.transfer_fixed_s.value: missing: is required; it must be a number at least 0"),
    ({"calibration": {"transfer_fixed_s": {"value": 0.01, "source": "x", "unit": "s"}}},
     "calibration.transfer_fixed_s.unit: 's': is not allowed; only 'value' and 'source'"),
    ({"calibration": {"transfer_fixed_s": 0.01}},
     "calibration.transfer_fixed_s: 0.01: must be a mapping with 'value' and 'source'"),
    ({"calibration": {"max_num_seqs": {"value": 64, "source": "x"}}},
     "calibration.max_num_seqs: {'value': 64, 'source': 'x'}: is set with a flag of hpdpd plan: pass --max-num-seqs"),
    ({"calibration": {"transfer_holds_prefiller": {"value": False, "source": "x"}}},
     "is set with a flag of hpdpd plan: pass --kv-connector instead"),
    ({"calibration": {"prefil_efficiency": {"value": 0.5, "source": "x"}}},
     "calibration.prefil_efficiency: {'value': 0.5, 'source': 'x'}: is not a planner constant; did you mean "
     "prefill_efficiency?"),
    ({"calibration": {}}, "calibration: {}: must be a non-empty mapping of planner constants"),
    ({"constants": {}}, "constants: {}: is not allowed; the file has one key, 'calibration'"),
    ([1, 2], "<root>: [1, 2]: must be a mapping with 'calibration'"),
])
def test_a_wrong_file_is_refused_in_one_line_naming_the_field(data: object, line: str) -> None:
    # WHEN a file with one mistake is checked
    with pytest.raises(ConfigError) as caught:
        parse_calibration(data, source="mine/cal.yaml")
    # THEN the error names the file, the field path, the value and what is allowed
    assert any(rendered.startswith("mine/cal.yaml: ") and line in rendered
               for rendered in str(caught.value).splitlines()), str(caught.value)


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    data = {"calibration": {"hbm_efficiency": {"value": 2, "source": "x"}, "overlap_loss": {"value": -1}}}
    with pytest.raises(ConfigError) as caught:
        parse_calibration(data, source="cal.yaml")
    assert [i.path for i in caught.value.issues] == ["calibration.hbm_efficiency.value", "calibration.overlap_loss.value",
                                                     "calibration.overlap_loss.source"]


def test_a_file_is_read_with_the_configurations_yaml_reader(tmp_path: Path) -> None:
    # GIVEN a YAML file with an ambiguous YAML 1.1 number (1_000 is 1000 to PyYAML, text to YAML 1.2)
    path = tmp_path / "cal.yaml"
    path.write_text("calibration:\n  efa_messages_per_s_per_interface: {value: 1_000, source: bench}\n")
    # THEN it is refused like a configuration file would be, naming the line
    with pytest.raises(ConfigError, match="1_000"):
        load_calibration(path)
    # AND a well-formed file loads
    path.write_text("calibration:\n  step_overhead_s: {value: 0.0012, source: 'vLLM step log, 2026-11-28'}\n")
    assert load_calibration(path).apply(DEFAULT_CALIBRATION).step_overhead_s == 0.0012
