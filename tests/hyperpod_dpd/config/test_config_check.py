"""``python -m hyperpod_dpd.stacks.application --check`` (the first step of ``make synth``), run as make runs it: a
hostile or empty configuration ends in one line within the bounds, and "configuration ok" means the synthesis will
not reject the configuration, because the check runs that synthesis (into a directory it removes). The one case that
needs no bound (what the synthesis rejects, the check rejects) calls the same ``check()`` in the worker's process."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hyperpod_dpd.config.bounded import Outcome, run_bounded
from tests.hyperpod_dpd.config.test_yaml_safe import HOSTILE, MERGED_DEV
from tests.paths import FIXTURE_CONFIG_DIR, ROOT

DEV = (FIXTURE_CONFIG_DIR / "dev.yaml").read_text()
REFUSAL_SECONDS = 10  # a refused file never reaches the CDK: the interpreter, the CDK import and the loader
REFUSAL_RSS_MIB = 512  # the largest process of the check (its Node included); the 9^8 bomb took about 775 MB alone
# An accepted configuration is synthesized: about 6 s of wall clock and 6 s of CPU for one environment on a quiet
# two-core machine, but 19 s and 10.4 s with a load average of 10 on the same cores. These bounds catch a runaway
# (an unbounded expansion costs minutes), not a busy machine.
SYNTH_CPU_SECONDS = 30
SYNTH_WALL_SECONDS = 90
SYNTH_RSS_MIB = 1536


def _check(config_dir: Path, *, wall_seconds: float) -> Outcome:
    """The check exactly as ``make synth`` runs it: from the project's directory, with ``$HPDPD_CONFIG_DIR``."""
    node_bin = ROOT / "node_modules" / "node" / "bin"  # make puts the project's Node first on PATH
    return run_bounded([sys.executable, "-m", "hyperpod_dpd.stacks.application", "--check"], cwd=ROOT,
                       env={"HPDPD_CONFIG_DIR": str(config_dir),
                            "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"},
                       wall_seconds=wall_seconds)


def _write(text: str | bytes) -> Callable[[Path], None]:
    def setup(directory: Path) -> None:
        directory.mkdir()
        target = directory / "dev.yaml"
        target.write_bytes(text) if isinstance(text, bytes) else target.write_text(text, encoding="utf-8")
    return setup


def _loop(directory: Path) -> None:
    directory.mkdir()
    os.symlink("dev.yaml", directory / "dev.yaml")


# case: (what the configuration directory holds, the words of the one line)
REFUSED: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "the alias bomb": (_write(HOSTILE["alias bomb, 9^9 values behind one alias"][0]),
                       ("dev.yaml: line 5: ", "expands to more than 10,000 values through its aliases")),
    "the recursive alias": (_write("account: &a [*a]\n"), ("the alias *a refers to the value that contains it",)),
    "500 levels of nesting": (_write("account: " + "[" * 500 + "]" * 500 + "\n"), ("nested more than 32 levels deep",)),
    "a file that is not UTF-8": (_write(DEV.encode().replace(b"dev", b"d\xe9v", 1)),
                                 ("dev.yaml: line ", "is not UTF-8 (invalid continuation byte)")),
    "a symbolic link loop": (_loop, ("dev.yaml: <file>: 'dev.yaml': is a symbolic link loop",)),
    "a sexagesimal count": (_write(DEV.replace("count: 2", "count: 1:30")),
                            ("dev.yaml: hyperpod.instance_groups[0].count: 1:30: is ambiguous: YAML 1.1 reads the "
                             "unquoted 1:30 as the base-60 (sexagesimal) number 90", "quote it ('1:30')")),
    "an empty directory": (lambda d: d.mkdir(), ("<directory>: 'config': holds no environment file",)),
    "a mistyped directory": (lambda d: None, ("<directory>: 'config': no such directory; pass --config-dir",)),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_check_refuses_a_hostile_or_empty_configuration_in_one_line(case: str, tmp_path: Path) -> None:
    setup, words = REFUSED[case]
    # GIVEN a configuration directory (or its absence) that must not pass
    config_dir = tmp_path / "config"
    setup(config_dir)
    # WHEN make synth's first step checks it
    outcome = _check(config_dir, wall_seconds=REFUSAL_SECONDS)
    # THEN it exits 2 with one line naming the file and the problem, quickly, in bounded memory, and writes nothing
    assert outcome.returncode == 2 and len(outcome.lines) == 1, outcome
    assert outcome.lines[0].startswith(f"error: {config_dir}") and all(w in outcome.lines[0] for w in words), outcome
    assert outcome.seconds < REFUSAL_SECONDS and outcome.peak_rss_mib < REFUSAL_RSS_MIB, outcome


def test_the_check_accepts_a_merge_key_and_says_so_in_one_line(tmp_path: Path) -> None:
    # GIVEN dev.yaml with its decode group written as a merge of the prefill group (`<<: *gpu`)
    assert "<<: *gpu" in MERGED_DEV and "- &gpu" in MERGED_DEV
    config_dir = tmp_path / "config"
    _write(MERGED_DEV)(config_dir)
    # WHEN it is checked
    outcome = _check(config_dir, wall_seconds=SYNTH_WALL_SECONDS)
    # THEN the check synthesized it and says it is ok, in one line, within the bounds
    assert outcome.returncode == 0, outcome
    # (besides the configuration's own warnings, one line each: tests/stacks/test_warnings.py)
    assert [line for line in outcome.lines if not line.startswith("warning: ")] == [
        "configuration ok: dev (synthesized and validated, nothing written)"], outcome
    assert outcome.cpu_seconds < SYNTH_CPU_SECONDS and outcome.peak_rss_mib < SYNTH_RSS_MIB, outcome


def test_what_the_synthesis_rejects_the_check_rejects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """In-process (the worker's CDK runtime): what the check prints and returns is what ``--check`` does; the process
    as make runs it, with its bounds, is the merge-key test above and the refusals."""
    from hyperpod_dpd.stacks.application import check

    # GIVEN a configuration every model accepts but the guardrails refuse at synthesis: node recovery off (the
    # check used to load the files only, and said "configuration ok")
    config_dir = tmp_path / "config"
    _write(DEV.replace("node_recovery: Automatic", 'node_recovery: "None"'))(config_dir)
    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(config_dir))
    monkeypatch.chdir(ROOT)
    # WHEN it is checked
    code = check(ROOT)
    captured = capsys.readouterr()
    # THEN it fails as the synthesis does (exit 1), one line for the finding: plugin, rule, construct, reason
    assert code == 1, captured
    assert captured.err.splitlines() == ["error: HyperPodDpd HPDPD-HP1 at dev/Platform/HyperPod/Resource: HyperPod "
                                         "node recovery must be Automatic. is 'None'"], captured
    assert captured.out == ""
    # AND nothing of the synthesis is left behind
    assert not (tmp_path / "cdk.out").exists() and not (ROOT / "config" / "cdk.out").exists()
