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
    smoke: bool = False
    checks_role_arn: RoleArn | None = None
    wait_timeout_minutes: int = Field(default=90, ge=5, le=180)

    def needs_approval(self, environment: EnvironmentConfig) -> bool:
        return environment.production if self.approval is None else self.approval


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

    def promotion(self, environment: str) -> PromotionConfig:
        return next(p for p in self.environments if p.name == environment)

    def checks_role_name(self, environment: str) -> str:
        return f"{self.name}{CHECKS_ROLE_SUFFIX}{environment}"

    def issues(self, root: Any = None, path: str = "") -> Iterator[Issue]:
        """Checks that need no environment file: duplicates, role-name length, what smoke needs."""
        if self.source.connection_account != self.account:
            yield Issue(join(path, "source.connection_arn"), self.source.connection_arn,
                        f"a connection serves only pipelines of its own account; create it in the pipeline account {self.account}")
        first: dict[str, int] = {}
        for i, promotion in enumerate(self.environments):
            where = join(join(path, "environments"), i)
            if promotion.name in first:
                yield Issue(join(where, "name"), promotion.name,
                            f"listed twice (first at environments[{first[promotion.name]}]); each environment is "
                            "promoted once, in one place of the order")
                continue
            first[promotion.name] = i
            if len(self.checks_role_name(promotion.name)) > MAX_ROLE_NAME:
                yield Issue(join(where, "name"), promotion.name,
                            f"the checks role name {self.checks_role_name(promotion.name)!r} would exceed "
                            f"{MAX_ROLE_NAME} characters; shorten the pipeline name or the environment name")
            if promotion.smoke and promotion.checks_role_arn is None:
                yield Issue(join(where, "checks_role_arn"), promotion.given("checks_role_arn"),
                            "is required when smoke is true: the read-only CDK lookup role cannot call "
                            "sagemaker:InvokeEndpointWithResponseStream; see docs/pipeline.md, 'Enable smoke tests for an environment'")

    def environment_issues(self, available: Sequence[str], loaded: Mapping[str, EnvironmentConfig]) -> Iterator[Issue]:
        """Checks against the environment files: every name exists, smoke and roles fit the environment, and a checks
        role that verifies, smokes or rolls out endpoints is one of the environment's ``eks.operations_principals``."""
        for i, promotion in enumerate(self.environments):
            where = join("environments", i)
            if promotion.name not in available:
                yield Issue(join(where, "name"), promotion.name,
                            f"no such environment; allowed: {', '.join(available) or 'none (no environment files)'}")
                continue
            env = loaded.get(promotion.name)
            if env is None:
                continue
            if promotion.smoke and not env.endpoints:
                yield Issue(join(where, "smoke"), True,
                            f"environment {promotion.name} declares no endpoints to smoke-test; declare one or set smoke: false")
            unreachable = [e.name for e in env.endpoints if not e.sagemaker_endpoint_name]
            if promotion.smoke and unreachable:
                yield Issue(join(where, "smoke"), True,
                            f"endpoint(s) {', '.join(unreachable)} of {promotion.name} have no sagemaker_endpoint_name: "
                            "the pipeline's checks run outside the cluster (no kubeconfig) and reach endpoints through "
                            "SageMaker; set it in the environment file or set smoke: false")
            role = promotion.checks_role_arn
            if role is not None and role.split(":")[4] != env.account:
                yield Issue(join(where, "checks_role_arn"), role,
                            f"must be a role in the environment's account {env.account}")
            elif role is not None and env.endpoints and role not in env.eks.operations_principals:
                # verify, smoke's canary and rollout promote reach the cluster as this role (docs/pipeline.md)
                yield Issue(join(where, "checks_role_arn"), role,
                            f"has no access inside {promotion.name}'s cluster, where the pipeline's verify, smoke "
                            f"and rollout steps read and write as it: add it to eks.operations_principals in "
                            f"{promotion.name}.yaml")


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
    return resolve_config_dir(config_dir) / PIPELINE_FILE


def read_pipeline(config_dir: Path | None = None) -> PipelineConfig:
    """``<config_dir>/pipeline.yaml`` on its own: types, duplicates, roles, and that each named environment exists."""
    path = pipeline_file(config_dir)
    source = display_path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError.single(source, "<root>", data, "must be a mapping of pipeline settings")
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
