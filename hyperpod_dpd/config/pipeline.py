"""The promotion pipeline's configuration (``config/pipeline.yaml``): where it lives, what it watches, and the order in
which environments are promoted, with the checks around each.

It is not an environment: it names environments (files next to it) and never repeats their settings, so the
pipeline deploys exactly the stages that ``cdk deploy "<env>/*"`` deploys.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from hyperpod_dpd.config.base import AccountId, Model, Region, join, pattern
from hyperpod_dpd.config.eks_existing import partition_of
from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.config.loader import (
    config_dir as resolve_config_dir,
)
from hyperpod_dpd.config.loader import (
    display_path,
    issues_from_validation,
    list_environments,
    load_all,
    read_yaml,
)
from hyperpod_dpd.errors import ConfigError, Issue

PIPELINE_FILE = "pipeline.yaml"
DEFAULT_PIPELINE_NAME = "hpdpd-pipeline"
MAX_ROLE_NAME = 64
CHECKS_ROLE_SUFFIX = "-checks-"  # <pipeline name>-checks-<env>: the CodeBuild role of an environment's checks


_ARN_PARTITION = r"arn:aws(-cn|-us-gov)?"
CONNECTION_ARN_EXAMPLE = "arn:aws:codeconnections:us-west-2:444444444444:connection/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
ConnectionArn = Annotated[str, pattern(
    _ARN_PARTITION + r":(codeconnections|codestar-connections):[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:connection/[0-9a-f-]{36}",
    f"a CodeConnections (or CodeStar Connections) connection ARN such as '{CONNECTION_ARN_EXAMPLE}'")]
RoleArn = Annotated[str, pattern(
    _ARN_PARTITION + r":iam::\d{12}:role/[\w+=,.@/-]{1,64}",
    "an IAM role ARN such as 'arn:aws:iam::222222222222:role/hpdpd-pipeline-checks'")]
Repository = Annotated[str, pattern(
    r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+", "'owner/name' of the Git repository (GitLab groups: 'group/sub/name')")]
Branch = Annotated[str, pattern(
    r"(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]+(?<![/.])", "a Git branch name such as 'main'")]
# A wave names a CodePipeline stage: 1-100 characters of [A-Za-z0-9.@_-] (CodePipeline API Reference, StageDeclaration
# name); environments' own stage names follow the same rule.
WaveName = Annotated[str, pattern(r"[A-Za-z0-9.@_-]{1,100}", "1-100 letters, digits and . @ _ - (a CodePipeline stage name)")]
PipelineName = Annotated[str, pattern(
    r"[A-Za-z0-9][A-Za-z0-9-]{0,39}", "1-40 letters, digits and hyphens, starting with a letter or digit")]


class SourceConfig(Model):
    """The Git repository the pipeline builds, through a connection authorized once in the console."""

    connection_arn: ConnectionArn = Field(description=f"the ARN of an authorized connection, e.g. '{CONNECTION_ARN_EXAMPLE}'")
    repository: Repository = Field(description="'owner/name' of the Git repository")
    branch: Branch = "main"

    @property
    def connection_account(self) -> str:
        return self.connection_arn.split(":")[4]


class PromotionConfig(Model):
    """One environment of the promotion order and the checks around its deployment."""

    name: str = Field(description="an environment: the stem of a file in config/")
    approval: bool | None = None  # None: a manual approval exactly when the environment is ``production``
    smoke: bool | None = None  # None: smoke-test exactly when the environment declares endpoints
    # None: the toolkit's own checks role (EnvironmentConfig.checks_role_arn). Either way the role only starts the
    # environment's checks runner (docs/pipeline.md, "The checks role").
    checks_role_arn: RoleArn | None = None
    wait_timeout_minutes: int = Field(default=90, ge=5, le=180)
    # None: a wave of its own. Consecutive environments of one wave deploy in parallel (CDK Pipelines' addWave), each
    # with its own checks; the next wave starts once every environment of this one has passed them.
    wave: WaveName | None = None

    def needs_approval(self, environment: EnvironmentConfig) -> bool:
        return environment.production if self.approval is None else self.approval

    def runs_smoke(self, environment: EnvironmentConfig) -> bool:
        """Smoke after deploying: on for an environment with endpoints unless ``smoke: false`` opts out."""
        return bool(environment.endpoints) if self.smoke is None else self.smoke

    def checks_role(self, environment: EnvironmentConfig) -> str:
        """The role the cluster steps start the checks runner as: ``checks_role_arn``, else the toolkit's."""
        return self.checks_role_arn or environment.checks_role_arn


