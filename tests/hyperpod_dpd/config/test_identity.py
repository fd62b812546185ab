"""Identity across environments (hyperpod_dpd/config/identity.py): no two environments of a configuration directory claim one
stack, cluster, bucket, role or project name where the service needs it unique, and ``stack_name_prefix`` lets a file
be renamed while keeping its stacks. Each test writes its own directory from the fixture environments."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_all, load_environment
from hyperpod_dpd.config.identity import STACK_PARTS, identity_issues, physical_names, stack_name
from hyperpod_dpd.errors import ConfigError
from tests.paths import ROOT

Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture
def directory(tmp_path: Path, base_configs: dict[str, dict[str, Any]]) -> Callable[..., Path]:
    """``directory(name=(base, mutation), ...)``: a configuration directory of environment files, each a fixture
    environment (``base``) with an optional mutation."""

    def write(**files: tuple[str, Mutation | None]) -> Path:
        config_dir = tmp_path / "config"
        config_dir.mkdir(exist_ok=True)
        for name, (base, mutate) in files.items():
            data = copy.deepcopy(base_configs[base])
            if mutate:
                mutate(data)
            (config_dir / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        return config_dir

    return write


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = data
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        for m in mutations:
            m(data)
    return mutate


def _lines(config_dir: Path, names: list[str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_all(config_dir, names)
    return str(caught.value).splitlines()


def test_a_copied_environment_file_is_refused_with_one_line_per_claimed_name(directory: Callable[..., Path]) -> None:
    # GIVEN step 1 of "Add an environment" without step 2: dev.yaml copied to devcopy.yaml unchanged
    config_dir = directory(dev=("dev", None), devcopy=("dev", None))
    dev = load_environment("dev", config_dir)
    # WHEN the directory is loaded
    lines = _lines(config_dir)
    # THEN each name both would create is one line on the copy, naming the original file, the field and the value;
    # the names derived from the HyperPod cluster name (lifecycle bucket, execution role) are not repeated
    copied, original = str(config_dir / "devcopy.yaml"), str(config_dir / "dev.yaml")
    fields = [line.split(": ")[1] for line in lines]
    assert fields == ["eks.cluster_name", "hyperpod.cluster_name", "operator.tls_bucket_name",
                      "operator.model_buckets[0].name"]
    assert all(line.startswith(f"{copied}: ") and f"also claimed by {original} (" in line for line in lines)
    assert f"'{dev.eks.cluster_name}'" in lines[0] and f"account {dev.account}, Region {dev.region}" in lines[0]
    assert f"'{dev.operator.tls_bucket(dev.account, dev.region)}'" in lines[2]
    assert "by default it is derived from the account and Region" in lines[2]


def test_selecting_only_the_copy_still_compares_it_with_the_other_files(directory: Callable[..., Path]) -> None:
    # GIVEN the copied file, WHEN only it is selected (HPDPD_ENVIRONMENTS=devcopy)
    config_dir = directory(dev=("dev", None), devcopy=("dev", None))
    lines = _lines(config_dir, ["devcopy"])
    # THEN the conflicts are still found, said of the selected file
    assert len(lines) == 4 and all(line.startswith(str(config_dir / "devcopy.yaml")) for line in lines)


def test_a_bucket_name_is_compared_across_accounts_and_regions(directory: Callable[..., Path],
                                                               base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN prod (its own account and Region) creating the very model bucket dev creates
    dev_bucket = base_configs["dev"]["operator"]["model_buckets"][0]["name"]
    config_dir = directory(dev=("dev", None), prod=("prod", _set("operator.model_buckets", [
        {"name": dev_bucket, "create": True}])))
    # WHEN both are loaded, THEN one line: S3 bucket names are unique in the partition
    (line,) = _lines(config_dir)
    assert line.startswith(f"{config_dir / 'prod.yaml'}: operator.model_buckets[0].name: '{dev_bucket}': ")
    assert "in partition aws, where bucket names are unique across all accounts and Regions" in line


def test_a_bucket_that_both_only_read_is_shared(directory: Callable[..., Path],
                                                base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN dev creating its model bucket and staging naming the same bucket without creating it (shared weights)
    dev_bucket = base_configs["dev"]["operator"]["model_buckets"][0]["name"]
    config_dir = directory(dev=("dev", None), staging=("staging", _set("operator.model_buckets", [
        {"name": dev_bucket, "create": False, "region": "us-west-2"}])))
    # WHEN loaded, THEN accepted: reading is not claiming
    assert [e.name for e in load_all(config_dir)] == ["dev", "staging"]


def test_a_cluster_name_is_unique_per_account_and_region_only(directory: Callable[..., Path],
                                                              base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN staging in its own account using dev's EKS and HyperPod cluster names
    dev = base_configs["dev"]
    assert base_configs["staging"]["account"] != dev["account"]
    rename = _both(_set("eks.cluster_name", dev["eks"]["cluster_name"]),
                   _set("hyperpod.cluster_name", dev["hyperpod"]["cluster_name"]))
    config_dir = directory(dev=("dev", None), staging=("staging", rename))
    # WHEN loaded, THEN accepted (cluster names are per account and Region; the buckets derive from the account)
    assert len(load_all(config_dir)) == 2


def test_a_role_name_is_unique_in_the_account_across_regions(directory: Callable[..., Path],
                                                             base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN a second environment in dev's account but another Region, with dev's HyperPod cluster name
    dev = base_configs["dev"]
    east = _both(_set("account", dev["account"]), _set("hyperpod.cluster_name", dev["hyperpod"]["cluster_name"]))
    config_dir = directory(dev=("dev", None), east=("prod", east))
    # WHEN loaded
    (line,) = _lines(config_dir)
    # THEN the one name they share is the execution role derived from that cluster name: IAM is account-wide
    env = load_environment("dev", config_dir)
    role = env.operator.execution_role(env.hyperpod.cluster_name)
    assert line.startswith(f"{config_dir / 'east.yaml'}: operator.execution_role_name: '{role}': IAM role name")
    assert f"in account {dev['account']} (IAM names are unique in an account, in every Region)" in line
    assert "give one of them its own hyperpod.cluster_name, or set operator.execution_role_name" in line


def test_two_environments_with_one_stack_name_prefix_are_one_line(directory: Callable[..., Path]) -> None:
    # GIVEN two environments in one account and Region that keep their own cluster and bucket names but set the same
    # stack_name_prefix
    own_names = _both(_set("stack_name_prefix", "hpdpd-dev"), _set("eks.cluster_name", "other-eks"),
                      _set("hyperpod.cluster_name", "other-hp"), _set("operator.tls_bucket_name", "hyperpod-tls-other"),
                      _set("operator.model_buckets", []))
    config_dir = directory(dev=("dev", None), other=("dev", own_names))
    # WHEN loaded, THEN one line at stack_name_prefix (its stacks, checks role, runner and project share the cause)
    (line,) = _lines(config_dir)
    assert line.startswith(f"{config_dir / 'other.yaml'}: stack_name_prefix: 'hpdpd-dev-network': CloudFormation stack")
    assert "set a different stack_name_prefix in one of them" in line


def test_a_renamed_file_with_the_prefix_keeps_every_name(directory: Callable[..., Path]) -> None:
    # GIVEN dev.yaml renamed to devel.yaml with stack_name_prefix: hpdpd-dev
    before = load_environment("dev", ROOT / "tests" / "fixtures" / "config")
    renamed_dir = directory(devel=("dev", _set("stack_name_prefix", "hpdpd-dev")))
    (after,) = load_all(renamed_dir)
    # THEN its stacks and every physical name, the checks role and runner included, are dev's
    assert after.name == "devel"
    assert [stack_name(after, p) for p in STACK_PARTS] == ["hpdpd-dev-network", "hpdpd-dev-platform",
                                                           "hpdpd-dev-endpoints"]
    assert [(n.kind, n.name) for n in physical_names(after)] == [(n.kind, n.name) for n in physical_names(before)]
    assert (after.checks_role_name, after.checks_project_name) == ("hpdpd-dev-checks", "hpdpd-dev-checks")


def test_without_the_prefix_a_renamed_file_names_new_stacks(directory: Callable[..., Path]) -> None:
    # GIVEN dev.yaml renamed to devel.yaml without the key, THEN its stacks are new ones beside dev's deployed stacks
    (after,) = load_all(directory(devel=("dev", None)))
    assert stack_name(after, "network") == "hpdpd-devel-network" and after.checks_role_name == "hpdpd-devel-checks"


@pytest.mark.parametrize(("value", "rule"), [
    ("1dev", "starting with a letter"), ("hpdpd_dev", "letters, digits and hyphens"),
    ("h" * 119, "at most 118 characters"), (7, "string"),
])
def test_a_bad_stack_name_prefix_is_one_line(directory: Callable[..., Path], value: Any, rule: str) -> None:
    # GIVEN a prefix CloudFormation would refuse in a stack name, WHEN loaded, THEN one line: file, field, value, rule
    (line,) = _lines(directory(dev=("dev", _set("stack_name_prefix", value))))
    assert line.startswith(f"{directory() / 'dev.yaml'}: stack_name_prefix: ") and rule in line


def test_a_file_that_does_not_load_is_not_compared_with(directory: Callable[..., Path]) -> None:
    # GIVEN dev and a broken, unselected copy of it
    config_dir = directory(dev=("dev", None), broken=("dev", _set("account", "12345")))
    # WHEN only dev is loaded, THEN it loads: the broken file is reported when it is selected itself
    assert [e.name for e in load_all(config_dir, ["dev"])] == ["dev"]
    assert "account" in _lines(config_dir, ["broken"])[0]


def test_identity_issues_of_distinct_environments_are_none(base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN the fixture environments, THEN they claim no name twice
    environments = load_all(ROOT / "tests" / "fixtures" / "config")
    assert identity_issues(environments) == []


def test_the_check_stops_before_the_cdk_starts(directory: Callable[..., Path]) -> None:
    # GIVEN the copied file, WHEN `python -m hyperpod_dpd.stacks.application --check` runs (make synth's first step)
    config_dir = directory(dev=("dev", None), devcopy=("dev", None))
    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd.stacks.application", "--check"], cwd=ROOT,
                            env={**os.environ, "HPDPD_CONFIG_DIR": str(config_dir)}, capture_output=True, text=True,
                            timeout=120, check=False)
    # THEN it exits 2 with the same lines, each an `error:`, and no traceback
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if "!!" not in line and line.strip()]
    assert lines[0].startswith(f"error: {config_dir / 'devcopy.yaml'}: eks.cluster_name: ") and len(lines) == 4
    assert "Traceback" not in result.stderr
