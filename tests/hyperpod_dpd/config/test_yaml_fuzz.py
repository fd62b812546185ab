"""Property: whatever is done to the text of an environment file (aliases and bombs, merges, nesting, YAML 1.1
numbers, foreign bytes, control characters, truncation), loading it either succeeds or raises the toolkit's
ConfigError with one line per problem, each naming the file, within a time and a memory bound per case.

The mutations work on the file's text, below the data model, where the hostile inputs live; the data-level
mutations are in test_bad_input_matrix.py. Each case has 2 s (SIGALRM interrupts a hang) and 64 MiB of traced
allocations; the whole run takes a few seconds.
"""

from __future__ import annotations

import signal
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_dpd.config import EnvironmentConfig, load_environment
from hyperpod_dpd.errors import ConfigError
from tests.examples import examples
from tests.paths import FIXTURE_CONFIG_DIR

DEV = (FIXTURE_CONFIG_DIR / "dev.yaml").read_bytes()
LINES = DEV.splitlines(keepends=True)
CASE_SECONDS = 2.0
CASE_MEMORY = 64 * 1024 * 1024

Mutation = Callable[[list[bytes]], list[bytes]]


def _at(index: int, lines: list[bytes]) -> int:
    return index % len(lines) if lines else 0


def _value_line(lines: list[bytes], index: int) -> int | None:
    """A ``key: value`` line near ``index``, or None."""
    for step in range(len(lines)):
        i = (index + step) % len(lines)
        key, sep, value = lines[i].partition(b": ")
        if sep and value.strip() and not value.lstrip().startswith((b"#", b"&", b"*", b"[", b"{")):
            return i
    return None


def anchor_and_alias(index: int, copies: int) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        i = _value_line(lines, index)
        if i is None:
            return lines
        key, _, value = lines[i].partition(b": ")
        lines[i] = key + b": &fuzz" + str(index).encode() + b" " + value
        return [*lines, b"fuzz_aliases: [" + b", ".join([b"*fuzz" + str(index).encode()] * copies) + b"]\n"]
    return mutate


def bomb(width: int, levels: int, target: bytes) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        out = [b"l0: &l0 [" + b", ".join([b"lol"] * width) + b"]\n"]
        out += [f"l{i}: &l{i} [".encode() + b", ".join([f"*l{i - 1}".encode()] * width) + b"]\n"
                for i in range(1, levels)]
        return [*out, *[line for line in lines if not line.startswith(target + b":")],
                target + f": *l{levels - 1}\n".encode()]
    return mutate


def nest(index: int, depth: int) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        i = _value_line(lines, index)
        if i is None:
            return lines
        key, _, value = lines[i].partition(b": ")
        lines[i] = key + b": " + b"[" * depth + value.rstrip(b"\n") + b"]" * depth + b"\n"
        return lines
    return mutate


def replace_number(index: int, form: bytes) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        for step in range(len(lines)):
            i = (index + step) % len(lines)
            key, sep, value = lines[i].partition(b": ")
            if sep and value.strip().isdigit():
                lines[i] = key + b": " + form + b"\n"
                break
        return lines
    return mutate


def merge(index: int) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        i = _at(index, lines)
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        return [b"fuzz_defaults: &fuzz_defaults {count: 1, ebs_volume_gb: 500}\n", *lines[:i],
                indent + b"<<: *fuzz_defaults\n", *lines[i:]]
    return mutate


def splice(index: int, data: bytes) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        text = b"".join(lines)
        cut = index % (len(text) + 1)
        return (text[:cut] + data + text[cut:]).splitlines(keepends=True)
    return mutate


def truncate(index: int) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        text = b"".join(lines)
        return text[:index % (len(text) + 1)].splitlines(keepends=True)
    return mutate


def duplicate(index: int) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        i = _at(index, lines)
        return [*lines[:i + 1], *lines[i:]] if lines else lines
    return mutate


indices = st.integers(min_value=0, max_value=10_000)
MUTATIONS = st.one_of(
    st.builds(anchor_and_alias, indices, st.integers(1, 100)),  # more: the bombs
    st.builds(bomb, st.integers(2, 12), st.integers(2, 12), st.sampled_from([b"account", b"tags", b"endpoints"])),
    st.builds(nest, indices, st.integers(1, 120)),  # 500+ levels: test_yaml_safe.py
    st.builds(replace_number, indices, st.sampled_from([b"1:30", b"0x10", b"0b11", b"1_000", b"010", b"1_0.5", b"9" * 5000,
                                                        b"!!int x", b"2001-13-45", b"1e3", b".nan"])),
    st.builds(merge, indices),
    st.builds(splice, indices, st.sampled_from([b"\xff", b"\xe9", b"\x00", b"\x1b[31m", b"\r", b"\t", b"\xef\xbb\xbf",
                                                 b"? [a, b]\n: 1\n", b"&a [*a]", b"*undefined", b"---\n", b"!!python/object:os.system x",
                                                 b"{a: 1}: 2\n", b"<<: 1\n", "ünïcödé: ☃\n".encode()])),
    st.builds(splice, indices, st.binary(max_size=16)),
    st.builds(truncate, indices),
    st.builds(duplicate, indices),
)


class _Overtime(Exception):
    pass


@pytest.fixture(scope="module")
def bounded() -> Iterator[None]:
    """SIGALRM interrupts a case that runs past its time."""
    def alarm(signum: int, frame: FrameType | None) -> None:
        raise _Overtime
    previous = signal.signal(signal.SIGALRM, alarm)
    yield
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "config"


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=4))
def test_any_mutation_of_the_text_is_accepted_or_refused_in_one_line_per_problem(
        mutations: list[Mutation], bounded: None, config_dir: Path) -> None:
    # GIVEN dev.yaml's text after a few mutations
    lines = list(LINES)
    for mutate in mutations:
        lines = mutate(lines)
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "dev.yaml").write_bytes(b"".join(lines))
    # WHEN it is loaded, within the case's time and memory (only the load is traced: tracing slows what it traces)
    tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        result: EnvironmentConfig | ConfigError = load_environment("dev", config_dir)
    except ConfigError as error:
        result = error
    except _Overtime:
        pytest.fail(f"loading took more than {CASE_SECONDS} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    # THEN it is an environment, or the toolkit's error with one bounded line per problem naming the file
    assert peak < CASE_MEMORY, f"{peak:,} bytes traced"
    if isinstance(result, ConfigError):
        lines_out = str(result).splitlines()
        assert 1 <= len(lines_out) <= 101
        assert all(line.startswith(f"{config_dir / 'dev.yaml'}: ") and len(line) < 2_600 for line in lines_out), lines_out
    else:
        assert result.name == "dev"
