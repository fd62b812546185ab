"""Warnings a user can act on, as ``make synth`` shows them: each configuration warning printed once, on one line with
the file and the field path, by ``--check`` (the first step); the app run by the CDK CLI prints none of them again but
puts each on the construct it concerns as an acknowledgeable annotation in ``cdk.out``; and the CLI line of the
Makefile ends without the CLI's "Supply a stack id" hint, with every stage's assembly written.

Both runs are subprocesses (as make runs them) over ``tests/fixtures/warnings/`` (one environment, four warnings):
the module synthesizes in-process nothing. The consumer's path (``HyperPodDpdPlatform``) and acknowledging are
tests/infra/test_config_warnings.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.infra.config_warnings import warning_id
from tests.paths import ROOT

WARNINGS_DIR = ROOT / "tests" / "fixtures" / "warnings"
NODE_PATH = os.pathsep.join([str(ROOT / "node_modules" / "node" / "bin"), str(ROOT / "node_modules" / ".bin"),
                             os.environ.get("PATH", "")])
CLI_HINTS = ("Supply a stack id", "Successfully synthesized to")


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPDPD_", "CDK_"))}
    return {**env, "HPDPD_CONFIG_DIR": str(WARNINGS_DIR), "PATH": NODE_PATH, "CDK_DISABLE_CLI_TELEMETRY": "true",
            "JSII_RUNTIME_PACKAGE_CACHE_ROOT": str(ROOT / ".cache" / "jsii")}


@pytest.fixture(scope="module")
def expected() -> list[str]:
    """The fixture's warnings as one line each: ``warning: <file>: <field path>: <value>: <what to do>``."""
    config = load_environment("dev", WARNINGS_DIR)
    lines = [f"warning: {w.render(config.source)}" for w in environment_warnings(config)]
    # the fixture holds an environment warning and an endpoint warning at least
    assert any(": eks.version: " in line for line in lines) and any(": endpoints[0].max_model_len: " in line
                                                                      for line in lines)
    return lines


def _makefile_cdk_line() -> str:
    """The recipe line of ``make synth`` that runs the CDK CLI, exactly as the Makefile writes it."""
    recipe = re.search(r"^synth:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    [line] = [step.strip() for step in recipe.group(1).splitlines() if "cdk synth" in step]
    assert "$" not in line.replace("$$", "")  # no make variable: bash runs the text with make's $$ as $
    return line.replace("$$", "$")


# -- --check: the first step of make synth ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checked() -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hyperpod_dpd.stacks.application", "--check"], cwd=ROOT,
                          env=_environment(), capture_output=True, text=True, timeout=600, check=False)


def test_check_prints_each_warning_once_on_one_line_with_file_and_field(
        checked: subprocess.CompletedProcess[str], expected: list[str]) -> None:
    # WHEN make synth's first step checks the configuration
    assert checked.returncode == 0, checked.stderr[-3000:]
    printed = [line for line in checked.stderr.splitlines() if line.startswith("warning:")]
    # THEN each warning is one line, exactly once, naming the file and the field path
    assert printed == expected
    assert all(WARNINGS_DIR.name in line.split(": ", 2)[1] for line in printed)
    # AND no raw Python warning (a file:line: ConfigWarning of jsii's runtime) repeats one
    assert "ConfigWarning" not in checked.stderr and "UserWarning" not in checked.stderr
    assert checked.stdout.startswith("configuration ok: dev")


