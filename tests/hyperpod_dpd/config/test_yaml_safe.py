"""The bounded YAML reader: hostile files end in one line, quickly and in little memory; the merge key works; YAML 1.1
numbers that YAML 1.2 reads as text are refused with the quoted form as the fix.

Hostile cases run the toolkit's own loading (``load_all``) in a separate process under a wall-clock bound and an
address-space limit (tests/hyperpod_dpd/config/bounded.py), so a regression fails the case instead of hanging the suite.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.base import YamlOctal
from hyperpod_dpd.config.yaml_safe import MAX_ALIASES, MAX_DEPTH, MAX_VALUES, load_yaml
from hyperpod_dpd.errors import ConfigError
from tests.hyperpod_dpd.config.bounded import load_bounded
from tests.paths import FIXTURE_CONFIG_DIR

WALL_SECONDS = 10
ADDRESS_SPACE_MIB = 512  # the 9^8 bomb took about 775 MB before the loader was bounded
DEV = (FIXTURE_CONFIG_DIR / "dev.yaml").read_text()


def _laughs(width: int, levels: int, *, mapping: bool = False) -> str:
    """The "billion laughs": each level lists the previous one ``width`` times; the account is the last level."""
    def level(i: int, items: list[str]) -> str:
        if mapping:
            return f"l{i}: &l{i} {{" + ", ".join(f"k{j}: {item}" for j, item in enumerate(items)) + "}"
        return f"l{i}: &l{i} [" + ", ".join(items) + "]"
    lines = [level(0, ['"lol"'] * width)] + [level(i, [f"*l{i - 1}"] * width) for i in range(1, levels)]
    return "\n".join(lines) + f"\naccount: *l{levels - 1}\n"


def _alias_chain(links: int) -> str:
    """Each anchor nests the previous one a level deeper: shallow as written, ``links`` levels deep as read."""
    lines = ["c0: &c0 [x]"] + [f"c{i}: &c{i} [*c{i - 1}]" for i in range(1, links)]
    return "\n".join(lines) + f"\naccount: *c{links - 1}\n"


def _block_nesting(levels: int) -> str:
    return "".join(f"{'  ' * i}k:\n" for i in range(levels)) + f"{'  ' * levels}leaf\n"


# case: (the file's text, the words the one line must hold)
HOSTILE: dict[str, tuple[str, tuple[str, ...]]] = {
    "alias bomb, 9^9 values behind one alias": (
        _laughs(9, 9), ("line 5: ", "expands to more than 10,000 values through its aliases")),
    "alias bomb of mappings": (_laughs(10, 8, mapping=True), ("expands to more than 10,000 values",)),
    "alias bomb of one long string": (
        's: &s "' + "x" * 100_000 + '"\naccount: [' + ", ".join(["*s"] * 40) + "]\n",
        ("line 2: ", "expands to more than 2,097,152 characters through its aliases")),
    "alias bomb through merge keys": (
        "a: &a {" + ", ".join(f"k{i}: v" for i in range(50)) + "}\n"
        + "b: &b {<<: *a, " + ", ".join(f"x{j}: *a" for j in range(5)) + "}\n"
        + "c: [" + ", ".join(["*b"] * 40) + "]\n",
        ("line 3: ", "expands to more than 10,000 values")),
    "recursive alias in a list": ("account: &a [*a]\n", ("line 1: ", "the alias *a refers to the value that contains it")),
    "recursive alias in a mapping": ("tags: &t {self: *t}\n", ("the alias *t refers to the value that contains it",)),
    "recursive merge": ("tags: &t {<<: *t}\n", ("the alias *t refers to the value that contains it",)),
    "500 levels of flow nesting": (
        "account: " + "[" * 500 + "]" * 500 + "\n", ("line 1: ", f"nested more than {MAX_DEPTH} levels deep")),
    "500 levels of block nesting": (_block_nesting(500), (f"nested more than {MAX_DEPTH} levels deep",)),
    "alias chain 40 levels deep as read": (_alias_chain(40), (f"nests more than {MAX_DEPTH} levels deep through its aliases",)),
    "too many aliases": (
        "a: &a 1\nl: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n", (f"more than {MAX_ALIASES} aliases in one file",)),
    "a list as a key": ("? [a, b]\n: 1\n", ("line 1: '? [a, b]'", "a key must be a single value such as a name, not a list")),
    "a mapping as a key": ("{a: 1}: 2\n", ("a key must be a single value such as a name, not a mapping",)),
    "an alias to a list as a key": ("l: &l [1]\n*l : 2\n", ("line 2: ", "not a list")),
    "a NUL character": ('account: "\x00"\n', ("line 1: character 10: ", "the character U+0000 is not allowed")),
    "a 5,000-digit number": ("count: " + "1" * 5000 + "\n", ("line 1: ", "cannot read this int value")),
    "an impossible date": ("version: 2001-13-45\n", ("cannot read this timestamp value: month must be in 1..12",)),
    "an int tag on text": ("count: !!int many\n", ("cannot read this int value",)),
    "a bool tag on text": ("flag: !!bool maybe\n", ("cannot read this bool value",)),
    "a Python object tag": ("account: !!python/object:os.system ls\n", ("could not determine a constructor",)),
    "two documents": ("account: a\n---\naccount: b\n", ("expected a single document in the stream, but found another",)),
    "a merge of a scalar": ("tags: {<<: x}\n", ("'<<' merges a mapping or a list of mappings", "not scalar")),
    "a merge key twice": ("a: &a {x: 1}\ntags: {<<: *a, <<: *a}\n", ("duplicate key '<<'",)),
    "a duplicate key next to a merge": ("a: &a {x: 1}\ntags: {<<: *a, y: 1, y: 2}\n", ("duplicate key 'y'",)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_file_ends_in_one_line_quickly_and_in_little_memory(case: str, tmp_path: Path) -> None:
    text, words = HOSTILE[case]
    # GIVEN an environment file that is well-formed enough to parse, but hostile
    (tmp_path / "dev.yaml").write_text(text, encoding="utf-8")
    # WHEN the toolkit loads the directory, in a process of its own with a wall-clock bound and a memory limit
    outcome = load_bounded(tmp_path, wall_seconds=WALL_SECONDS, address_space_mib=ADDRESS_SPACE_MIB)
    # THEN it refuses the file in one line naming it, with the reason, and no traceback, well within the bounds
    assert outcome.returncode == 2, outcome
    assert len(outcome.lines) == 1, outcome.lines
    line = outcome.lines[0]
    assert line.startswith(f"error: {tmp_path / 'dev.yaml'}: "), line
    assert all(w in line for w in words), line
    assert outcome.seconds < WALL_SECONDS and outcome.peak_rss_mib < ADDRESS_SPACE_MIB, outcome


# -- YAML 1.1 numbers -------------------------------------------------------------------------------------------------

# written: (what YAML 1.1 reads, how the message names it)
YAML_11_NUMBERS = {
    "1:30": (90, "the base-60 (sexagesimal) number 90"),
    "-1:30": (-90, "the base-60 (sexagesimal) number -90"),
    "1:30.5": (90.5, "the base-60 (sexagesimal) number 90.5"),
    "0x10": (16, "the hexadecimal number 16"),
    "0b11": (3, "the binary number 3"),
    "1_000": (1000, "the number 1000 (underscores dropped)"),
    "1_000.5": (1000.5, "the number 1000.5 (underscores dropped)"),
}


@pytest.mark.parametrize("written", sorted(YAML_11_NUMBERS))
def test_a_yaml_11_number_is_refused_with_the_quoted_form_as_the_fix(written: str) -> None:
    number, reading = YAML_11_NUMBERS[written]
    # GIVEN a field written with a number form YAML 1.2 reads as text (PyYAML, a YAML 1.1 reader, reads a number)
    assert yaml.safe_load(f"v: {written}") == {"v": number}
    # WHEN the configuration's loader reads it
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml(f"hyperpod:\n  instance_groups:\n    - count: {written}\n")
    # THEN it names the field, shows the value as written and offers both fixes
    (issue,) = raised.value.issues  # type: ignore[attr-defined]
    assert issue.path == "hyperpod.instance_groups[0].count"
    assert repr(issue.value) == written
    assert f"YAML 1.1 reads the unquoted {written} as {reading}" in issue.message
    assert f"write {number} for the number, or quote it ('{written}') for the text" in issue.message


def test_every_ambiguous_number_of_a_file_is_reported_at_once(write_config: Callable[..., Path]) -> None:
    # GIVEN dev.yaml with two YAML 1.1 numbers and a YAML 1.1 number as a key
    text = DEV.replace("count: 2\n", "count: 0x2\n").replace("ebs_volume_gb: 200", "ebs_volume_gb: 2_00")
    config_dir = write_config(raw=text + "tags2:\n  1:30: x\n")
    # WHEN it is loaded THEN each is one line at its field path, before anything else is checked
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    assert [(i.path, repr(i.value)) for i in raised.value.issues] == [
        ("hyperpod.instance_groups[0].count", "0x2"), ("hyperpod.instance_groups[0].ebs_volume_gb", "2_00"),
        ("tags2", "1:30")]
    assert "YAML 1.1 reads the key 1:30 as" in raised.value.issues[2].message
    assert len(str(raised.value).splitlines()) == 3


@pytest.mark.parametrize(("written", "read"), [
    ("'1:30'", "1:30"), ('"0x10"', "0x10"), ("10", 10), ("-3", -3), ("+7", 7), ("0", 0), ("1.5", 1.5),
    ("12:30:00Z", "12:30:00Z"), ("a_b", "a_b"), ("0o17", "0o17"), (".inf", float("inf")),
])
def test_numbers_both_yaml_versions_agree_on_and_quoted_text_are_read_as_written(written: str, read: Any) -> None:
    # GIVEN a value that YAML 1.1 and 1.2 read alike (or one written in quotes) WHEN it is read THEN it is kept
    assert load_yaml(f"v: {written}") == {"v": read}


def test_a_leading_zero_stays_for_the_field_checks_to_refuse() -> None:
    # GIVEN an octal-looking number (the field checks say what it became and quote it)
    value = load_yaml("count: 010")["count"]
    # THEN the loader keeps its text rather than refusing it without the field's context
    assert isinstance(value, YamlOctal) and value == 8 and repr(value) == "010"


# -- the merge key --------------------------------------------------------------------------------------------------

MERGED_DEV = DEV.replace("""  instance_groups:
    - name: system
      role: system
      instance_type: ml.m7i.2xlarge
      count: 2
      ebs_volume_gb: 200
    - name: prefill
      role: prefill
      instance_type: ml.p5.48xlarge
      count: 1
      ebs_volume_gb: 500
    - name: decode
      role: decode
      instance_type: ml.p5.48xlarge
      count: 1
      ebs_volume_gb: 500
