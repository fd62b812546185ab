"""The gates of config/pipeline.yaml are on by default: smoke for every environment with endpoints (``smoke: false`` opts
out), the toolkit's checks role unless a ``checks_role_arn`` is given, refused where no such role can exist, and a
warning where the pipeline cannot reach the cluster."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_environment, parse_environment
from hyperpod_dpd.config.pipeline import PromotionConfig, load_pipeline, read_pipeline
from hyperpod_dpd.errors import ConfigError
from tests.paths import FIXTURE_CONFIG_DIR, ROOT

PIPELINE_CHECKS_DEV = "arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev"


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    target = tmp_path / "config"
    shutil.copytree(FIXTURE_CONFIG_DIR, target)
    return target


def _edit(path: Path, change: Any) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _names_of_its_own(data: dict[str, Any]) -> None:
    """A copied environment's own cluster and bucket names; the model buckets become shared reads."""
    data["eks"]["cluster_name"] = data["hyperpod"]["cluster_name"] = "copied"
    data["operator"]["tls_bucket_name"] = "hyperpod-tls-copied"
    for bucket in data["operator"].get("model_buckets", []):
        bucket["create"] = False


def test_smoke_is_on_exactly_where_there_are_endpoints_unless_switched_off() -> None:
    # GIVEN the fixture environments: dev with an endpoint, staging without
    dev, staging = load_environment("dev"), load_environment("staging")
    assert dev.endpoints and not staging.endpoints
    # WHEN smoke is left to its default, THEN dev smokes and staging has nothing to smoke
    assert (PromotionConfig(name="dev").runs_smoke(dev), PromotionConfig(name="staging").runs_smoke(staging)) == (
        True, False)
    # AND smoke: false opts dev out
    assert PromotionConfig(name="dev", smoke=False).runs_smoke(dev) is False


def test_the_checks_role_defaults_to_the_toolkits_and_an_explicit_one_wins() -> None:
    dev = load_environment("dev")
    # THEN by default the cluster steps run as hpdpd-<env>-checks of the environment's account and partition
    assert PromotionConfig(name="dev").checks_role(dev) == "arn:aws:iam::111111111111:role/hpdpd-dev-checks"
    assert dev.checks_role_name == "hpdpd-dev-checks"
    # AND a checks_role_arn is used as given
    own = "arn:aws:iam::111111111111:role/platform/own-checks"
    assert PromotionConfig(name="dev", checks_role_arn=own).checks_role(dev) == own


def test_the_pipeline_trusts_each_environment_it_promotes() -> None:
    # GIVEN the fixture pipeline (dev, staging, prod; only dev has endpoints; no checks_role_arn anywhere)
    pipeline = load_pipeline()
    envs = {n: load_environment(n) for n in pipeline.order}
    trusted = {n: pipeline.trusted_environment(e) for n, e in envs.items()}
    # THEN dev's checks role trusts the pipeline's CodeBuild role of dev's checks, and dev gets the checks runner,
    # whose role (not the checks role) is dev's operations role
    assert pipeline.checks_trust("dev") == PIPELINE_CHECKS_DEV
    assert trusted["dev"].checks_role_trust == PIPELINE_CHECKS_DEV and trusted["dev"].checks_runner
    assert trusted["dev"].operations_roles == ("arn:aws:iam::111111111111:role/hpdpd-dev-checks-runner",)
    # AND the environments without endpoints get the checks role too (preflight, wait and status run as it), but no
    # runner and so no operations role (no check step reaches into their clusters)
    assert trusted["staging"].checks_role_trust == PIPELINE_CHECKS_DEV.replace("-dev", "-staging")
    assert trusted["prod"].operations_roles == () and trusted["staging"].operations_roles == ()
    assert not trusted["staging"].checks_runner and not trusted["prod"].checks_runner
    # AND the trust changes nothing else of the configuration
    assert trusted["dev"].model_dump() == envs["dev"].model_dump() and envs["dev"].checks_role_trust is None


def test_an_explicit_checks_role_means_no_toolkit_role_but_still_the_runner(config_dir: Path) -> None:
    # GIVEN dev promoted with a checks role of the user's own
    own = "arn:aws:iam::111111111111:role/platform/own-checks"
    _edit(config_dir / "pipeline.yaml", lambda d: d["environments"][0].__setitem__("checks_role_arn", own))
    pipeline = load_pipeline(config_dir)
    dev = pipeline.trusted_environment(load_environment("dev", config_dir))
    # THEN the toolkit creates no checks role, but the runner that role starts; the runner's role is the operations
    # role, the user's role needs no access inside the cluster
    assert dev.checks_role_trust is None and dev.checks_runner
    assert dev.operations_roles == ("arn:aws:iam::111111111111:role/hpdpd-dev-checks-runner",)


def test_an_environment_name_too_long_for_its_role_is_refused_with_one_line(config_dir: Path) -> None:
    # GIVEN an environment whose name makes hpdpd-<env>-checks 65 characters, promoted by the pipeline
    name = "e" * 52
    shutil.copy(config_dir / "dev.yaml", config_dir / f"{name}.yaml")
    _edit(config_dir / f"{name}.yaml", _names_of_its_own)  # a copy must not claim dev's names (config/identity.py)
    _edit(config_dir / "pipeline.yaml", lambda d: d.__setitem__("name", "p"))  # keep p-checks-<env> within 64
    _edit(config_dir / "pipeline.yaml", lambda d: d["environments"].append({"name": name}))
    # WHEN the pipeline is checked against it, THEN one line names pipeline.yaml, the entry and why
    with pytest.raises(ConfigError) as caught:
        load_pipeline(config_dir)
    assert str(caught.value).splitlines() == [
        f"{config_dir / 'pipeline.yaml'}: environments[3].name: {name!r}: the checks role name "
        f"'hpdpd-{name}-checks' is not an IAM role name (1-64 of letters, digits and +=,.@_-): shorten the "
        "environment's name"]


def test_an_environment_of_another_partition_is_refused(config_dir: Path) -> None:
    # GIVEN a pipeline in aws-cn promoting environments in the aws partition
    def china(d: dict[str, Any]) -> None:
        d["region"] = "cn-north-1"

    _edit(config_dir / "pipeline.yaml", china)
    with pytest.raises(ConfigError) as caught:
        load_pipeline(config_dir)
    # THEN each environment is one line: its roles cannot be assumed across partitions
    lines = str(caught.value).splitlines()
    assert lines[0] == (f"{config_dir / 'pipeline.yaml'}: environments[0].name: 'dev': is in partition 'aws' "
                        "(us-west-2), the pipeline in 'aws-cn' (cn-north-1): its roles cannot be assumed across "
                        "partitions")
    assert len(lines) == 3


def test_a_private_cluster_with_endpoints_is_checked_by_its_runner(base_configs: dict[str, Any]) -> None:
    # GIVEN dev with a private API endpoint (the pipeline's CodeBuild runs outside its VPC)
    data = copy.deepcopy(base_configs["dev"])
    data["eks"]["endpoint_access"] = "private"
    data["eks"].pop("public_access_cidrs", None)
    dev = parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)
    pipeline = read_pipeline()
    # THEN it is promoted like any other: the checks runner inside its VPC reaches the private endpoint
    trusted = pipeline.trusted_environment(dev)
    assert trusted.checks_runner and trusted.checks_project_name == "hpdpd-dev-checks"
    assert trusted.checks_runner_role_name == "hpdpd-dev-checks-runner"
