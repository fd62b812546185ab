"""Shared fixtures: every environment is synthesized once per test session, validators run on the result."""

from __future__ import annotations

import copy
import functools
import inspect
import os
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings as hypothesis_settings

from hyperpod_dpd.node_runtime import fit_node_to_machine

fit_node_to_machine()  # as app.py does, before anything imports the CDK (jsii starts Node with this environment)

from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly  # noqa: E402, F401 - re-exported for tests
from tests.paths import FIXTURE_CONFIG_DIR, ROOT, USER_CONFIG_DIR  # noqa: E402

# Everything that loads configuration without naming a directory reads the fixtures, never the user's config/.
# Subprocesses inherit both: the user's directory stays reachable for the invariant checks.
os.environ["HPDPD_USER_CONFIG_DIR"] = str(USER_CONFIG_DIR)
os.environ["HPDPD_CONFIG_DIR"] = str(FIXTURE_CONFIG_DIR)
NODE_BIN = ROOT / "node_modules" / "node" / "bin"
if NODE_BIN.is_dir() and str(NODE_BIN) not in os.environ.get("PATH", ""):
    os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # jsii on Node 22, as make does
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

# Property tests are reproducible by default (the same examples on every run, so CI cannot flake on a new one);
# HYPOTHESIS_PROFILE=explore searches afresh, e.g. with HPDPD_HYPOTHESIS_EXAMPLES=10000.
hypothesis_settings.register_profile("repeatable", derandomize=True, deadline=None, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
# make test-fast: the same repeatable examples, fewer of them (20 per property test, HPDPD_HYPOTHESIS_EXAMPLES for those
# that set their own count: tests/examples.py).
hypothesis_settings.register_profile("fast", parent=hypothesis_settings.get_profile("repeatable"), max_examples=20)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    from hyperpod_dpd.stacks.application import cdk_json_context

    return cdk_json_context()


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any], worker_id: str) -> Synthesized:
    """All fixture environments, synthesized once per run, exactly as ``make synth`` does. Under xdist the workers
    share it: the first that needs it synthesizes into the run's common temporary directory, under a lock, and the
    others read that assembly (the same code over the same files in the same run: the same templates)."""
    from hyperpod_dpd.stacks.application import build_app

    def synth(outdir: Path) -> None:
        app, _ = build_app(outdir=str(outdir), context=cdk_context)
        app.synth()

    if worker_id == "master":  # no xdist
        outdir = tmp_path_factory.mktemp("cdk.out")
        synth(outdir)
        return read_assembly(outdir)
    import shutil

    from tests.cache import locked

    shared = tmp_path_factory.getbasetemp().parent / "session-cdk.out"
    done = shared.with_name("session-cdk.out.done")
    with locked(shared.with_name("session-cdk.out.lock")):
        if not done.exists():
            shutil.rmtree(shared, ignore_errors=True)  # what a worker that failed midway left
            synth(shared)
            done.touch()
    return read_assembly(shared)


@pytest.fixture(scope="session")
def base_configs() -> dict[str, dict[str, Any]]:
    """The fixture environment files as plain data, for tests that mutate one field."""
    return {p.stem: yaml.safe_load(p.read_text()) for p in FIXTURE_CONFIG_DIR.glob("*.yaml")}


@pytest.fixture
def write_config(tmp_path: Path, base_configs: dict[str, dict[str, Any]]) -> Callable[..., Path]:
    """Write a mutated copy of an environment file into a temporary ``config/`` and return that directory."""

    def write(mutate: Callable[[dict[str, Any]], None] | None = None, *, env: str = "dev", raw: str | None = None) -> Path:
        config_dir = tmp_path / "config"
        config_dir.mkdir(exist_ok=True)
        target = config_dir / f"{env}.yaml"
        if raw is not None:
            target.write_text(raw)
        else:
            data = copy.deepcopy(base_configs[env])
            if mutate:
                mutate(data)
            target.write_text(yaml.safe_dump(data, sort_keys=False))
        return config_dir

    return write