""", """  instance_groups:
    - name: system
      role: system
      instance_type: ml.m7i.2xlarge
      count: 2
      ebs_volume_gb: 200
    - &gpu
      name: prefill
      role: prefill
      instance_type: ml.p5.48xlarge
      count: 1
      ebs_volume_gb: 500
    - <<: *gpu
      name: decode
      role: decode
""")


def test_the_merge_key_reads_like_the_expanded_file(write_config: Callable[..., Path]) -> None:
    # GIVEN dev.yaml with the decode group written as a merge of the prefill group
    assert "<<: *gpu" in MERGED_DEV and "- &gpu" in MERGED_DEV
    plain = load_environment("dev", FIXTURE_CONFIG_DIR)
    # WHEN it is loaded
    merged = load_environment("dev", write_config(raw=MERGED_DEV))
    # THEN it is the same environment as the file that writes every key out
    assert merged.model_dump() == plain.model_dump()


def test_merge_order_keys_written_here_win_then_the_first_mapping_listed() -> None:
    document = textwrap.dedent("""\
        a: &a {x: a, y: a, z: a}
        b: &b {x: b, w: b}
        m:
          <<: [*b, *a]
          z: m
    """)
    # WHEN a mapping merges two anchors and writes one key itself
    assert load_yaml(document)["m"] == {"x": "b", "w": "b", "y": "a", "z": "m"}
    # THEN its own key wins over both, and of the merged ones the first listed wins (the YAML merge type)


def test_an_alias_is_shared_not_copied() -> None:
    # GIVEN a value referenced twice WHEN it is read THEN both places hold the same object, built once
    data = load_yaml("a: &a {k: [1, 2]}\nb: *a\n")
    assert data["a"] is data["b"]


@pytest.mark.parametrize(("extra", "refused"), [("", False), (", 1", True)])
def test_the_values_budget_counts_every_alias_in_full(extra: str, refused: bool) -> None:
    # GIVEN a list of 99 values referenced 98 times, and single values up to the budget exactly: the root, key a and
    # its list (1 + 1 + 100), key b and its list (1 + 1 + 98 x 100), 48 keys with a value (48 x 2) make 10,000
    assert MAX_VALUES == 10_000
    document = ("a: &a [" + ", ".join(["1"] * 99) + "]\nb: [" + ", ".join(["*a"] * 98) + extra + "]\n"
                + "".join(f"c{i}: 1\n" for i in range(48)))
    # WHEN it is read THEN exactly the budget passes and one value more is refused
    if refused:
        with pytest.raises(yaml.YAMLError, match="more than 10,000 values"):
            load_yaml(document)
    else:
        assert len(load_yaml(document)["b"]) == 98
