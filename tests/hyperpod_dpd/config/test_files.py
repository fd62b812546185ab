"""Configuration files and directories: whatever is at the path instead of a readable UTF-8 file, and a directory with
no environment in it, end in one line naming the path and what is there, never in a traceback or a hang."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hyperpod_dpd.config import load_all
from hyperpod_dpd.config.files import decode
from hyperpod_dpd.config.yaml_safe import MAX_FILE_BYTES
from hyperpod_dpd.errors import ConfigError
from tests.hyperpod_dpd.config.bounded import load_bounded
from tests.paths import FIXTURE_CONFIG_DIR

DEV = (FIXTURE_CONFIG_DIR / "dev.yaml").read_bytes()
LATIN_OFFSET = DEV.index(b"environment: dev") + len("environment: d")  # where the Latin-1 e-acute goes
LATIN_LINE = DEV[:LATIN_OFFSET].count(b"\n") + 1

Setup = Callable[[Path], None]


def _link(target: str, name: str = "dev.yaml") -> Setup:
    return lambda d: os.symlink(target, d / name)


def _fifo(d: Path) -> None:
    os.mkfifo(d / "dev.yaml")  # opening it for reading would wait for a writer forever


# case: (what is put in the configuration directory, the words of the one line)
ENTRIES: dict[str, tuple[Setup, tuple[str, ...]]] = {
    "a symbolic link loop": (_link("dev.yaml"), ("dev.yaml: <file>: ", "is a symbolic link loop")),
    "two links in a loop": (lambda d: (_link("b.yaml")(d), _link("dev.yaml", "b.yaml")(d)) and None,
                            ("is a symbolic link loop",)),
    "a dangling link": (_link("gone.yaml"), ("is a symbolic link to 'gone.yaml', which does not exist",)),
    "a directory named like a file": (lambda d: (d / "dev.yaml").mkdir(), ("is a directory, not a configuration file",)),
    "a FIFO": (_fifo, ("is not a regular file (a FIFO, socket or device)",)),
    "a link to a device": (_link("/dev/zero"), ("is not a regular file",)),
    "a file over the size limit": (
        lambda d: (d / "dev.yaml").write_bytes(DEV + b"#" * MAX_FILE_BYTES),
        (f"bytes; a configuration file holds at most {MAX_FILE_BYTES:,}",)),
    "Latin-1 text": (
        lambda d: (d / "dev.yaml").write_bytes(DEV.replace(b"environment: dev", "environment: d\xe9v".encode("latin-1"))),
        (f"dev.yaml: line {LATIN_LINE}: byte {LATIN_OFFSET} (0xe9): is not UTF-8 (invalid continuation byte); save "
         "the file as UTF-8",)),
    "UTF-16 text": (
        lambda d: (d / "dev.yaml").write_bytes(DEV.decode().encode("utf-16")),
        ("dev.yaml: line 1: byte 0 (0xff 0xfe): the file is UTF-16 (it starts with a UTF-16 byte-order mark)",)),
    "an environment name the stacks cannot carry": (
        lambda d: (d / "my_env.yaml").write_bytes(DEV),
        ("my_env.yaml: <file>: 'my_env': is not an environment name",)),
}


@pytest.mark.parametrize("case", sorted(ENTRIES))
def test_an_entry_that_is_not_a_readable_file_is_one_line(case: str, tmp_path: Path) -> None:
    setup, words = ENTRIES[case]
    # GIVEN a configuration directory whose environment entry is not a readable UTF-8 file
    setup(tmp_path)
    # WHEN the toolkit loads it (in its own process, bounded)
    outcome = load_bounded(tmp_path, wall_seconds=10)
    # THEN one line names the entry and what is there, and nothing hangs
    assert outcome.returncode == 2 and len(outcome.lines) == 1, outcome
    assert outcome.lines[0].startswith(f"error: {tmp_path}/"), outcome.lines
    assert all(w in outcome.lines[0] for w in words), outcome.lines[0]


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    # GIVEN an environment file its reader may not read
    (tmp_path / "dev.yaml").write_bytes(DEV)
    (tmp_path / "dev.yaml").chmod(0)
    # WHEN it is loaded, with file modes applying (a root test run drops root's override of them)
    outcome = load_bounded(tmp_path, honour_file_modes=True)
    # THEN one line says so
    assert outcome.returncode == 2, outcome
    assert outcome.lines == [f"error: {tmp_path}/dev.yaml: <file>: 'dev.yaml': cannot be read: permission denied"]


# case: (what the directory holds, or None for no directory at all; the words of the one line)
DIRECTORIES: dict[str, tuple[Setup | None, str]] = {
    "no directory": (None, "no such directory; pass --config-dir or set HPDPD_CONFIG_DIR"),
    "an empty directory": (lambda d: d.mkdir(), "holds no environment file (<name>.yaml; found none)"),
    "only the pipeline's file": (lambda d: (d.mkdir(), (d / "pipeline.yaml").write_text("{}")) and None,
                                 "holds no environment file (<name>.yaml; found only pipeline.yaml, which is not an "
                                 "environment)"),
    "environments spelled .yml": (lambda d: (d.mkdir(), (d / "dev.yml").write_bytes(DEV)) and None,
                                  "holds no environment file (<name>.yaml; found none); rename dev.yml to .yaml"),
    "a file where the directory should be": (lambda d: d.write_text("x"), "is not a directory"),
    "a directory link loop": (lambda d: os.symlink(d.name, d), "is a symbolic link loop"),
}


@pytest.mark.parametrize("case", sorted(DIRECTORIES))
def test_a_directory_without_environments_is_an_error_not_an_empty_selection(case: str, tmp_path: Path) -> None:
    setup, words = DIRECTORIES[case]
    # GIVEN a configuration directory that holds no environment (a mistyped --config-dir, for instance)
    directory = tmp_path / "config"
    if setup is not None:
        setup(directory)
    # WHEN every environment is loaded
    with pytest.raises(ConfigError) as raised:
        load_all(directory)
    # THEN one line names the directory and what is wrong, instead of "nothing to do"
    assert str(raised.value).startswith(f"{directory}: <directory>: 'config': {words}"), str(raised.value)
    assert len(str(raised.value).splitlines()) == 1


def test_a_named_environment_in_a_missing_directory_says_which_directory(tmp_path: Path) -> None:
    # WHEN dev is loaded from a directory that does not exist THEN the line says so, and how to point elsewhere
    with pytest.raises(ConfigError) as raised:
        load_all(tmp_path / "confg", ["dev"])
    assert str(raised.value) == (f"{tmp_path}/confg/dev.yaml: <file>: 'dev': no such environment file; available "
                                 f"environments: none ({tmp_path}/confg: no such directory; pass --config-dir or "
                                 "set HPDPD_CONFIG_DIR)")


@pytest.mark.parametrize(("data", "where"), [
    (b"a: 1\nb: \xff\n", "line 2: byte 8 (0xff): is not UTF-8 (invalid start byte)"),
    (b"a: \xe2\x82", "line 1: byte 3 (0xe2 0x82): is not UTF-8 (unexpected end of data)"),
    (b"a: \xe2\x82\n", "line 1: byte 3 (0xe2 0x82): is not UTF-8 (invalid continuation byte)"),
    (b"\xff\xfe\x00\x00a\x00\x00\x00", "line 1: byte 0 (0xff 0xfe 0x00 0x00): the file is UTF-32"),
])
def test_decoding_names_the_byte_offset_and_line(data: bytes, where: str) -> None:
    # WHEN bytes that are not UTF-8 are decoded THEN the one line names the offending byte's offset and line
    with pytest.raises(ConfigError) as raised:
        decode(data, "dev.yaml")
    assert str(raised.value).startswith(f"dev.yaml: {where}"), str(raised.value)


def test_a_utf8_byte_order_mark_is_accepted() -> None:
    # GIVEN a UTF-8 file saved with a byte-order mark (some Windows editors do) THEN it decodes, mark included (YAML
    # skips it at the start of the stream)
    assert decode(b"\xef\xbb\xbfa: 1\n", "dev.yaml") == "\ufeffa: 1\n"
