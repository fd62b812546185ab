"""`python -m hyperpod_dpd.stacks.application --check` refuses what used to be accepted but wrong, each in one line
naming the file, the field path, the value and what is allowed, well within 10 s: all of IPv4 as a production API's
CIDRs, an endpoint in ``kube-system``, two endpoints on one prefill and one decode node, a 1 MB S3 prefix, and a
``pipeline.yaml`` that cannot be read. Each case copies the fixture configuration and changes one thing."""

from __future__ import annotations

import copy
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import FIXTURE_CONFIG_DIR, ROOT

CHECK_SECONDS = 10  # CPU seconds of the whole check
HANG_SECONDS = 60  # wall clock: past this the check hangs
Mutation = Callable[[Path], None]


def _edit(env: str, change: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(config_dir: Path) -> None:
        path = config_dir / f"{env}.yaml"
        data = yaml.safe_load(path.read_text())
        change(data)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return mutate


def _public_prod(data: dict[str, Any]) -> None:
    data["eks"].update(endpoint_access="public_and_private", public_access_cidrs=["0.0.0.0/1", "128.0.0.0/1"])


def _second_endpoint(data: dict[str, Any]) -> None:
    data["endpoints"].append({**copy.deepcopy(data["endpoints"][0]), "name": "second", "namespace": "team-b"})


def _pipeline_directory(config_dir: Path) -> None:
    (config_dir / "pipeline.yaml").unlink()
    (config_dir / "pipeline.yaml").mkdir()


# case: (change to the fixture directory, file, field path, value as printed, words of what is allowed)
CASES: dict[str, tuple[Mutation, str, str, str, str]] = {
    "all of IPv4 on production": (
        _edit("prod", _public_prod), "prod.yaml", "eks.public_access_cidrs", "['0.0.0.0/1', '128.0.0.0/1']",
        "a production API endpoint must be private or restricted to known CIDRs: together they admit "
        "3,702,258,688 publicly routable IPv4 addresses"),
    "an endpoint in kube-system": (
        _edit("dev", lambda d: d["endpoints"][0].update(namespace="kube-system")), "dev.yaml",
        "endpoints[0].namespace", "'kube-system'", "is reserved: the prefix 'kube-' belongs to Kubernetes' system namespaces"),
    "two endpoints on one node pair": (
        _edit("dev", _second_endpoint), "dev.yaml", "hyperpod.instance_groups[1].count", "1",
        "holds 8 GPUs (1 x 8), but the endpoints' replicas on instance group 'prefill' need 16"),
    "a 1 MB S3 prefix": (
        _edit("dev", lambda d: d["endpoints"][0]["model"]["s3"].update(prefix="p" * 1_000_000)), "dev.yaml",
        "endpoints[0].model.s3.prefix", "'ppp", "has a key prefix of 1,000,000 bytes (UTF-8); an S3 object key has "
        "at most 1,024 bytes"),
    "a pipeline.yaml that is a directory": (
        _pipeline_directory, "pipeline.yaml", "<file>", "", "is a directory"),
}


def _check(config_dir: Path) -> tuple[int, list[str], float]:
    """Run the check; return its exit code, its lines and the CPU seconds it used (its own and its children's: jsii's
    Node). CPU time, not wall time, is held to the bound, so that a busy machine does not fail the case; a hang still
    fails, at the subprocess timeout."""
    environment = {k: v for k, v in os.environ.items() if k != "HPDPD_ENVIRONMENTS"}
    environment["HPDPD_CONFIG_DIR"] = str(config_dir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd.stacks.application", "--check"], cwd=ROOT,
                            env=environment, capture_output=True, text=True, timeout=HANG_SECONDS, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result.returncode, (result.stdout + result.stderr).splitlines(), cpu


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_ends_with_one_line_naming_file_field_value_and_rule(case: str, tmp_path: Path) -> None:
    # GIVEN the fixture configuration with one wrong thing in it
    change, file, field, value, allowed = CASES[case]
    config_dir = tmp_path / "config"
    shutil.copytree(FIXTURE_CONFIG_DIR, config_dir)
    change(config_dir)
    # WHEN the check runs as `make synth` runs it
    returncode, lines, seconds = _check(config_dir)
    # THEN it exits 2 (bad configuration, nothing synthesized) within 10 s, with one line
    assert returncode == 2, lines
    assert seconds < CHECK_SECONDS, f"{case} took {seconds:.1f} CPU seconds"
    assert len(lines) == 1, lines
    # AND the line names the file, the field path, the value and what is allowed
    location, _, rest = lines[0].partition(f"{file}: {field}: ")
    assert location.startswith("error: ") and location.endswith(f"{config_dir}/"), lines[0]
    assert rest.startswith(value) and allowed in rest, lines[0]
