"""HyperPod section: the SageMaker HyperPod cluster and its prefill, decode and system instance groups."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, INSTANCE_TYPES, SYSTEM_INSTANCE_TYPES
from hyperpod_dpd.catalogue.kv_tiers import TIERED_STORAGE_PERCENT_MAX, TIERED_STORAGE_PERCENT_MIN
from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.config.base import AvailabilityZoneRef, Model, join
from hyperpod_dpd.config.dependencies_chart import DependenciesChart
from hyperpod_dpd.config.names import (
    HyperPodClusterName,
    InstanceGroupName,
    bucket_name_problem,
    label_key_problem,
    label_value_problem,
)
from hyperpod_dpd.errors import Issue

Role = Literal["prefill", "decode", "system"]
GPU_ROLES: frozenset[str] = frozenset(DPD_ROLES)
DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]

MAX_INSTANCES = 6758  # InstanceCount and MinInstanceCount of AWS::SageMaker::Cluster: 0-6758
# Label keys the toolkit sets itself so endpoints can select prefill and decode nodes.
ROLE_LABEL = "hyperpod-dpd/role"
GROUP_LABEL = "hyperpod-dpd/instance-group"
# Label domains a Karpenter NodePool (karpenter.sh/v1) refuses in spec.template.metadata.labels, with the keys and
# subdomains it still allows (CEL rules of the NodePool CRD, kubernetes-sigs/karpenter v1.0.0).
KARPENTER_RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh")
KARPENTER_ALLOWED_LABELS = frozenset({
    "beta.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region", "kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/windows-build",
    "karpenter.sh/capacity-type"})
KARPENTER_ALLOWED_SUBDOMAINS = ("node.kubernetes.io", "node-restriction.kubernetes.io", "kops.k8s.io")


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _taint_key(value: str) -> str:
    problem = label_key_problem(value)
    if problem:
        raise ValueError(f"must be a Kubernetes taint key such as 'example.com/pool' ({problem})")
    return value


TaintKey = Annotated[str, AfterValidator(_taint_key)]  # of taints and of the tolerations that match them


class Taint(Model):
    key: TaintKey
    value: str | None = None
    effect: TaintEffect = "NoSchedule"

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None, info: ValidationInfo) -> str | None:
        problem = None if value is None else label_value_problem(info.data.get("key", "key"), value)
        if problem:
            raise ValueError(f"must be a Kubernetes taint value ({problem})")
        return value


def karpenter_label_problem(key: str) -> str | None:
    """Why a Karpenter NodePool cannot carry node label ``key`` (a restricted domain), or None."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    if key in KARPENTER_ALLOWED_LABELS or domain.endswith(KARPENTER_ALLOWED_SUBDOMAINS):
        return None
    restricted = next((d for d in KARPENTER_RESTRICTED_DOMAINS if domain.endswith(d)), None)
    return f"label domain {restricted!r} is restricted on Karpenter NodePools" if restricted else None


class ClusterAutoScaling(Model):
    """``hyperpod.autoscaling``: HyperPod-managed Karpenter (``AutoScaling`` of ``AWS::SageMaker::Cluster``, autoscaler
    type Karpenter) with the cluster role it assumes. ``enabled: false`` renders mode ``Disable`` and keeps the role
    (HyperPod does not let the role change while autoscaling is on, so switching off keeps it in place)."""

    enabled: bool = True
    # How long a node must be empty before Karpenter removes it (NodePool disruption.consolidateAfter)
    consolidate_after_minutes: int = Field(default=10, ge=1, le=1440)


