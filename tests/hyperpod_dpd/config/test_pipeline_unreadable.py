"""A ``pipeline.yaml`` that is there but cannot be read as the pipeline's settings is an error naming the file, never
"no pipeline" (which would silently drop the pipeline stack): a directory, a link to nothing, a file the user may not
read, bytes that are not UTF-8, and YAML that is not a mapping."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hyperpod_dpd.config.pipeline import PIPELINE_FILE, PipelineConfig, read_pipeline
from hyperpod_dpd.errors import ConfigError
from tests.paths import FIXTURE_CONFIG_DIR, ROOT

# Root reads any file (CAP_DAC_OVERRIDE), so as root the permission case drops those capabilities for its reader.
SETPRIV = shutil.which("setpriv")
AS_ROOT = os.geteuid() == 0
READER = [str(SETPRIV), "--inh-caps=-dac_override,-dac_read_search",
          "--bounding-set=-dac_override,-dac_read_search"] if AS_ROOT and SETPRIV else []


def _directory(path: Path) -> None:
    path.mkdir()


def _dangling_link(path: Path) -> None:
    path.symlink_to(path.parent / "gone.yaml")


def _latin1(path: Path) -> None:
    path.write_bytes("account: \"444444444444\"\nname: pipeline-caf\xe9\n".encode("latin-1"))


# case: (make pipeline.yaml, where the line points, words of the rule)
UNREADABLE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "a directory": (_directory, "<file>", "is a directory"),
    "a link to nothing": (_dangling_link, "<file>", "which does not exist"),
    "not UTF-8": (_latin1, "line 2", "is not UTF-8"),
    "a list": (lambda p: p.write_text("- dev\n- prod\n"), "<root>", "must be a mapping of pipeline settings"),
    "empty": (lambda p: p.write_text(""), "<root>", "must be a mapping of pipeline settings"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_unreadable_pipeline_file_is_one_line_naming_it(case: str, tmp_path: Path) -> None:
    # GIVEN a configuration directory whose pipeline.yaml cannot be read as the pipeline's settings
    make, where, rule = UNREADABLE[case]
    make(tmp_path / PIPELINE_FILE)
    # WHEN it is read
    with pytest.raises(ConfigError) as raised:
        read_pipeline(tmp_path)
    # THEN one line names the file, where in it, and what is wrong
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert f"{PIPELINE_FILE}: {where}: " in message and rule in message, message


def test_the_mapping_error_lists_the_settings_a_pipeline_takes(tmp_path: Path) -> None:
    (tmp_path / PIPELINE_FILE).write_text("just a string\n")
    with pytest.raises(ConfigError) as raised:
        read_pipeline(tmp_path)
    assert str(raised.value).endswith(f"({', '.join(PipelineConfig.model_fields)})")


@pytest.mark.skipif(AS_ROOT and SETPRIV is None, reason="as root, needs util-linux setpriv to drop file overrides")
def test_a_pipeline_file_without_read_permission_is_one_line(tmp_path: Path) -> None:
    # GIVEN the fixture pipeline.yaml with no read permission for anyone
    target = tmp_path / PIPELINE_FILE
    shutil.copy(FIXTURE_CONFIG_DIR / PIPELINE_FILE, target)
    target.chmod(0o000)
    # WHEN a reader without the capability to override file permissions reads it as the app does
    script = ("import sys\nfrom pathlib import Path\nfrom hyperpod_dpd.config.pipeline import read_pipeline\n"
              "from hyperpod_dpd.errors import ConfigError\n"
              "try:\n    read_pipeline(Path(sys.argv[1]))\nexcept ConfigError as error:\n"
              "    print(error, file=sys.stderr)\n    sys.exit(2)\n")
    result = subprocess.run([*READER, sys.executable, "-c", script, str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    # THEN it ends with one line naming the file and the permission it lacks
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert f"{PIPELINE_FILE}: <file>: " in line and "permission denied" in line, line