# ---- the fast inner loop: `make test-fast` runs -m "not slow" ----------------------------------------------------------
# A test is slow when what it runs reaches the CDK, cdk8s or a subprocess: jsii starts Node and a synthesis takes
# seconds; a subprocess (a synthesis as make runs it, checkov, promtool, kustomize, a fresh venv) takes more. What a
# test runs is read from the code, not from a list that goes stale: the test function, every fixture it requests
# (pytest resolves the closure) and the suite's helpers they call, down to the global names their code reads and the
# modules it imports. A test marked @pytest.mark.slow by hand stays slow.
CDK_PREFIXES = ("aws_cdk", "cdk8s", "constructs", "jsii", "hyperpod_dpd.infra", "hyperpod_dpd.k8s", "hyperpod_dpd.stacks")
SLOW_PREFIXES = (*CDK_PREFIXES, "subprocess")
SUITE_DIRS = tuple(Path(__file__).resolve().parents[1] / d for d in ("tests", "scripts", "bench"))
_REACHES_SLOW: dict[int, bool] = {}


def _slow_name(name: str, prefixes: tuple[str, ...] = SLOW_PREFIXES) -> bool:
    return any(name == prefix or name.startswith(f"{prefix}.") for prefix in prefixes)


def _names(code: types.CodeType) -> Iterator[str]:
    """The global names and imported modules a code object reads, nested functions and comprehensions included."""
    yield from code.co_names
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _names(constant)


def _in_suite(obj: Any) -> bool:
    """Whether an object is the suite's own (or a script or benchmark a test runs), whose code is read in turn."""
    try:
        source = inspect.getsourcefile(obj)
    except TypeError:
        return False
    return source is not None and _file_in_suite(source)


@functools.cache
def _file_in_suite(source: str) -> bool:
    return any(Path(source).resolve().is_relative_to(d) for d in SUITE_DIRS)


def _members(obj: Any) -> list[Any]:
    """What a module or class of the suite holds: functions (methods and properties unwrapped), classes, values."""
    found = []
    for value in vars(obj).values():
        value = getattr(value, "__func__", value)  # staticmethod, classmethod
        found += [value.fget] if isinstance(value, property) and value.fget else [value]
    return found


def _reaches_slow(obj: Any) -> bool:
    """Whether a function, class or module of the suite reaches the CDK, cdk8s or a subprocess (each object is
    examined once; one already under examination counts as not slow, which ends cycles)."""
    key = id(obj)
    if key not in _REACHES_SLOW:
        _REACHES_SLOW[key] = False
        if isinstance(obj, (types.ModuleType, type)):
            slow = any(_value_is_slow(v) for v in _members(obj) if v is not obj)
        else:
            code, known = getattr(obj, "__code__", None), getattr(obj, "__globals__", {})
            names = set(_names(code)) if code is not None else set()
            slow = any(_slow_name(name) or (name in known and _value_is_slow(known[name], names)) for name in names)
        _REACHES_SLOW[key] = slow
    return _REACHES_SLOW[key]


def _value_is_slow(value: Any, read: set[str] | None = None) -> bool:
    """Whether a value a function reads is slow; of a module of the suite, only the members the function's code names
    (``read``: ``cluster.seed(...)`` reads ``seed``, not the module's other helpers)."""
    if isinstance(value, types.ModuleType):
        if _slow_name(value.__name__):
            return True
        if not _in_suite(value):
            return False
        if read is None:
            return _reaches_slow(value)
        return any(_value_is_slow(vars(value)[name]) for name in read & set(vars(value)) if vars(value)[name] is not value)
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and _slow_name(module):
        return True  # a class or function of the CDK, cdk8s or the toolkit's CDK packages
    if isinstance(value, (types.FunctionType, type)) and _in_suite(value):
        return _reaches_slow(value)
    return False


def _imports_slow(module: types.ModuleType | None) -> bool:
    """A test module that imports the CDK, cdk8s or the toolkit's CDK packages at its top."""
    return module is not None and any(
        _slow_name(v.__name__ if isinstance(v, types.ModuleType) else str(getattr(v, "__module__", "")), CDK_PREFIXES)
        for v in vars(module).values())


def _is_slow(item: pytest.Item) -> bool:
    if item.get_closest_marker("slow") or _imports_slow(getattr(item, "module", None)):
        return True
    function = getattr(getattr(item, "function", None), "__func__", getattr(item, "function", None))
    if function is not None and _reaches_slow(function):
        return True
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    definitions = fixtureinfo.name2fixturedefs.values() if fixtureinfo else ()
    return any(_in_suite(d.func) and _reaches_slow(d.func) for defs in definitions for d in defs)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
