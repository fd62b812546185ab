"""config/pipeline.yaml: the committed file loads, is not an environment, and each kind of bad input fails with one
line naming the file, the field path, the value and what is allowed."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import list_environments, load_environment, parse_environment
from hyperpod_dpd.config.pipeline import (
    PipelineConfig,
    PromotionConfig,
    cross_check,
    load_pipeline,
    read_pipeline,
)
from hyperpod_dpd.errors import ConfigError, render_value
from tests.paths import FIXTURE_CONFIG_DIR, ROOT

OTHER_CONNECTION = "arn:aws:codestar-connections:us-east-1:555555555555:connection/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
SMOKE_ROLE = "arn:aws:iam::111111111111:role/hpdpd-pipeline-smoke"
Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return yaml.safe_load((FIXTURE_CONFIG_DIR / "pipeline.yaml").read_text())


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """A copy of the committed config/ (environments and pipeline) to mutate, where dev grants the pipeline's smoke role
    cluster access (``eks.operations_principals``), as an environment that enables the checks does."""
    target = tmp_path / "config"
    shutil.copytree(FIXTURE_CONFIG_DIR, target)
    dev = yaml.safe_load((target / "dev.yaml").read_text())
    dev["eks"]["operations_principals"] = [SMOKE_ROLE]
    (target / "dev.yaml").write_text(yaml.safe_dump(dev, sort_keys=False))
    return target


def write_pipeline(config_dir: Path, base: dict[str, Any], mutate: Mutation) -> Path:
    data = copy.deepcopy(base)
    mutate(data)
    (config_dir / "pipeline.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return config_dir


def test_committed_pipeline_loads_in_promotion_order() -> None:
    # WHEN the committed pipeline file is loaded and checked against the committed environments
    pipeline = load_pipeline()
    # THEN it is typed, frozen and lists the environments in promotion order
    assert isinstance(pipeline, PipelineConfig)
    assert pipeline.order == ("dev", "staging", "prod")
    assert pipeline.source.connection_arn.startswith("arn:aws:codeconnections:")
    assert pipeline.source.connection_account == pipeline.account
    with pytest.raises(Exception):
        pipeline.account = "999999999999"  # type: ignore[misc]


def test_approval_defaults_to_the_environments_production_flag(committed: dict[str, Any]) -> None:
    # GIVEN the committed environments, and promotions that do not set approval
    envs = {name: load_environment(name) for name in ("dev", "staging", "prod")}
    # WHEN approval is left to its default, THEN only the production environment needs one
    assert {n: PromotionConfig(name=n).needs_approval(e) for n, e in envs.items()} == {
        "dev": False, "staging": False, "prod": True}
    # AND an explicit setting wins either way
    assert PromotionConfig(name="staging", approval=True).needs_approval(envs["staging"]) is True
    assert PromotionConfig(name="prod", approval=False).needs_approval(envs["prod"]) is False
    # AND the committed file asks for one before prod only
    pipeline = load_pipeline()
    assert [p.name for p in pipeline.environments if p.needs_approval(envs[p.name])] == ["prod"]


def test_pipeline_yaml_is_not_an_environment(config_dir: Path) -> None:
    # GIVEN a config directory that holds pipeline.yaml next to the environment files
    assert (config_dir / "pipeline.yaml").is_file()
    # WHEN environments are listed, THEN the pipeline is not among them
    assert list_environments(config_dir) == ["dev", "prod", "staging"]
    # AND asking for it as an environment fails with one line that says why and what is available
    with pytest.raises(ConfigError) as caught:
        load_environment("pipeline", config_dir)
    assert str(caught.value) == (
        f"{config_dir / 'pipeline.yaml'}: <file>: 'pipeline': reserved for the promotion pipeline's settings, "
        "not an environment; available environments: dev, prod, staging")


def _promotion(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: next(p for p in d["environments"] if p["name"] == name)


def _smoke_dev(d: dict[str, Any]) -> None:
    _promotion("dev")(d).update(smoke=True, checks_role_arn=SMOKE_ROLE)


# Each case: a mutation of the committed pipeline.yaml and the exact line it must produce (after the file name).
BAD_INPUT: dict[str, tuple[Mutation, str]] = {
    "an environment listed twice": (
        lambda d: d["environments"].append({"name": "staging"}),
        "environments[3].name: 'staging': listed twice (first at environments[1]); each environment is promoted once, "
        "in one place of the order"),
    "an unknown environment in the order": (
        lambda d: d["environments"].insert(1, {"name": "qa"}),
        "environments[1].name: 'qa': no such environment; allowed: dev, prod, staging"),
    "the pipeline itself in the order": (
        lambda d: d["environments"].append({"name": "pipeline"}),
        "environments[3].name: 'pipeline': no such environment; allowed: dev, prod, staging"),
    "a missing connection ARN": (
        lambda d: d["source"].pop("connection_arn"),
        "source.connection_arn: missing: is required: the ARN of an authorized connection, e.g. "
        "'arn:aws:codeconnections:us-west-2:444444444444:connection/0a1b2c3d-4e5f-6789-abcd-ef0123456789'"),
    "a malformed connection ARN": (
        lambda d: d["source"].__setitem__("connection_arn", "arn:aws:codeconnections:us-west-2:444444444444:acme"),
        "source.connection_arn: 'arn:aws:codeconnections:us-west-2:444444444444:acme': must be a CodeConnections "
        "(or CodeStar Connections) connection ARN such as "
        "'arn:aws:codeconnections:us-west-2:444444444444:connection/0a1b2c3d-4e5f-6789-abcd-ef0123456789'"),
    "a connection of another account": (
        lambda d: d["source"].__setitem__("connection_arn", OTHER_CONNECTION),
        f"source.connection_arn: {render_value(OTHER_CONNECTION)}: a connection serves only pipelines of its own "
        "account; create it in the pipeline account 444444444444"),
    "a repository that is not owner/name": (
        lambda d: d["source"].__setitem__("repository", "hyperpod-dpd"),
        "source.repository: 'hyperpod-dpd': must be 'owner/name' of the Git repository (GitLab groups: 'group/sub/name')"),
    "an unknown key on a promotion": (
        lambda d: _promotion("prod")(d).__setitem__("aproval", True),
        "environments[2].aproval: 'aproval': unknown key; allowed keys here: name, approval, smoke, checks_role_arn, "
        "wait_timeout_minutes, wave; did you mean 'approval'?"),
    "smoke on an environment without endpoints": (
        lambda d: _promotion("staging")(d).update(
            smoke=True, checks_role_arn="arn:aws:iam::222222222222:role/hpdpd-pipeline-smoke"),
        "environments[1].smoke: true: environment staging declares no endpoints to smoke-test; declare one or set "
        "smoke: false"),
    "a wait timeout written as a boolean": (
        lambda d: _promotion("prod")(d).__setitem__("wait_timeout_minutes", True),
        "environments[2].wait_timeout_minutes: true: must be a whole number, not a boolean (YAML reads true/false, "
        "yes/no and on/off as booleans)"),
    "an account written as a number": (
        lambda d: d.__setitem__("account", 444444444444),
        'account: 444444444444: must be a 12-digit string; quote it in YAML ("444444444444")'),
    "a pipeline name of 41 characters": (
        lambda d: d.__setitem__("name", "p-" * 20 + "x"),
        f"name: '{'p-' * 20}x': must be 1-40 letters, digits and hyphens, starting with a letter or digit"),
    "a production environment in a wave with staging": (
        lambda d: (_promotion("staging")(d).__setitem__("wave", "late"), _promotion("prod")(d).__setitem__("wave", "late")),
        "environments[2].wave: 'late': production environment prod shares this wave with staging (not production), "
        "which would deploy at the same time instead of before it; a production environment takes a wave of its own "
        "(or none) or shares one only with other production environments"),
    "a checks role in another account": (
        lambda d: _promotion("prod")(d).__setitem__("checks_role_arn", "arn:aws:iam::222222222222:role/checks"),
        "environments[2].checks_role_arn: 'arn:aws:iam::222222222222:role/checks': must be a role in the "
        "environment's account 333333333333"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_pipeline_input_is_one_clear_line(case: str, config_dir: Path, committed: dict[str, Any]) -> None:
    mutate, expected = BAD_INPUT[case]
    # GIVEN the committed pipeline file with one mistake
    write_pipeline(config_dir, committed, mutate)
    # WHEN it is loaded
    with pytest.raises(ConfigError) as caught:
        load_pipeline(config_dir)
    # THEN the error is exactly one line: file, field path, value, and what is allowed
    assert str(caught.value).splitlines() == [f"{config_dir / 'pipeline.yaml'}: {expected}"]


def test_several_mistakes_are_reported_together(config_dir: Path, committed: dict[str, Any]) -> None:
    def two(d: dict[str, Any]) -> None:
        d["environments"].append({"name": "dev"})
        d["source"]["branch"] = "-main"

    write_pipeline(config_dir, committed, two)
    with pytest.raises(ConfigError) as caught:
        read_pipeline(config_dir)
    assert [i.path for i in caught.value.issues] == ["source.branch"]  # types first; duplicates need valid types
    write_pipeline(config_dir, committed, lambda d: d["environments"].extend([{"name": "dev"}, {"name": "qa"}]))
    with pytest.raises(ConfigError) as caught:
        read_pipeline(config_dir)
    assert [i.path for i in caught.value.issues] == ["environments[3].name", "environments[4].name"]


def test_an_explicit_smoke_and_checks_role_are_accepted(config_dir: Path, committed: dict[str, Any],
                                                        base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN smoke written out and a checks role of dev's account that dev lists as an operations principal; dev's
    # endpoint has no SageMaker endpoint name (smoke then goes through the API server's service proxy)
    data = copy.deepcopy(base_configs["dev"])
    data["eks"]["operations_principals"] = [SMOKE_ROLE]  # the cluster steps read and write as the role
    dev = parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)
    assert dev.endpoints[0].sagemaker_endpoint_name is None
    write_pipeline(config_dir, committed, _smoke_dev)
    # WHEN the pipeline is checked against that environment
    pipeline = read_pipeline(config_dir)
    cross_check(pipeline, [dev], config_dir=config_dir)
    # THEN it is accepted, with the smoke switch and the role on dev alone (the others keep their defaults)
    assert [(p.name, p.smoke, p.checks_role_arn) for p in pipeline.environments] == [
        ("dev", True, "arn:aws:iam::111111111111:role/hpdpd-pipeline-smoke"), ("staging", None, None),
        ("prod", None, None)]


def test_a_missing_pipeline_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_pipeline(tmp_path)
    # THEN one line naming the file (the value is the path, shortened when long) and the problem
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{tmp_path / 'pipeline.yaml'}: <file>: '") and line.endswith(": no such file")


def test_an_explicit_checks_role_needs_no_cluster_access(
        config_dir: Path, committed: dict[str, Any], base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN a checks role on dev (endpoints) and on staging (no endpoints), neither in eks.operations_principals
    def roles(d: dict[str, Any]) -> None:
        _promotion("dev")(d)["checks_role_arn"] = SMOKE_ROLE
        _promotion("staging")(d)["checks_role_arn"] = "arn:aws:iam::222222222222:role/hpdpd-pipeline-checks"

    write_pipeline(config_dir, committed, roles)
    pipeline = read_pipeline(config_dir)
    staging = load_environment("staging", config_dir)
    assert staging.endpoints == () and staging.eks.operations_principals == ()
    plain = parse_environment(copy.deepcopy(base_configs["dev"]), name="dev", source="dev.yaml", base_dir=ROOT)
    assert SMOKE_ROLE not in plain.eks.operations_principals
    # WHEN the pipeline is checked against them, THEN both are accepted: the role only starts dev's checks runner,
    # whose own role has the access inside the cluster
    cross_check(pipeline, [plain, staging], config_dir=config_dir)
    runner = pipeline.trusted_environment(plain)
    assert runner.checks_runner and runner.checks_role_trust is None
    assert runner.operations_roles == ("arn:aws:iam::111111111111:role/hpdpd-dev-checks-runner",)


def _second_production(config_dir: Path) -> None:
    """prod-b: a copy of prod with cluster and bucket names of its own (a copy must not claim prod's,
    config/identity.py)."""
    data = yaml.safe_load((config_dir / "prod.yaml").read_text())
    data["eks"]["cluster_name"] = data["hyperpod"]["cluster_name"] = "hpdpd-prod-b"
    data.setdefault("operator", {})["tls_bucket_name"] = "hyperpod-tls-prod-b"
    (config_dir / "prod-b.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_production_wave_holds_only_production_environments(config_dir: Path, committed: dict[str, Any]) -> None:
    # GIVEN a second production environment, prod-b
    _second_production(config_dir)
    assert load_environment("prod-b", config_dir).production

    def order(*entries: dict[str, Any]) -> Mutation:
        return lambda d: d.__setitem__("environments", list(entries))

    # WHEN dev and staging share a wave and prod and prod-b share the next one, THEN it loads: two waves, each of
    # one kind, the production one after the other's checks
    write_pipeline(config_dir, committed, order({"name": "dev", "wave": "early"}, {"name": "staging", "wave": "early"},
                                                {"name": "prod", "wave": "late"}, {"name": "prod-b", "wave": "late"}))
    pipeline = load_pipeline(config_dir)
    assert [(w, [p.name for p in ps]) for w, ps in pipeline.waves] == [
        ("early", ["dev", "staging"]), ("late", ["prod", "prod-b"])]
    # AND a production environment in a wave of its own loads too
    write_pipeline(config_dir, committed, order({"name": "dev"}, {"name": "prod", "wave": "solo"}, {"name": "prod-b"}))
    assert [w for w, _ in load_pipeline(config_dir).waves] == [None, "solo", None]
    # WHEN a non-production environment is listed first in a wave with two production ones
    write_pipeline(config_dir, committed, order({"name": "dev"}, {"name": "staging", "wave": "late"},
                                                {"name": "prod", "wave": "late"}, {"name": "prod-b", "wave": "late"}))
    with pytest.raises(ConfigError) as caught:
        load_pipeline(config_dir)
    # THEN one line, at the wave field of the wave's first production entry, names the others and what is allowed
    assert str(caught.value).splitlines() == [
        f"{config_dir / 'pipeline.yaml'}: environments[2].wave: 'late': production environment prod shares this wave "
        "with staging (not production), which would deploy at the same time instead of before it; a production "
        "environment takes a wave of its own (or none) or shares one only with other production environments"]
    # AND the file alone (no environment read) cannot tell, so read_pipeline accepts it and the cross-check refuses it
    pipeline = read_pipeline(config_dir)
    envs = [load_environment(n, config_dir) for n in pipeline.order]
    with pytest.raises(ConfigError) as caught:
        cross_check(pipeline, envs, config_dir=config_dir)
    assert [(i.path, i.value) for i in caught.value.issues] == [("environments[2].wave", "late")]
