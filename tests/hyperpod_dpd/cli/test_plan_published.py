"""Every published setup of the calibration table is an ``hpdpd plan`` run, and the JSON names its prediction.

``bench/commands.py`` holds the flags for each row; these tests run every command through the CLI and hold the JSON
value to the table's own prediction (to the JSON's rounding), so no row needs the planner's internal Python.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main
from hyperpod_dpd.planner.measurements import rows

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import commands as published_commands  # noqa: E402  (the commands `bench/calibration.py --commands` prints)

TABLE = {r.measurement.key: r for r in rows()}
COMMANDS = published_commands.commands(list(TABLE))


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each --calibration file the commands name, written out: placeholder -> path."""
    folder = tmp_path_factory.mktemp("published")
    out = {}
    for name, constants in published_commands.PROFILES.items():
        (folder / name).write_text(published_commands.calibration_yaml(constants))
        out[name] = str(folder / name)
    return out


@cache
def _run(argv: tuple[str, ...]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--output", "json"])
    assert code == 0, f"hpdpd {' '.join(argv)}: {err.getvalue()}"
    return json.loads(out.getvalue())


def test_every_row_of_the_table_has_a_command() -> None:
    # GIVEN every measurement the calibration table holds
    # THEN each one is expressed by hpdpd plan flags, none left to internal Python
    assert sorted(set(TABLE) - set(COMMANDS)) == []
    assert len(COMMANDS) == len(TABLE) >= 100


@pytest.mark.parametrize("key", sorted(COMMANDS))
def test_the_command_reproduces_the_tables_prediction(key: str, profiles: dict[str, str]) -> None:
    # GIVEN the row's published setup as hpdpd plan flags (with the --calibration file of its engine or fabric)
    command = COMMANDS[key]
    argv = tuple(profiles.get(a, a) for a in command.argv)
    assert (command.profile in command.argv) if command.profile else "--calibration" not in command.argv
    # WHEN the CLI plans it as JSON
    data = _run(argv)
    # THEN the value the command names is the table's prediction, to the JSON's rounding
    row = TABLE[key]
    tolerance = 0.15 if row.measurement.unit == "%" else max(0.11, 2e-3 * abs(row.predicted))
    assert command.value(data) == pytest.approx(row.predicted, abs=tolerance), command.reads


def test_a_row_that_is_changed_is_seen_by_its_command() -> None:
    # GIVEN Dynamo's ISL 1000 sweep point, whose every prompt the guide disaggregates
    argv = COMMANDS["dynamo-gain-1000"].argv
    # WHEN the router's threshold is left to the planner instead (1,000-token prompts stay under 4,096)
    chosen = _run(tuple(a for i, a in enumerate(argv) if "--routing-threshold" not in argv[max(0, i - 1):i + 1]))
    given = _run(argv)
    # THEN the given threshold is the one planned, and the choice differs: the command is what expresses the setup
    assert given["recommendation"]["routing_threshold"] == 0
    assert chosen["recommendation"]["routing_threshold"] == 4096
    assert COMMANDS["dynamo-gain-1000"].value(given) != pytest.approx(COMMANDS["dynamo-gain-1000"].value(chosen))
