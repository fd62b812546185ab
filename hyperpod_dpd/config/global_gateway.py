"""The global inference gateways (``<config dir>/global.yaml``): one model served from several environments' HyperPod
clusters behind one SageMaker Global Inference Gateway, with failover between them.

Every field and bound is SageMaker's (botocore 1.44.8, ``sagemaker`` service-2, shapes named next to each constant);
the file names environments (files next to it) and their endpoints, never repeats their settings. Like
``pipeline.yaml`` it is not an environment (``hyperpod_dpd.config.loader.RESERVED_NAMES``).

What the API states and the checks hold (botocore 1.44.8, ``GlobalInferenceGatewayMember.ClusterArn``): "The cluster
must be in the same account and partition as the global inference gateway. It can be in a different Region, but not in
an opt-in Region." (the opt-in Region is a preflight check: whether a Region is opt-in is the account's answer,
``hyperpod_dpd/ops/global_preflight.py``). Each member is an in-cluster gateway, "the name of the
``InferenceGatewayConfig`` resource" and its namespace, taken from the member endpoint's gateway tier.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, model_validator

from hyperpod_dpd.catalogue.gateway import DPD_BEHIND_GATEWAY_DOCUMENTED, DPD_GATEWAY_REASON
from hyperpod_dpd.config.base import AccountId, Model, Region, join, pattern
from hyperpod_dpd.config.eks_existing import partition_of
from hyperpod_dpd.config.endpoint_gateway import gateway_reference
from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.config.files import display_path, present
from hyperpod_dpd.config.loader import config_dir as resolve_config_dir
from hyperpod_dpd.config.loader import issues_from_validation, list_environments, load_all, read_yaml
from hyperpod_dpd.errors import ConfigError, Issue

GLOBAL_FILE = "global.yaml"

# botocore 1.44.8, sagemaker service-2, shape GlobalInferenceGatewayName: min 1, max 63,
# pattern [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}; CreateGlobalInferenceGatewayRequest.Name: "can't be exactly 12 lowercase
# letters or digits, because the global inference gateway ID uses that format" (GlobalInferenceGatewayId [a-z0-9]{12}).
GATEWAY_NAME_PATTERN = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
GATEWAY_ID_PATTERN = re.compile(r"[a-z0-9]{12}")
MAX_GATEWAY_NAME = 63
# botocore 1.44.8, shape GlobalInferenceGatewayMembers: min 1, max 10 (CreateGlobalInferenceGatewayRequest.Gateways).
MIN_MEMBERS, MAX_MEMBERS = 1, 10
# botocore 1.44.8, shape GlobalInferenceGatewayRoutingWeight: float, min 0, max 1 (each of KVHeadroom, QueueDepth,
# RegionProximity, ErrorRate in GlobalInferenceGatewayRoutingWeights). That structure: "Specify all four weights or
# none. If you specify them, they must sum to 1.0, within 0.001. If you specify none, the global inference gateway uses
# default weights."
WEIGHT_MIN, WEIGHT_MAX = 0.0, 1.0
WEIGHT_SUM, WEIGHT_SUM_TOLERANCE = 1.0, 0.001
# RoutingWeights' fields -> their member names in GlobalInferenceGatewayRoutingWeights (botocore 1.44.8).
WEIGHT_API = {"kv_headroom": "KVHeadroom", "queue_depth": "QueueDepth", "region_proximity": "RegionProximity",
              "error_rate": "ErrorRate"}
# botocore 1.44.8, shapes GlobalInferenceGatewayKubernetesNamespace (1-63, [a-z0-9]([-a-z0-9]*[a-z0-9])?) and
# GlobalInferenceGatewayKubernetesResourceName (1-253, [a-z0-9]([-a-z0-9.]*[a-z0-9])?).
NAMESPACE_PATTERN, MAX_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"), 63
RESOURCE_NAME_PATTERN, MAX_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"), 253
# The in-cluster load balancer of a member needs subnets in two AZs or more (GlobalRoutingInsufficientAZs:
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-global-inference-gateway.html:
# "The load balancer spans fewer than two Availability Zones"; the subnets carry kubernetes.io/role/internal-elb=1).
MIN_LOAD_BALANCER_ZONES = 2
# The stack and stage of a gateway: hpdpd-global-<name>; CloudFormation stack names hold at most 128 characters.
STAGE_PREFIX = "global-"
STACK_PREFIX = "hpdpd-global-"

GatewayName = Annotated[str, pattern(GATEWAY_NAME_PATTERN, "1-63 letters, digits and hyphens, starting and ending "
                                     "with a letter or digit (botocore GlobalInferenceGatewayName)")]
ExecutionRoleArn = Annotated[str, pattern(r"arn:aws[a-z\-]*:iam::[0-9]{12}:role/[\w+=,.@\-/]{1,1017}",
                                          "an IAM role ARN (botocore GlobalInferenceGatewayExecutionRoleArn)")]
Weight = Annotated[float, Field(ge=WEIGHT_MIN, le=WEIGHT_MAX)]


class RoutingWeights(Model):
    """``Routing.Weights`` of the gateway (botocore 1.44.8, GlobalInferenceGatewayRoutingWeights): all four, summing to
    1.0 within 0.001, or none (SageMaker's default weights). A partial set, or four that do not sum to 1, is refused
    here: the API would refuse the create or update after the rest of the stack was deployed."""

    kv_headroom: Weight | None = None  # KVHeadroom: "the free key-value (KV) cache capacity on the cluster"
    queue_depth: Weight | None = None  # QueueDepth: "the number of requests that are waiting on the cluster"
    region_proximity: Weight | None = None  # RegionProximity: "how close the cluster is to the caller"
    error_rate: Weight | None = None  # ErrorRate: "the recent error rate of the cluster"

    @model_validator(mode="after")
    def _all_or_none(self) -> RoutingWeights:
        given = [value for name in WEIGHT_API if (value := getattr(self, name)) is not None]
        if given and len(given) < len(WEIGHT_API):
            missing = [name for name in WEIGHT_API if getattr(self, name) is None]
            raise ValueError(f"{len(given)} of the 4 weights given, {', '.join(missing)} missing: give all four "
                             "(kv_headroom, queue_depth, region_proximity, error_rate), or none for SageMaker's "
                             "default weights (botocore GlobalInferenceGatewayRoutingWeights)")
        if given and abs(sum(given) - WEIGHT_SUM) > WEIGHT_SUM_TOLERANCE:
            raise ValueError(f"the four weights sum to {sum(given):g}: they must sum to {WEIGHT_SUM:g} within "
                             f"{WEIGHT_SUM_TOLERANCE:g} (botocore GlobalInferenceGatewayRoutingWeights)")
        return self

    def api(self) -> dict[str, float]:
        """The weights as the API names them (all four, or none)."""
        return {api: float(value) for field, api in WEIGHT_API.items() if (value := getattr(self, field)) is not None}


class MemberConfig(Model):
    """One member: an endpoint of an environment, whose in-cluster gateway joins the global gateway."""

    environment: str = Field(description="an environment: the stem of a file in the configuration directory")
    endpoint: str = Field(description="the name of an endpoint of that environment, on the gateway tier")
    region: Region | None = None  # as declared; must then be the environment's Region


class GlobalGatewayConfig(Model):
    """One global inference gateway, created in ``account``/``region`` (its home), with its members."""

    name: GatewayName
    account: AccountId
    region: Region
    weights: RoutingWeights = RoutingWeights()
    # None: the stack creates the execution role (infra/global_gateway.py); else this role, in the home account.
    execution_role_arn: ExecutionRoleArn | None = None
    members: tuple[MemberConfig, ...] = Field(min_length=MIN_MEMBERS, max_length=MAX_MEMBERS)

    @property
    def partition(self) -> str:
        return partition_of(self.region)

    @property
    def stage_id(self) -> str:
        return f"{STAGE_PREFIX}{self.name}"

    @property
    def stack_name(self) -> str:
        return f"{STACK_PREFIX}{self.name}"

    @property
    def member_environments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.environment for m in self.members))


class GlobalConfig(Model):
    gateways: tuple[GlobalGatewayConfig, ...] = Field(min_length=1)

    def issues(self, root: Any = None, path: str = "") -> Iterator[Issue]:
        names: dict[str, int] = {}
        claimed: dict[tuple[str, str], str] = {}
        for i, gateway in enumerate(self.gateways):
            where = join("gateways", i)
            if GATEWAY_ID_PATTERN.fullmatch(gateway.name):
                yield Issue(join(where, "name"), gateway.name, "must not be exactly 12 lowercase letters or digits: "
                            "SageMaker reads that as a gateway ID (botocore CreateGlobalInferenceGatewayRequest.Name)")
            # SageMaker wants a name unique per account and Region; the toolkit's stage (global-<name>) and stack
            # (hpdpd-global-<name>) are named after it alone, so it is unique in the file.
            if gateway.name in names:
                yield Issue(join(where, "name"), gateway.name, f"listed twice (first at gateways[{names[gateway.name]}]); "
                            f"each gateway is the stage {gateway.stage_id} and the stack {gateway.stack_name}, so a "
                            "name is used once in global.yaml, whatever its account and Region")
            names.setdefault(gateway.name, i)
            role = gateway.execution_role_arn
            if role and (role.split(":")[4] != gateway.account or role.split(":")[1] != gateway.partition):
                yield Issue(join(where, "execution_role_arn"), role,
                            f"must be a role in the gateway's account {gateway.account} and partition "
                            f"{gateway.partition} (botocore CreateGlobalInferenceGatewayRequest.ExecutionRoleArn: in "
                            "your account and partition)")
            for j, member in enumerate(gateway.members):
                ref = (member.environment, member.endpoint)
                if ref in claimed:
                    yield Issue(join(join(where, "members"), j), f"{member.environment}/{member.endpoint}",
                                f"already a member of {claimed[ref]}; an in-cluster gateway belongs to one global "
                                "gateway only (botocore AddInferenceGateway: ResourceInUse)")
                claimed.setdefault(ref, gateway.name)


def _gateway_reference(endpoint: Any) -> tuple[str, str] | str:
    """(namespace, name) of the endpoint's in-cluster gateway (``InferenceGatewayConfig``), or why there is none."""
    if endpoint.routing.tier != "gateway":
        reason = "" if DPD_BEHIND_GATEWAY_DOCUMENTED else f", which a DPD endpoint cannot use yet: {DPD_GATEWAY_REASON}"
        return f"does not use the gateway tier (routing.tier: gateway){reason}"
    return gateway_reference(endpoint)


def member_reference(gateway: GlobalGatewayConfig, member: MemberConfig, env: EnvironmentConfig,
                     ) -> tuple[str, str] | str:
    """The member's in-cluster gateway (namespace, name), or the one reason it cannot be a member."""
    if env.account != gateway.account or env.partition != gateway.partition:
        return (f"is in account {env.account} ({env.partition}); the gateway {gateway.name} in {gateway.account} "
                f"({gateway.partition}): members must be in the gateway's account and partition (botocore "
                "GlobalInferenceGatewayMember.ClusterArn)")
    if member.region is not None and member.region != env.region:
        return f"declared in {member.region}, but environment {env.name} is in {env.region}"
    endpoint = next((e for e in env.endpoints if e.name == member.endpoint), None)
    if endpoint is None:
        names = ", ".join(e.name for e in env.endpoints) or "none"
        return f"environment {env.name} declares no endpoint {member.endpoint!r}; its endpoints: {names}"
    zones = load_balancer_zones(env)
    if len(zones) < MIN_LOAD_BALANCER_ZONES:
        return (f"environment {env.name} has load-balancer subnets in {len(zones)} AZ ({', '.join(zones) or 'none'}); "
                f"the in-cluster load balancer needs {MIN_LOAD_BALANCER_ZONES} or more (GlobalRoutingInsufficientAZs)")
    reference = _gateway_reference(endpoint)
    if isinstance(reference, str):
        return reference
    namespace, name = reference
    if len(namespace) > MAX_NAMESPACE or not NAMESPACE_PATTERN.fullmatch(namespace):
        return f"its gateway namespace {namespace!r} is not a Kubernetes namespace SageMaker accepts (1-63, [a-z0-9-])"
    if len(name) > MAX_RESOURCE_NAME or not RESOURCE_NAME_PATTERN.fullmatch(name):
        return f"its gateway name {name!r} is not a resource name SageMaker accepts (1-253, [a-z0-9.-])"
    return namespace, name


def load_balancer_zones(env: EnvironmentConfig) -> tuple[str, ...]:
    """The AZs of the subnets an in-cluster load balancer can use: the created VPC's private subnets (one per AZ, each
    tagged ``kubernetes.io/role/internal-elb``, infra/efa_network.py), or the adopted private subnets (whose tags
    preflight reads)."""
    network = env.network
    if network.create:
        return tuple(sorted(set(network.create.availability_zones)))
    assert network.existing
    return tuple(sorted({s.availability_zone for s in network.existing.private_subnets}))


def global_issues(config: GlobalConfig, available: Sequence[str],
                  loaded: Mapping[str, EnvironmentConfig]) -> Iterator[Issue]:
    """Each member against its environment file."""
    for i, gateway in enumerate(config.gateways):
        if gateway.stage_id in available:
            yield Issue(join(join("gateways", i), "name"), gateway.name,
                        f"its stage {gateway.stage_id} is also the stage of environment {gateway.stage_id} (file "
                        f"{gateway.stage_id}.yaml); rename the gateway or the environment")
        clusters: dict[tuple[str, str, str], int] = {}
        for j, member in enumerate(gateway.members):
            where = join(join(join("gateways", i), "members"), j)
            if member.environment not in available:
                yield Issue(join(where, "environment"), member.environment,
                            f"no such environment; allowed: {', '.join(available) or 'none'}")
                continue
            env = loaded.get(member.environment)
            if env is None:
                continue
            reference = member_reference(gateway, member, env)
            if isinstance(reference, str):
                yield Issue(join(where, "endpoint"), member.endpoint, reference)
                continue
            key = (env.region, env.hyperpod.cluster_name, "/".join(reference))
            if key in clusters:
                yield Issue(join(where, "endpoint"), member.endpoint,
                            f"names the same in-cluster gateway {'/'.join(reference)} of cluster "
                            f"{env.hyperpod.cluster_name} as members[{clusters[key]}]")
            clusters.setdefault(key, j)


def global_file(config_dir: Path | None = None) -> Path:
    return resolve_config_dir(config_dir) / GLOBAL_FILE


def has_global(config_dir: Path | None = None) -> bool:
    return present(global_file(config_dir))


def read_global(config_dir: Path | None = None) -> GlobalConfig:
    """``global.yaml`` on its own: types, bounds, names, duplicates, and that each member environment exists."""
    path = global_file(config_dir)
    source = display_path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError.single(source, "<root>", data, "must be a mapping with 'gateways', a list of global "
                                 "inference gateways")
    try:
        config = GlobalConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, issues_from_validation(exc, GlobalConfig)) from None
    available = list_environments(config_dir)
    problems = [*config.issues(), *global_issues(config, available, {})]
    if problems:
        raise ConfigError(source, problems)
    return config


def load_global(config_dir: Path | None = None, *,
                environments: Sequence[EnvironmentConfig] | None = None) -> GlobalConfig:
    """Load and check ``global.yaml`` against the environments it names (loaded from their files unless given)."""
    config = read_global(config_dir)
    given = {e.name: e for e in environments or ()}
    wanted = [n for g in config.gateways for n in g.member_environments]
    missing = sorted({n for n in wanted if n not in given})
    loaded = {**given, **{e.name: e for e in (load_all(config_dir, missing) if missing else [])}}
    problems = list(global_issues(config, list_environments(config_dir), loaded))
    if problems:
        raise ConfigError(display_path(global_file(config_dir)), problems)
    return config


def members(gateway: GlobalGatewayConfig, loaded: Mapping[str, EnvironmentConfig],
            ) -> list[tuple[EnvironmentConfig, str, str]]:
    """(environment, namespace, name) of each member of a checked gateway."""
    out = []
    for member in gateway.members:
        env = loaded[member.environment]
        reference = member_reference(gateway, member, env)
        assert not isinstance(reference, str), reference  # load_global refused it
        out.append((env, *reference))
    return out