class GroupAutoScaling(Model):
    """``autoscaling`` of one prefill or decode group: Karpenter runs 0 to ``max_nodes`` nodes of it.

    ``max_nodes`` caps the group (the limits of its NodePool). ``min_nodes`` is the floor the group's endpoints must
    hold: Karpenter removes only empty nodes, so the nodes that stay are the ones the endpoints' minimum replicas
    occupy, and the config is refused when those occupy fewer than ``min_nodes``. It is not a warm pool.
    """

    min_nodes: int = Field(default=0, ge=0, le=MAX_INSTANCES)
    max_nodes: int = Field(ge=1, le=MAX_INSTANCES)

    @field_validator("max_nodes")
    @classmethod
    def _max_nodes(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_nodes")
        if low is not None and value < low:
            raise ValueError(f"must be at least min_nodes ({low})")
        return value


class TieredStorage(Model):
    """``hyperpod.tiered_storage``: the cluster's ``TieredStorageConfig`` (``AWS::SageMaker::Cluster``), the memory
    daemon behind the managed ``tieredstorage`` L2 KV cache (hyperpod_dpd.catalogue.kv_tiers). ``enabled: false``
    renders mode ``Disable``, which removes the daemon; ``memory_percent`` is ``InstanceMemoryAllocationPercentage``
    (0-100, the CloudFormation schema), the share of each instance's memory the tier takes. Both update the cluster
    in place (neither is create-only)."""

    enabled: bool = True
    memory_percent: int | None = Field(default=None, ge=TIERED_STORAGE_PERCENT_MIN, le=TIERED_STORAGE_PERCENT_MAX)

    @model_validator(mode="after")
    def _stated(self) -> TieredStorage:
        if self.enabled and self.memory_percent is None:
            raise ValueError("set memory_percent, the share of instance memory the tier takes "
                             f"(InstanceMemoryAllocationPercentage, {TIERED_STORAGE_PERCENT_MIN}-"
                             f"{TIERED_STORAGE_PERCENT_MAX}); AWS documents no default")
        return self

    @property
    def mode(self) -> Literal["Enable", "Disable"]:
        return "Enable" if self.enabled else "Disable"

    @property
    def provides_memory(self) -> bool:
        """Whether the cluster runs the tier with memory of its own (a ``tieredstorage`` L2 needs it)."""
        return self.enabled and bool(self.memory_percent)


def allowed_types(role: str | None) -> tuple[str, Mapping[str, Any]]:
    """What a group of ``role`` may run (``<rule>; allowed: <types>``); every known type when the role is invalid."""
    if role in GPU_ROLES:
        return f"a {role} group needs a DPD-capable EFA GPU type", DPD_INSTANCE_TYPES
    if role == "system":
        return "a system group takes an x86_64 CPU type", SYSTEM_INSTANCE_TYPES
    return "", INSTANCE_TYPES


class InstanceGroup(Model):
    """One HyperPod instance group. ``count: 0`` parks a prefill or decode group: the group (and its settings) stays
    in the cluster with no instances, until its count is raised again. A system group always keeps a node.

    With ``autoscaling`` (and ``hyperpod.autoscaling`` enabled) HyperPod's Karpenter sizes a prefill or decode group
    between 0 and ``autoscaling.max_nodes`` for the pods that are pending; ``count`` must then be 0 (the group starts
    empty) and the group is not parked. To park an autoscaled group, remove its ``autoscaling``."""

    name: InstanceGroupName
    role: Role
    instance_type: str
    count: int = Field(ge=0, le=MAX_INSTANCES)
    min_count: int | None = Field(default=None, ge=0, le=MAX_INSTANCES)
    ebs_volume_gb: int = Field(default=500, ge=1, le=16384)
    deep_health_checks: tuple[DeepHealthCheck, ...] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    training_plan_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[a-zA-Z0-9-]+$")
    availability_zone: AvailabilityZoneRef | None = None  # name or ID; must be the GPU zone (below)
    threads_per_core: Literal[1, 2] | None = None
    autoscaling: GroupAutoScaling | None = None

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str, info: ValidationInfo) -> str:
        if value in INSTANCE_TYPES:
            return value  # a known type of the wrong role: reported by issues() with the role's types
        rule, allowed = allowed_types(info.data.get("role"))
        meant = next((t for t in allowed if t.removeprefix("ml.") == value.strip().lower().removeprefix("ml.")), None)
        hint = f" (did you mean {meant!r}?)" if meant else ""
        why = "; ".join(part for part in (f"is not a HyperPod instance type known to hyperpod-dpd{hint}", rule) if part)
        raise ValueError(f"{why}; allowed: {', '.join(allowed)}")

    @field_validator("count")
    @classmethod
    def _system_keeps_a_node(cls, value: int, info: ValidationInfo) -> int:
        if value == 0 and info.data.get("role") == "system":
            raise ValueError("a system group must keep at least 1 node; only prefill and decode groups can be parked "
                             "with count 0")
        return value

    @field_validator("min_count")
    @classmethod
    def _min_count(cls, value: int | None, info: ValidationInfo) -> int | None:
        count = info.data.get("count")
        if value is not None and count is not None and value > count:
            raise ValueError(f"must not exceed count ({count})")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            problem = label_key_problem(key) or label_value_problem(key, label)
            if problem:
                raise ValueError(problem)
            if key in (ROLE_LABEL, GROUP_LABEL):
                raise ValueError(f"label {key!r} is set by hyperpod-dpd from the group's role and name")
        return value

    @property
    def parked(self) -> bool:
        """A GPU group kept at count 0 without autoscaling: in the cluster, with no instances (and no room for
        endpoints)."""
        return self.count == 0 and self.autoscaling is None

    @property
    def autoscaled(self) -> bool:
        """Sized by HyperPod's Karpenter between 0 and ``autoscaling.max_nodes``."""
        return self.autoscaling is not None

    @property
    def max_nodes(self) -> int:
        """The most nodes the group can run: ``autoscaling.max_nodes``, else ``count`` (0 when parked)."""
        return self.autoscaling.max_nodes if self.autoscaling is not None else self.count

    @property
    def is_gpu(self) -> bool:
        return self.role in GPU_ROLES

    @property
    def effective_deep_health_checks(self) -> tuple[str, ...]:
        """GPU groups run both deep health checks unless told otherwise; CPU groups cannot run them, and neither can
        autoscaled groups (Karpenter autoscaling does not support deep health checks)."""
        if self.deep_health_checks is not None:
            return self.deep_health_checks
        return ("InstanceStress", "InstanceConnectivity") if self.is_gpu and not self.autoscaled else ()

    @property
    def node_labels(self) -> dict[str, str]:
        return {**self.labels, ROLE_LABEL: self.role, GROUP_LABEL: self.name}

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        spec = INSTANCE_TYPES[self.instance_type]
        rule, allowed = allowed_types(self.role)
        if self.instance_type not in allowed:
            yield Issue(join(path, "instance_type"), self.instance_type, f"{rule}; allowed: {', '.join(allowed)}")
        if self.deep_health_checks and not spec.is_gpu:
            yield Issue(join(path, "deep_health_checks"), list(self.deep_health_checks),
                        "deep health checks run only on GPU instances; remove them from CPU groups")
        if self.autoscaling is not None:
            yield from self._autoscaling_issues(root, path)
        elif root.region not in spec.priced_regions and not self.training_plan_arn:
            if spec.is_gpu:
                offered = ", ".join(sorted(spec.priced_regions)) or "no Region; capacity blocks only"
                yield Issue(join(path, "training_plan_arn"), self.given("training_plan_arn"),
                            f"{self.instance_type} is not offered on demand in {root.region}; set a training plan ARN "
                            f"(on demand in: {offered})")
            else:
                yield Issue(join(path, "instance_type"), self.instance_type,
                            f"is not offered for HyperPod in {root.region}; choose another system type")
        if self.training_plan_arn and f":{root.region}:" not in self.training_plan_arn:
            yield Issue(join(path, "training_plan_arn"), self.training_plan_arn, f"must be a training plan in {root.region}")

    def _autoscaling_issues(self, root: Any, path: str) -> Iterator[Issue]:
        """What HyperPod's Karpenter autoscaling supports (SageMaker HyperPod docs, "Autoscaling on SageMaker
        HyperPod EKS" and "Create a NodeClass"): on-demand groups that start at 0 nodes, without deep health checks."""
        where = join(path, "autoscaling")
        if self.role == "system":
            yield Issue(where, self.autoscaling.model_dump() if self.autoscaling else None,
                        "the system group keeps a fixed count (it runs the controllers that scale the others); "
                        "autoscaling applies to prefill and decode groups")
            return
        cluster = root.hyperpod.autoscaling
        if cluster is None or not cluster.enabled:
            yield Issue(where, self.autoscaling.model_dump() if self.autoscaling else None,
                        "needs hyperpod.autoscaling.enabled: true (HyperPod-managed Karpenter)")
        if self.count:
            yield Issue(join(path, "count"), self.count,
                        "must be 0 for an autoscaled group: HyperPod's Karpenter starts the group empty and scales any "
                        "initial nodes down to 0; autoscaling.min_nodes and max_nodes bound it")
        if self.deep_health_checks:
            yield Issue(join(path, "deep_health_checks"), list(self.deep_health_checks),
                        "an autoscaled group cannot run deep health checks (they take 60-90 minutes while pods stay "
                        "pending); remove them, or remove autoscaling")
        if self.training_plan_arn:
            yield Issue(join(path, "training_plan_arn"), self.training_plan_arn,
                        "autoscaling uses on-demand capacity only; a group with a training plan cannot autoscale")
        elif root.region not in INSTANCE_TYPES[self.instance_type].priced_regions:
            yield Issue(join(path, "instance_type"), self.instance_type,
                        f"is not offered on demand in {root.region}, and autoscaling uses on-demand capacity only")
        for key in self.labels:
            problem = karpenter_label_problem(key)
            if problem:
                yield Issue(join(join(path, "labels"), key), self.labels[key],
                            f"{problem} (the group's NodePool carries its labels); use another label domain")