class PipelineConfig(Model):
    """Account, Region and source of the pipeline, and the environments in promotion order."""

    account: AccountId
    region: Region
    name: PipelineName = DEFAULT_PIPELINE_NAME
    source: SourceConfig
    environments: tuple[PromotionConfig, ...] = Field(min_length=1, description="the environments in promotion order")

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.environments)

    @property
    def waves(self) -> tuple[tuple[str | None, tuple[PromotionConfig, ...]], ...]:
        """The promotion order in waves: (wave name or None for an environment of its own, its environments)."""
        groups: list[tuple[str | None, list[PromotionConfig]]] = []
        for promotion in self.environments:
            if promotion.wave is not None and groups and groups[-1][0] == promotion.wave:
                groups[-1][1].append(promotion)
            else:
                groups.append((promotion.wave, [promotion]))
        return tuple((name, tuple(group)) for name, group in groups)

    def promotion(self, environment: str) -> PromotionConfig:
        return next(p for p in self.environments if p.name == environment)

    def checks_role_name(self, environment: str) -> str:
        return f"{self.name}{CHECKS_ROLE_SUFFIX}{environment}"

    @property
    def partition(self) -> str:
        return partition_of(self.region)

    def checks_trust(self, environment: str) -> str:
        """The ARN of the CodeBuild role of ``environment``'s check steps (:meth:`checks_role_name`, no path): the one
        principal the toolkit's checks role in that environment trusts."""
        return f"arn:{self.partition}:iam::{self.account}:role/{self.checks_role_name(environment)}"

    def trusted_environment(self, environment: EnvironmentConfig) -> EnvironmentConfig:
        """``environment`` as the pipeline deploys it, when the order lists it: with the toolkit's checks role (which
        every check step assumes) and, with endpoints, the checks runner (infra/checks_runner.py) it starts; or with
        the runner alone when the entry names its own ``checks_role_arn``."""
        if environment.name not in self.order:
            return environment
        if self.promotion(environment.name).checks_role_arn is not None:
            return environment.with_checks_runner()
        return environment.with_checks_role(self.checks_trust(environment.name))

    def issues(self, root: Any = None, path: str = "") -> Iterator[Issue]:
        """Checks that need no environment file: duplicates and role-name length."""
        if self.source.connection_account != self.account:
            yield Issue(join(path, "source.connection_arn"), self.source.connection_arn,
                        f"a connection serves only pipelines of its own account; create it in the pipeline account {self.account}")
        first: dict[str, int] = {}
        seen_waves = [name for name, _ in self.waves if name is not None]
        for i, promotion in enumerate(self.environments):
            if promotion.wave is not None and seen_waves.count(promotion.wave) > 1:
                yield Issue(join(join(join(path, "environments"), i), "wave"), promotion.wave,
                            "its environments are not consecutive in the order; list a wave's environments together")
                seen_waves.remove(promotion.wave)
            where = join(join(path, "environments"), i)
            if promotion.name in first:
                yield Issue(join(where, "name"), promotion.name,
                            f"listed twice (first at environments[{first[promotion.name]}]); each environment is "
                            "promoted once, in one place of the order")
                continue
            first[promotion.name] = i
            if promotion.wave is not None and promotion.wave in self.order:
                yield Issue(join(where, "wave"), promotion.wave, "is the name of an environment; a wave and an "
                            "environment both name a pipeline stage")
            if len(self.checks_role_name(promotion.name)) > MAX_ROLE_NAME:
                yield Issue(join(where, "name"), promotion.name,
                            f"the checks role name {self.checks_role_name(promotion.name)!r} would exceed "
                            f"{MAX_ROLE_NAME} characters; shorten the pipeline name or the environment name")

    def environment_issues(self, available: Sequence[str], loaded: Mapping[str, EnvironmentConfig]) -> Iterator[Issue]:
        """Checks against the environment files: every name exists, in the pipeline's partition, smoke and roles fit
        the environment, the toolkit's checks role and runner can be named, and no wave mixes production with other
        environments."""
        for i, promotion in enumerate(self.environments):
            where = join("environments", i)
            if promotion.name not in available:
                yield Issue(join(where, "name"), promotion.name,
                            f"no such environment; allowed: {', '.join(available) or 'none (no environment files)'}")
                continue
            env = loaded.get(promotion.name)
            if env is None:
                continue
            if env.partition != self.partition:
                yield Issue(join(where, "name"), promotion.name,
                            f"is in partition '{env.partition}' ({env.region}), the pipeline in '{self.partition}' "
                            f"({self.region}): its roles cannot be assumed across partitions")
                continue
            if promotion.smoke and not env.endpoints:
                yield Issue(join(where, "smoke"), True,
                            f"environment {promotion.name} declares no endpoints to smoke-test; declare one or set smoke: false")
            role = promotion.checks_role_arn
            problem = None
            if role is None:
                problem = env.checks_role_problem(self.checks_trust(env.name))
            elif env.endpoints:
                problem = env.checks_runner_problem()
            if problem:
                yield Issue(join(where, "name"), promotion.name, problem)
            if role is not None and role.split(":")[4] != env.account:
                yield Issue(join(where, "checks_role_arn"), role,
                            f"must be a role in the environment's account {env.account}")
        yield from self._production_wave_issues(loaded)

    def _production_wave_issues(self, loaded: Mapping[str, EnvironmentConfig]) -> Iterator[Issue]:
        """A production environment shares its wave only with other production environments: a wave deploys its
        environments at the same time (CDK Pipelines' addWave), so a non-production environment beside it would not
        have been deployed and checked before it. One issue per mixed wave, at its first production entry."""
        members: dict[str, list[tuple[int, EnvironmentConfig]]] = {}
        listed: set[str] = set()
        for i, promotion in enumerate(self.environments):
            env = loaded.get(promotion.name)
            if promotion.wave is not None and env is not None and promotion.name not in listed:
                members.setdefault(promotion.wave, []).append((i, env))
            listed.add(promotion.name)
        for wave, entries in members.items():
            production = [(i, env) for i, env in entries if env.production]
            others = [env.name for _, env in entries if not env.production]
            if production and others:
                i, env = production[0]
                yield Issue(join(join("environments", i), "wave"), wave,
                            f"production environment {env.name} shares this wave with {', '.join(others)} (not "
                            "production), which would deploy at the same time instead of before it; a production "
                            "environment takes a wave of its own (or none) or shares one only with other production "
                            "environments")


