"""Shared fixtures: every environment is synthesized once per test session, validators run on the result."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
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
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    from hyperpod_dpd.stacks.application import cdk_json_context

    return cdk_json_context()


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synthesized:
    """All fixture environments, synthesized once, exactly as ``make synth`` does."""
    from hyperpod_dpd.stacks.application import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, _ = build_app(outdir=str(outdir), context=cdk_context)
    app.synth()
    return read_assembly(outdir)


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
