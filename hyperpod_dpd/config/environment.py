"""The root of one environment's configuration (``config/<env>.yaml``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr

from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS
from hyperpod_dpd.config.alerts import AlertsConfig
from hyperpod_dpd.config.base import AccountId, Model, Region, join
from hyperpod_dpd.config.capacity import shared_capacity_issues
from hyperpod_dpd.config.delivery import DeliveryConfig
from hyperpod_dpd.config.eks import EksConfig
from hyperpod_dpd.config.eks_existing import partition_of
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.config.hyperpod import HyperPodConfig
from hyperpod_dpd.config.network import NetworkConfig
from hyperpod_dpd.config.operator import InferenceOperatorConfig, ModelBucket
from hyperpod_dpd.config.stack_names import StackNamePrefix, default_stack_prefix
from hyperpod_dpd.errors import ConfigError, Issue

# The role the toolkit creates in each environment for the pipeline's check steps (infra/checks_role.py): an explicit
# name, so the pipeline account can name it before it exists; <prefix> is the stack name prefix (``hpdpd-<env>``), so
# a renamed file with ``stack_name_prefix`` keeps it. IAM role names: 1-64 of [\w+=,.@-] (IAM CreateRole,
# RoleName). The role it trusts is the pipeline's CodeBuild role of the environment's checks.
CHECKS_ROLE_NAME = "{prefix}-checks"
# The checks runner (infra/checks_runner.py): a CodeBuild project inside the environment's VPC that runs the check
# commands, and its service role, which holds the cluster access. Explicit names, so the trigger (hpdpd checks run)
# and the checks role's policy can name them. CodeBuild project names: [A-Za-z0-9][A-Za-z0-9-_]{1,254} (CodeBuild
# API reference, CreateProject, name).
CHECKS_PROJECT_NAME = "{prefix}-checks"
CHECKS_RUNNER_ROLE_NAME = "{prefix}-checks-runner"
IAM_ROLE_NAME = re.compile(r"[\w+=,.@-]{1,64}")
CODEBUILD_PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-_]{1,254}")
TRUSTED_ROLE_ARN = re.compile(r"arn:(?P<partition>aws|aws-cn|aws-us-gov):iam::(?P<account>\d{12}):"
                              r"role/(?P<name>(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64})")


class CostConfig(Model):
    """``cost: {prices: {<instance type>: <usd per instance-hour>}}``: overrides the price catalogue
    (``hyperpod_dpd.catalogue.prices``) for ``hpdpd plan --env`` and ``hpdpd cost``."""

    prices: dict[str, float] = Field(default_factory=dict)

    def issues(self, root: Any = None, path: str = "") -> Iterator[Issue]:
        from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES

        for name, value in self.prices.items():
            if name not in INSTANCE_TYPES:
                yield Issue(join(path, f"prices.{name}"), value,
                            f"unknown instance type; known: {', '.join(sorted(INSTANCE_TYPES))}")
            elif not 0 < value < float("inf"):
                yield Issue(join(path, f"prices.{name}"), value, "must be a positive price in USD per instance-hour")


class EnvironmentConfig(Model):
    """Everything that differs between environments. Constructs receive these values, never the env name."""

    account: AccountId
    region: Region
    production: bool = False
    removal_policy: Literal["retain", "destroy"] = "destroy"
    termination_protection: bool = False
    tags: dict[str, str] = Field(default_factory=dict)
    # None: hpdpd-<env>. The stacks' names and the names derived from them (hyperpod_dpd.config.identity), so a renamed
    # file keeps its deployed stacks (docs/configuration.md, "Renaming an environment").
    stack_name_prefix: StackNamePrefix | None = None
    network: NetworkConfig
    eks: EksConfig
    hyperpod: HyperPodConfig
    endpoints: tuple[EndpointConfig, ...] = ()
    operator: InferenceOperatorConfig = InferenceOperatorConfig()
    alerts: AlertsConfig = AlertsConfig()  # the DPD alerts' SNS topic and subscriptions (docs/monitoring.md)
    cost: CostConfig = CostConfig()  # price overrides for hpdpd plan --env and hpdpd cost (docs/planner.md)
    delivery: DeliveryConfig = DeliveryConfig()  # CDK or a GitOps controller applies the in-cluster objects (docs/gitops.md)

    _name: str = PrivateAttr(default="")
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _source: str = PrivateAttr(default="")
    _checks_trust: str | None = PrivateAttr(default=None)
    _checks_runner: bool = PrivateAttr(default=False)

    @property
    def name(self) -> str:
        """The environment's name: the stem of its file (``config/dev.yaml`` -> ``dev``)."""
        return self._name

    @property
    def stack_prefix(self) -> str:
        """``stack_name_prefix``, else ``hpdpd-<env>``: the stacks are ``<prefix>-network``, ``-platform``, ``-endpoints``."""
        return self.stack_name_prefix or default_stack_prefix(self.name)

    def resolve_path(self, relative: str) -> Path:
        """A path from the config, relative to the project root (the parent of ``config/``)."""
        path = Path(relative)
        return path if path.is_absolute() else self._base_dir / path

    def warnings(self) -> list[Issue]:
        """Valid, but deserves a look before deploying (printed by ``make synth`` and ``app.py``)."""
        # the endpoints' warnings: hyperpod_dpd.config.endpoint_checks.environment_warnings lists these and theirs once
        return [*self.network.warnings(self, "network"), *self.eks.warnings("eks"),
                *self.alerts.warnings(self, "alerts")]

    # -- the checks role and the checks runner: how the pipeline's check steps reach into this environment ---------

    @property
    def checks_role_name(self) -> str:
        """``<prefix>-checks`` (``hpdpd-<env>-checks``): the role the pipeline's check steps assume to start the
        checks runner."""
        return CHECKS_ROLE_NAME.format(prefix=self.stack_prefix)

    @property
    def checks_role_arn(self) -> str:
        """That role's ARN, in the environment's account and partition."""
        return f"arn:{self.partition}:iam::{self.account}:role/{self.checks_role_name}"

    @property
    def checks_role_trust(self) -> str | None:
        """The one role ARN the checks role trusts when the toolkit creates one (:meth:`with_checks_role`), else None.
        Every environment the pipeline promotes has it, endpoints or not: preflight, wait and status run as it."""
        return self._checks_trust

    @property
    def checks_runner(self) -> bool:
        """Whether the platform creates the checks runner (infra/checks_runner.py): with endpoints, when the
        environment has a checks role (:meth:`with_checks_role`) or is promoted with a role of its own
        (:meth:`with_checks_runner`)."""
        return self._checks_runner and bool(self.endpoints)

    @property
    def checks_project_name(self) -> str:
        """``<prefix>-checks`` (``hpdpd-<env>-checks``): the runner's CodeBuild project, which ``hpdpd checks run``
        starts."""
        return CHECKS_PROJECT_NAME.format(prefix=self.stack_prefix)

    @property
    def checks_runner_role_name(self) -> str:
        """``<prefix>-checks-runner`` (``hpdpd-<env>-checks-runner``): the runner's CodeBuild service role, an
        operations role."""
        return CHECKS_RUNNER_ROLE_NAME.format(prefix=self.stack_prefix)

    @property
    def checks_runner_role_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:role/{self.checks_runner_role_name}"

    @property
    def operations_roles(self) -> tuple[str, ...]:
        """Every role with the operations access: ``eks.operations_principals`` and the runner's role, if any (the
        checks role itself only starts the runner and has no access inside the cluster)."""
        toolkit = (self.checks_runner_role_arn,) if self.checks_runner else ()
        return tuple(dict.fromkeys((*self.eks.operations_principals, *toolkit)))

    def checks_runner_problem(self) -> str | None:
        """Why this environment cannot have the checks runner (its names do not fit), or None."""
        if not IAM_ROLE_NAME.fullmatch(self.checks_runner_role_name):
            return (f"the checks runner's role name {self.checks_runner_role_name!r} is not an IAM role name (1-64 of "
                    "letters, digits and +=,.@_-): shorten the environment's name")
        if not CODEBUILD_PROJECT_NAME.fullmatch(self.checks_project_name):
            return (f"the checks runner's project name {self.checks_project_name!r} is not a CodeBuild project name "
                    "(letters, digits, - and _): rename the environment")
        return None

    def checks_role_problem(self, trusted_role_arn: str) -> str | None:
        """Why this environment cannot have the checks role trusted by ``trusted_role_arn`` (and the runner), or
        None."""
        match = TRUSTED_ROLE_ARN.fullmatch(trusted_role_arn)
        if match is None:
            return "must be an IAM role ARN such as 'arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev'"
        if match["partition"] != self.partition:
            return (f"must be in partition '{self.partition}' (the partition of {self.region}): a role cannot be "
                    "assumed across partitions")
        if not IAM_ROLE_NAME.fullmatch(self.checks_role_name):
            return (f"the checks role name {self.checks_role_name!r} is not an IAM role name (1-64 of letters, "
                    "digits and +=,.@_-): shorten the environment's name")
        return self.checks_runner_problem()

    def with_checks_role(self, trusted_role_arn: str) -> EnvironmentConfig:
        """A copy of this environment whose platform also creates the checks runner and the checks role
        (``hpdpd-<env>-checks``, trusted by ``trusted_role_arn`` only, infra/checks_role.py) that starts it, when it
        has endpoints; the runner's role gets the operations access. The application passes the pipeline's CodeBuild
        role of this environment's checks; a consumer app passes its own."""
        problem = self.checks_role_problem(trusted_role_arn)
        if problem:
            raise ConfigError.single(self.source, "checks role trust", trusted_role_arn, problem)
        copy = self.model_copy()
        copy._checks_trust = trusted_role_arn
        copy._checks_runner = True
        return copy

    def with_checks_runner(self) -> EnvironmentConfig:
        """A copy of this environment whose platform creates the checks runner but no checks role: the pipeline
        starts it as a role of the user's own (``checks_role_arn`` in ``pipeline.yaml``)."""
        problem = self.checks_runner_problem()
        if problem:
            raise ConfigError.single(self.source, "checks runner", self.checks_project_name, problem)
        copy = self.model_copy()
        copy._checks_runner = True
        return copy

    @property
    def source(self) -> str:
        """The file the environment was read from, as error messages name it (its name when built in memory)."""
        return self._source or self._name

    def issues(self, root: Any = None, path: str = "") -> Iterator[Issue]:
        if self.region not in HYPERPOD_REGIONS:
            yield Issue("region", self.region,
                        "SageMaker HyperPod (AWS::SageMaker::Cluster) is not available there; allowed: "
                        + ", ".join(sorted(HYPERPOD_REGIONS)))
            return  # every other check depends on the Region; report the root cause alone
        if self.production:
            if self.removal_policy != "retain":
                yield Issue("removal_policy", self.removal_policy, "must be 'retain' when production is true")
            if not self.termination_protection:
                yield Issue("termination_protection", self.termination_protection, "must be true when production is true")
        for key, value in self.tags.items():
            if len(key) > 128 or len(str(value)) > 256 or key.lower().startswith("aws:"):
                yield Issue(join("tags", key), value, "tag keys are 1-128 characters and must not start with 'aws:'; values at most 256")
        yield from self.network.issues(self, "network")
        yield from self.eks.issues(self, "eks")
        yield from self.hyperpod.issues(self, "hyperpod")
        for i, endpoint in enumerate(self.endpoints):
            yield from endpoint.issues(self, f"endpoints[{i}]")
            s3 = endpoint.model.s3
            if s3 is not None and s3.region != self.region:
                yield Issue(f"endpoints[{i}].model.s3.region", s3.region,
                            f"must be the cluster's Region {self.region}: model loads from another Region are slow "
                            "and cost cross-Region transfer; copy the weights into a bucket in the cluster's Region")
        # Autoscaled groups against all the endpoints that can land on them, once (not per endpoint or per group).
        yield from shared_capacity_issues(self, "hyperpod.instance_groups")
        yield from self.operator.issues(self, "operator")
        yield from self.alerts.issues(self, "alerts")  # production keeps its alerts (docs/configuration.md, alerts)
        yield from self.cost.issues(self, "cost")
        gate = self.operator.dpd_gate(self.operator.release) if self.endpoints else None
        if gate:
            yield Issue("operator.version", self.operator.version, gate)

    @property
    def model_buckets(self) -> tuple[ModelBucket, ...]:
        """The model buckets the S3 CSI role may read: the operator's, plus every S3 bucket an endpoint loads from."""
        buckets = {b.name: b for b in self.operator.model_buckets}
        for endpoint in self.endpoints:
            s3 = endpoint.model.s3
            if s3 is not None and s3.bucket not in buckets:
                buckets[s3.bucket] = ModelBucket(name=s3.bucket, region=s3.region)
        return tuple(buckets.values())

    @property
    def partition(self) -> str:
        return partition_of(self.region)
