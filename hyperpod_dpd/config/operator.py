"""Inference operator section: the HyperPod Inference Operator add-on, its prerequisites, roles and buckets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import Field, field_validator

from hyperpod_dpd.catalogue.operator import (
    DEFAULT_OPERATOR,
    DPD_MINIMUM_OPERATOR,
    EXECUTION_ROLE_PREFIX,
    GRAFANA_REGIONS,
    OBSERVABILITY_ADDON_VERSION,
    OPERATOR_RELEASES,
    PREREQUISITE_ADDONS,
    TLS_BUCKET_PREFIX,
    OperatorRelease,
)
from hyperpod_dpd.catalogue.versions import parse_addon_version
from hyperpod_dpd.config.base import Model, Region, addon_version_issues, join, pattern, quoted_choice
from hyperpod_dpd.config.names import bucket_name_problem
from hyperpod_dpd.errors import Issue


class ModelBucket(Model):
    """An S3 bucket holding model weights: created by the toolkit, or an existing one the roles are scoped to."""

    name: str
    create: bool = False
    region: Region | None = None  # of an existing bucket; defaults to the environment's Region

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = bucket_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value


# An Amazon Managed Prometheus workspace ARN (workspace ids as CloudFormation's AWS::APS::Workspace allows them).
PROMETHEUS_WORKSPACE_ARN = re.compile(
    r"arn:(?P<partition>aws|aws-cn|aws-us-gov):aps:(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d):(?P<account>\d{12}):"
    r"workspace/(?P<id>[a-zA-Z0-9][a-zA-Z0-9-]{1,99})")
PrometheusWorkspaceArn = Annotated[str, pattern(
    PROMETHEUS_WORKSPACE_ARN.pattern, "an Amazon Managed Prometheus workspace ARN such as "
    "'arn:aws:aps:us-west-2:111111111111:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef'")]


class Observability(Model):
    """The HyperPod observability add-on, which carries the DPD metrics (TTFT, TPOT, KV transfer, routing) to dashboards.

    The metrics land in an Amazon Managed Prometheus workspace: one the toolkit creates (encrypted with its own KMS
    key, tagged), or ``prometheus_workspace_arn``, an existing one of the environment's account and Region. ``grafana``
    adds an Amazon Managed Grafana workspace that reads it (IAM Identity Center sign-in).
    """

    enabled: bool = False
    addon_version: str = OBSERVABILITY_ADDON_VERSION
    prometheus_workspace_arn: PrometheusWorkspaceArn | None = None
    grafana: bool = False
    logging: bool = False  # the add-on's CloudWatch Logs shipping (logging.enabled)

    @property
    def prometheus_workspace_id(self) -> str | None:
        """The id of ``prometheus_workspace_arn`` (``ws-...``), or None when the toolkit creates the workspace."""
        match = PROMETHEUS_WORKSPACE_ARN.fullmatch(self.prometheus_workspace_arn or "")
        return match["id"] if match else None

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if not self.enabled:
            for name in ("prometheus_workspace_arn", "grafana", "logging"):
                if getattr(self, name):
                    yield Issue(join(path, name), getattr(self, name), "needs observability.enabled: true")
            return
        match = PROMETHEUS_WORKSPACE_ARN.fullmatch(self.prometheus_workspace_arn or "")
        if match:
            where, value = join(path, "prometheus_workspace_arn"), self.prometheus_workspace_arn
            if match["partition"] != root.partition:
                yield Issue(where, value, f"must be in partition '{root.partition}' (the partition of {root.region})")
            elif match["account"] != root.account or match["region"] != root.region:
                yield Issue(where, value, f"must be a workspace of the environment's account {root.account} and "
                                          f"Region {root.region} (the collector's role may write only there)")
        if self.grafana and root.region not in GRAFANA_REGIONS:
            yield Issue(join(path, "grafana"), self.grafana,
                        f"Amazon Managed Grafana is not offered in {root.region} by the HyperPod set-up; allowed "
                        f"Regions: {', '.join(GRAFANA_REGIONS)}")


class InferenceOperatorConfig(Model):
    version: Annotated[str, quoted_choice(OPERATOR_RELEASES, example=DEFAULT_OPERATOR,
                                          rule=f"must be a known operator release: {', '.join(OPERATOR_RELEASES)}")] \
        = DEFAULT_OPERATOR
    addon_version: str | None = None
    prerequisite_versions: dict[str, str] = Field(default_factory=dict)
    execution_role_name: str | None = None
    tls_bucket_name: str | None = None
    model_buckets: tuple[ModelBucket, ...] = ()
    gated_model_access: bool = False
    observability: Observability = Observability()

    @property
    def release(self) -> OperatorRelease:
        return OPERATOR_RELEASES[self.version]

    @property
    def effective_addon_version(self) -> str:
        """The ``amazon-sagemaker-hyperpod-inference`` add-on version to install."""
        return self.addon_version or self.release.addon_version

    def prerequisite_version(self, name: str) -> str:
        return self.prerequisite_versions.get(name) or next(p.pinned for p in PREREQUISITE_ADDONS if p.name == name)

    def tls_bucket(self, account: str, region: str) -> str:
        return self.tls_bucket_name or f"{TLS_BUCKET_PREFIX}{account}-{region}"

    def execution_role(self, hyperpod_cluster_name: str) -> str:
        return self.execution_role_name or f"{EXECUTION_ROLE_PREFIX}-{hyperpod_cluster_name}"[:64]

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if self.addon_version is not None:
            where = join(path, "addon_version")
            try:
                parsed = parse_addon_version(self.addon_version)
            except ValueError as exc:
                yield Issue(where, self.addon_version, str(exc))
            else:
                if parsed < self.release.addon:
                    yield Issue(where, self.addon_version,
                                f"is older than operator {self.version} ({self.release.addon_version}); "
                                f"set version to the release that add-on belongs to, or a newer add-on")
        yield from addon_version_issues(join(path, "prerequisite_versions"), self.prerequisite_versions,
                                        {p.name: p.minimum_version for p in PREREQUISITE_ADDONS}, kind="prerequisite",
                                        why="the inference operator needs")
        role = self.execution_role(root.hyperpod.cluster_name)
        if not role.startswith(EXECUTION_ROLE_PREFIX) or not re.fullmatch(r"[\w+=,.@-]{1,64}", role):
            yield Issue(join(path, "execution_role_name"), role,
                        f"must start with '{EXECUTION_ROLE_PREFIX}' (the add-on and its managed policy accept only such "
                        "roles) and be a valid IAM role name of at most 64 characters")
        tls = self.tls_bucket(root.account, root.region)
        problem = bucket_name_problem(tls)
        if problem or not tls.startswith(TLS_BUCKET_PREFIX):
            yield Issue(join(path, "tls_bucket_name"), tls,
                        problem or f"must start with '{TLS_BUCKET_PREFIX}' (the operator's managed policy writes only to "
                                   "hyperpod-tls* buckets)")
        yield from self.observability.issues(root, join(path, "observability"))
        names: set[str] = set()
        for index, bucket in enumerate(self.model_buckets):
            where = join(join(path, "model_buckets"), index)
            if bucket.name in names:
                yield Issue(join(where, "name"), bucket.name, "is listed twice")
            names.add(bucket.name)
            if bucket.create and bucket.region not in (None, root.region):
                yield Issue(join(where, "region"), bucket.region, f"a created bucket lives in the environment's Region {root.region}")
            elif (bucket.region or root.region) != root.region:
                yield Issue(join(where, "region"), bucket.region,
                            f"must be the cluster's Region {root.region}: model loads from another Region are slow and "
                            "cost cross-Region transfer")

    @staticmethod
    def dpd_gate(release: OperatorRelease) -> str | None:
        """Why an environment with DPD endpoints cannot run on this operator release, or None."""
        if release.dpd:
            return None
        minimum = OPERATOR_RELEASES[DPD_MINIMUM_OPERATOR]
        return (f"DPD endpoints (pdSpec) need inference operator {DPD_MINIMUM_OPERATOR} or newer; set operator.version "
                f"to '{DPD_MINIMUM_OPERATOR}' or later (add-on amazon-sagemaker-hyperpod-inference "
                f"{minimum.addon_version} or newer)")
