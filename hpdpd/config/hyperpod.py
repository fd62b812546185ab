"""HyperPod section: the SageMaker HyperPod cluster and its prefill, decode and system instance groups."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, INSTANCE_TYPES, SYSTEM_INSTANCE_TYPES
from hyperpod_dpd.catalogue.versions import HYPERPOD_CHART_VERSION
from hyperpod_dpd.config.base import AvailabilityZone, Model, ResourceName, join
from hyperpod_dpd.errors import Issue
from pydantic import Field, field_validator, model_validator

Role = Literal["prefill", "decode", "system"]
GPU_ROLES: frozenset[str] = frozenset({"prefill", "decode"})
DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# Label keys the toolkit sets itself so endpoints can select prefill and decode nodes.
ROLE_LABEL = "hyperpod-dpd/role"
GROUP_LABEL = "hyperpod-dpd/instance-group"


class Taint(Model):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not _LABEL_KEY.match(value) or len(value) > 316:
            raise ValueError("must be a Kubernetes label key such as 'example.com/pool'")
        return value


class InstanceGroup(Model):
    name: ResourceName
    role: Role
    instance_type: str
    count: int = Field(ge=1, le=6758)
    min_count: int | None = Field(default=None, ge=0, le=6758)
    ebs_volume_gb: int = Field(default=500, ge=1, le=16384)
    deep_health_checks: tuple[DeepHealthCheck, ...] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    training_plan_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[a-zA-Z0-9-]+$")
    availability_zone: AvailabilityZone | None = None
    threads_per_core: Literal[1, 2] | None = None

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if value not in INSTANCE_TYPES:
            raise ValueError(f"is not a HyperPod instance type known to hyperpod-dpd; allowed: {', '.join(INSTANCE_TYPES)}")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            if not _LABEL_KEY.match(key):
                raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
            if not _LABEL_VALUE.match(str(label)):
                raise ValueError(f"label value {label!r} of {key!r} is not a valid Kubernetes label value")
            if key in (ROLE_LABEL, GROUP_LABEL):
                raise ValueError(f"label {key!r} is set by hyperpod-dpd from the group's role and name")
        return value

    @model_validator(mode="after")
    def _min_count(self) -> InstanceGroup:
        if self.min_count is not None and self.min_count > self.count:
            raise ValueError(f"min_count ({self.min_count}) must not exceed count ({self.count})")
        return self

    @property
    def is_gpu(self) -> bool:
        return self.role in GPU_ROLES

    @property
    def effective_deep_health_checks(self) -> tuple[str, ...]:
        """GPU groups run both deep health checks unless told otherwise; CPU groups cannot run them."""
        if self.deep_health_checks is not None:
            return self.deep_health_checks
        return ("InstanceStress", "InstanceConnectivity") if self.is_gpu else ()

    @property
    def node_labels(self) -> dict[str, str]:
        return {**self.labels, ROLE_LABEL: self.role, GROUP_LABEL: self.name}

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        spec = INSTANCE_TYPES[self.instance_type]
        if self.is_gpu and self.instance_type not in DPD_INSTANCE_TYPES:
            yield Issue(join(path, "instance_type"), self.instance_type,
                        f"a {self.role} group needs a DPD-capable EFA GPU type; allowed: {', '.join(DPD_INSTANCE_TYPES)}")
        if self.role == "system" and self.instance_type not in SYSTEM_INSTANCE_TYPES:
            yield Issue(join(path, "instance_type"), self.instance_type,
                        "a system group takes an x86_64 CPU type; allowed: " + ", ".join(SYSTEM_INSTANCE_TYPES))
        if self.deep_health_checks and not spec.is_gpu:
            yield Issue(join(path, "deep_health_checks"), list(self.deep_health_checks),
                        "deep health checks run only on GPU instances; remove them from CPU groups")
        if root.region not in spec.priced_regions and not self.training_plan_arn:
            if spec.is_gpu:
                offered = ", ".join(sorted(spec.priced_regions)) or "no Region; capacity blocks only"
                yield Issue(join(path, "training_plan_arn"), None,
                            f"{self.instance_type} is not offered on demand in {root.region}; set a training plan ARN "
                            f"(on demand in: {offered})")
            else:
                yield Issue(join(path, "instance_type"), self.instance_type,
                            f"is not offered for HyperPod in {root.region}; choose another system type")
        if self.training_plan_arn and f":{root.region}:" not in self.training_plan_arn:
            yield Issue(join(path, "training_plan_arn"), self.training_plan_arn, f"must be a training plan in {root.region}")


class DependenciesChart(Model):
    """Where the HyperPod dependencies Helm chart comes from: an OCI mirror, or a local directory shipped as an asset."""

    repository: str | None = Field(default=None, pattern=r"^oci://[a-z0-9.-]+(:\d+)?(/[a-z0-9._/-]+)?$")
    version: str = HYPERPOD_CHART_VERSION
    local_path: str | None = None
    timeout_minutes: int = Field(default=15, ge=1, le=15)

    @model_validator(mode="after")
    def _one_source(self) -> DependenciesChart:
        if (self.repository is None) == (self.local_path is None):
            raise ValueError("set exactly one of 'repository' (an oci:// mirror) or 'local_path' (a chart directory)")
        return self

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if self.local_path is not None:
            chart = root.resolve_path(self.local_path) / "Chart.yaml"
            if not chart.is_file():
                yield Issue(join(path, "local_path"), self.local_path,
                            f"must be a chart directory containing Chart.yaml (looked for {chart}); "
                            "run 'make vendor-chart' or use an oci:// repository")


class HyperPodConfig(Model):
    cluster_name: ResourceName
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    node_provisioning_mode: Literal["Continuous"] | None = "Continuous"
    dependencies_chart: DependenciesChart
    lifecycle_bucket_name: str | None = None
    instance_groups: tuple[InstanceGroup, ...] = Field(min_length=1, max_length=100)

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        yield from self.dependencies_chart.issues(root, join(path, "dependencies_chart"))
        groups_path = join(path, "instance_groups")
        seen: dict[str, int] = {}
        for index, group in enumerate(self.instance_groups):
            where = join(groups_path, index)
            yield from group.issues(root, where)
            if group.name in seen:
                yield Issue(join(where, "name"), group.name,
                            f"duplicate instance group name (also instance_groups[{seen[group.name]}]); names must be unique")
            seen.setdefault(group.name, index)
            zone = group.availability_zone
            if zone is None:
                continue  # the GPU subnet's AZ, validated by the network section
            if group.is_gpu and zone != root.network.gpu_availability_zone:
                yield Issue(join(where, "availability_zone"), zone,
                            f"GPU groups must share one AZ for EFA KV transfer: network.gpu_availability_zone "
                            f"({root.network.gpu_availability_zone}), the AZ of the GPU subnet")
            elif zone != root.network.gpu_availability_zone:
                yield Issue(join(where, "availability_zone"), zone,
                            f"must be network.gpu_availability_zone ({root.network.gpu_availability_zone}): every "
                            "instance group runs in the GPU subnet, and prefill and decode must share its AZ")
        roles = {g.role for g in self.instance_groups}
        for needed in ("prefill", "decode"):
            if needed not in roles:
                yield Issue(groups_path, [g.name for g in self.instance_groups],
                            f"needs at least one '{needed}' group for disaggregated serving")
        if self.lifecycle_bucket_name is not None:
            name = self.lifecycle_bucket_name
            if not name.startswith("sagemaker-") or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", name):
                yield Issue(join(path, "lifecycle_bucket_name"), name,
                            "must be a valid S3 bucket name (3-63 lower-case characters) starting with 'sagemaker-' "
                            "(the HyperPod instance policy reads only sagemaker-* buckets)")

    def groups(self, role: str) -> tuple[InstanceGroup, ...]:
        return tuple(g for g in self.instance_groups if g.role == role)

    def lifecycle_bucket(self, account: str, region: str) -> str:
        """The lifecycle-script bucket name: configured, or derived and kept within S3's 63 characters."""
        if self.lifecycle_bucket_name:
            return self.lifecycle_bucket_name
        suffix = f"-{account}-{region}"
        return f"sagemaker-{self.cluster_name.lower()}"[: 63 - len(suffix)].rstrip("-") + suffix