def _with_hints(issues: list[Issue], model: type[Model]) -> list[Issue]:
    """Say what a missing field takes (its description), not only that it is missing."""
    out = []
    for issue in issues:
        if issue.message == "is required":
            field = _field_at(model, issue.path)
            if field is not None and field.description:
                issue = Issue(issue.path, issue.value, f"is required: {field.description}")
        out.append(issue)
    return out


def _field_at(model: type[Model], path: str) -> Any:
    current: Any = model
    field = None
    for part in re.sub(r"\[\d+\]", "", path).split("."):
        fields = getattr(current, "model_fields", {})
        if part not in fields:
            return None
        field = fields[part]
        annotation = field.annotation
        args = getattr(annotation, "__args__", ())
        current = next((a for a in (annotation, *args) if hasattr(a, "model_fields")), None)
    return field


def pipeline_file(config_dir: Path | None = None) -> Path:
    """Where the pipeline's configuration is: ``<config_dir>/pipeline.yaml``. Whether the app synthesizes a pipeline
    depends on whether anything is there at all (``hyperpod_dpd.config.files.present``): a directory, a link that
    leads nowhere or a file that cannot be read is an error of :func:`read_pipeline`, never "no pipeline"."""
    return resolve_config_dir(config_dir) / PIPELINE_FILE


def read_pipeline(config_dir: Path | None = None) -> PipelineConfig:
    """``<config_dir>/pipeline.yaml`` on its own: types, duplicates, roles, and that each named environment exists.

    Whatever cannot be read as a YAML mapping (a directory, a file without read permission, bytes that are not
    UTF-8, a list, an empty file) is one line naming the file (``read_yaml`` for the file system and the encoding)."""
    path = pipeline_file(config_dir)
    source = display_path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError.single(source, "<root>", data, "must be a mapping of pipeline settings ("
                                 + ", ".join(PipelineConfig.model_fields) + ")")
    try:
        config = PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _with_hints(issues_from_validation(exc, PipelineConfig), PipelineConfig)) from None
    problems = [*config.issues(), *config.environment_issues(list_environments(config_dir), {})]
    if problems:
        raise ConfigError(source, problems)
    return config


def cross_check(config: PipelineConfig, environments: Sequence[EnvironmentConfig], *,
                config_dir: Path | None = None) -> None:
    """The pipeline against the environments it deploys (smoke needs endpoints, roles in the right account)."""
    problems = list(config.environment_issues(list_environments(config_dir), {e.name: e for e in environments}))
    if problems:
        raise ConfigError(display_path(pipeline_file(config_dir)), problems)


def load_pipeline(
    config_dir: Path | None = None,
    *,
    environments: Sequence[EnvironmentConfig] | None = None,
) -> PipelineConfig:
    """Load and check ``<config_dir>/pipeline.yaml``; every problem is one line of a :class:`ConfigError`.

    ``environments`` are configs already loaded (the app has them); those the order names but that are not among
    them are loaded from their files, so the cross-checks always see what the pipeline will deploy.
    """
    config = read_pipeline(config_dir)
    given = {e.name: e for e in environments or ()}
    missing = [n for n in config.order if n not in given]
    loaded = [*given.values(), *(load_all(config_dir, missing) if missing else [])]
    cross_check(config, [e for e in loaded if e.name in config.order], config_dir=config_dir)
    return config