class HyperPodConfig(Model):
    cluster_name: HyperPodClusterName
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    node_provisioning_mode: Literal["Continuous"] | None = "Continuous"
    dependencies_chart: DependenciesChart
    lifecycle_bucket_name: str | None = None
    autoscaling: ClusterAutoScaling | None = None
    tiered_storage: TieredStorage | None = None  # the managed L2 KV tier's memory (docs/kv-cache.md)
    instance_groups: tuple[InstanceGroup, ...] = Field(min_length=1, max_length=100)

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        yield from self.dependencies_chart.issues(root, join(path, "dependencies_chart"))
        yield from self._autoscaling_issues(root, path)
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
            if root.network.is_gpu_zone(zone):
                continue
            rule, hint = root.network.gpu_zone_rule(), root.network.gpu_zone_form_hint()
            if group.is_gpu:
                yield Issue(join(where, "availability_zone"), zone,
                            f"GPU groups must share one AZ for EFA KV transfer: {rule}, the AZ of the GPU subnet{hint}")
            else:
                yield Issue(join(where, "availability_zone"), zone,
                            f"must be {rule}: every instance group runs in the GPU subnet, and prefill and decode "
                            f"must share its AZ{hint}")
        roles = {g.role for g in self.instance_groups}
        for needed in ("prefill", "decode"):
            if needed not in roles:
                yield Issue(groups_path, [g.name for g in self.instance_groups],
                            f"needs at least one '{needed}' group for disaggregated serving")
        if self.lifecycle_bucket_name is not None:
            name = self.lifecycle_bucket_name
            problem = bucket_name_problem(name)
            if problem or not name.startswith("sagemaker-"):
                yield Issue(join(path, "lifecycle_bucket_name"), name,
                            problem or "must be a valid S3 bucket name starting with 'sagemaker-' (the HyperPod "
                                       "instance policy reads only sagemaker-* buckets)")

    def _autoscaling_issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Karpenter autoscaling needs continuous provisioning and automatic node recovery (HyperPod docs,
        "Autoscaling on SageMaker HyperPod EKS", prerequisites); the shared capacity of autoscaled groups is checked
        against the endpoints in :mod:`hyperpod_dpd.config.capacity`."""
        if self.autoscaling is None or not self.autoscaling.enabled:
            return
        if self.node_provisioning_mode != "Continuous":
            yield Issue(join(path, "node_provisioning_mode"), self.node_provisioning_mode,
                        "must be 'Continuous' when hyperpod.autoscaling is enabled (Karpenter autoscaling builds on "
                        "continuous provisioning)")
        if self.node_recovery != "Automatic":
            yield Issue(join(path, "node_recovery"), self.node_recovery,
                        "must be 'Automatic' when hyperpod.autoscaling is enabled")
        seen: dict[str, str] = {}
        for index, group in enumerate(self.instance_groups):
            if group.autoscaled and group.role != "system":
                other = seen.setdefault(group.name.lower(), group.name)
                if other != group.name:
                    yield Issue(join(join(join(path, "instance_groups"), index), "name"), group.name,
                                f"differs from autoscaled group '{other}' only in case; their Karpenter resources "
                                "(lower-case Kubernetes names) would collide")

    def groups(self, role: str) -> tuple[InstanceGroup, ...]:
        return tuple(g for g in self.instance_groups if g.role == role)

    def lifecycle_bucket(self, account: str, region: str) -> str:
        """The lifecycle-script bucket name: configured, or derived and kept within S3's 63 characters."""
        if self.lifecycle_bucket_name:
            return self.lifecycle_bucket_name
        suffix = f"-{account}-{region}"
        return f"sagemaker-{self.cluster_name.lower()}"[: 63 - len(suffix)].rstrip("-") + suffix