# -- the CLI line of make synth -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The Makefile's ``cdk synth`` line, run by bash in a directory of its own whose ``cdk.json`` is the project's
    with the app's paths made absolute (so its ``.cache/cdk.out.next`` is not the checkout's), under ``CI=true``."""
    work = tmp_path_factory.mktemp("make-synth")
    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    cdk_json["app"] = f"{ROOT / '.venv' / 'bin' / 'python'} {ROOT / 'app.py'}"
    (work / "cdk.json").write_text(json.dumps(cdk_json))
    # CI=true as on a CI service: the CLI then writes its info lines to stdout, not stderr; both must stay clean
    done = subprocess.run(["bash", "-c", _makefile_cdk_line()], cwd=work, env={**_environment(), "CI": "true"},
                          capture_output=True, text=True, timeout=900, check=False)
    return done, work / ".cache" / "cdk.out.next"


def test_the_cli_line_writes_every_stage_and_ends_without_the_stack_id_hint(
        cli_synth: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, outdir = cli_synth
    # THEN it succeeds, the assembly holds the stage's nested assembly with its three stacks
    assert done.returncode == 0, done.stderr[-3000:]
    stage = json.loads((outdir / "assembly-dev" / "manifest.json").read_text())
    stacks = [a for a in stage["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    assert sorted(a["displayName"] for a in stacks) == ["dev/Endpoints", "dev/Network", "dev/Platform"]
    # AND the CLI's multi-stack hint is gone, while what --check printed is not printed again
    assert not any(hint in done.stderr or hint in done.stdout for hint in CLI_HINTS), (done.stdout + done.stderr)[-2000:]
    assert done.stderr.strip() == "" and done.stdout == "", done.stderr[-2000:]  # nothing at all, here
    assert "warning:" not in done.stderr and "ConfigWarning" not in done.stderr


def test_the_cli_line_keeps_a_failing_synthesis_failing(tmp_path: Path) -> None:
    # GIVEN an app that exits 1 WHEN the same line runs it THEN the exit status survives the filter (pipefail)
    (tmp_path / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} -c 'raise SystemExit(1)'"}))
    done = subprocess.run(["bash", "-c", _makefile_cdk_line()], cwd=tmp_path, env=_environment(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0, done.stderr


def _annotations(outdir: Path) -> dict[str, list[str]]:
    """Warning annotations of the stage's stacks, by construct path."""
    found: dict[str, list[str]] = {}
    for metadata in (outdir / "assembly-dev").glob("*.metadata.json"):
        for path, entries in json.loads(metadata.read_text()).items():
            for entry in entries:
                if entry["type"] == "aws:cdk:warning" and "[ack: hpdpd:config:" in entry["data"]:
                    found.setdefault(path, []).append(entry["data"])
    return found


def test_each_warning_is_an_annotation_on_the_construct_it_concerns(
        cli_synth: tuple[subprocess.CompletedProcess[str], Path], expected: list[str]) -> None:
    done, outdir = cli_synth
    assert done.returncode == 0, done.stderr[-3000:]
    found = _annotations(outdir)
    config = load_environment("dev", WARNINGS_DIR)
    # THEN the environment's warnings are on the platform stack, the endpoint's on its manifest in the endpoints stack
    endpoint = config.endpoints[0].name
    on_platform = sorted(found.get("/dev/Platform", []))
    on_endpoint = found.get(f"/dev/Endpoints/Endpoint-{endpoint}", [])
    assert set(found) == {"/dev/Platform", f"/dev/Endpoints/Endpoint-{endpoint}"}, found
    # AND each is the very line --check printed (the file named from the CLI's directory), once, tagged with the id
    # that acknowledges it
    issues = {w.render(): w for w in environment_warnings(config)}
    seen = []
    for data in (*on_platform, *on_endpoint):
        text, _, ack = data.rpartition(" [ack: ")
        source, _, rendered = text.partition(f"{WARNINGS_DIR.relative_to(ROOT) / 'dev.yaml'}: ")
        assert source in ("", f"{ROOT}/"), data
        assert rendered in issues and ack == f"{warning_id(issues[rendered].path)}]", data
        seen.append(rendered)
    assert sorted(seen) == sorted(issues) and len(issues) == len(expected)
    assert [d for d in on_endpoint if ": endpoints[0].max_model_len: 2048: " in d]
