"""``eks.existing``: an adopted cluster's keys, what is derived from them, and one line per problem."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.config.eks_existing import partition_of
from hyperpod_dpd.errors import ConfigError, render_value

OIDC_ARN = "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
EXISTING: dict[str, Any] = {
    "cluster_name": "platform_shared",  # EKS names may hold underscores
    "version": "1.34",
    "oidc_provider_arn": OIDC_ARN,
    "kubectl_role_arn": "arn:aws:iam::111111111111:role/platform/eks-kubectl",
    "cluster_security_group_id": "sg-0123456789abcdef0",
    "network_policy_enforced": True,  # dev's endpoint renders NetworkPolicies (test_eks_network_policy.py)
}


def _parse(base_configs: dict[str, dict[str, Any]], mutate: Callable[[dict[str, Any]], None], env: str = "dev") -> EnvironmentConfig:
    data = copy.deepcopy(base_configs[env])
    mutate(data)
    return parse_environment(data, name=env, source=f"{env}.yaml", base_dir=Path.cwd())


def _adopt(eks: dict[str, Any] | None = None, **existing: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["eks"] = {**(eks or {}), "existing": {**EXISTING, **existing}}
    return mutate


def test_an_adopted_cluster_gives_its_name_and_version_to_the_eks_section(base_configs) -> None:
    # GIVEN dev adopting a cluster, with no other eks key
    env = _parse(base_configs, _adopt())
    # THEN the cluster name and version come from existing, and nothing counts as written but existing
    assert (env.eks.cluster_name, env.eks.version) == ("platform_shared", "1.34")
    assert env.eks.model_fields_set == {"existing"}
    assert env.eks.existing is not None and env.eks.existing.manage_addons == ()
    assert env.eks.existing.oidc_issuer == "oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
    # AND the public endpoint CIDRs, which the toolkit does not manage, are empty rather than 0.0.0.0/0
    assert env.eks.public_access_cidrs == ()


def test_the_same_name_and_version_may_be_written_twice(base_configs) -> None:
    env = _parse(base_configs, _adopt({"cluster_name": "platform_shared", "version": "1.34"}))
    assert (env.eks.cluster_name, env.eks.version) == ("platform_shared", "1.34")


def test_admin_principals_and_overrides_of_opted_in_addons_apply_to_an_adopted_cluster(base_configs) -> None:
    eks = {"admin_principals": ["arn:aws:iam::111111111111:role/PlatformAdmin"],
           "addon_versions": {"vpc-cni": "v1.20.4-eksbuild.2"}}
    env = _parse(base_configs, _adopt(eks, manage_addons=["vpc-cni", "coredns"],
                                      kubectl_private_subnet_ids=["subnet-0123456789abcdef0"],
                                      kubectl_security_group_id="sg-0123456789abcdef1"))
    assert env.eks.existing is not None and env.eks.existing.manage_addons == ("vpc-cni", "coredns")
    assert env.eks.addon_version("vpc-cni") == "v1.20.4-eksbuild.2"


def test_a_production_environment_may_adopt_a_cluster_without_endpoint_settings(base_configs) -> None:
    # GIVEN prod (production: true) adopting a cluster of its account and Region
    existing = {"oidc_provider_arn": OIDC_ARN.replace("111111111111", "333333333333").replace("us-west-2", "us-east-1"),
                "kubectl_role_arn": "arn:aws:iam::333333333333:role/eks-kubectl"}
    env = _parse(base_configs, _adopt(**existing), env="prod")
    # THEN the production rule on open endpoints has nothing to object to
    assert env.production and env.eks.public_access_cidrs == ()


@pytest.mark.parametrize(("region", "partition"), [("us-west-2", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")])
def test_partition_of_a_region(region: str, partition: str) -> None:
    assert partition_of(region) == partition


ERRORS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "cluster name differs": (
        _adopt({"cluster_name": "other"}),
        "eks.cluster_name: 'other': must equal eks.existing.cluster_name ('platform_shared'), or be left out to take it "
        "from there"),
    "version differs": (
        _adopt({"version": "1.35"}),
        "eks.version: '1.35': must equal eks.existing.version ('1.34'), or be left out to take it from there"),
    "endpoint access with existing": (
        _adopt({"endpoint_access": "private"}),
        "eks.endpoint_access: 'private': conflicts with eks.existing: an adopted cluster keeps its own API endpoint "
        "access; remove eks.endpoint_access"),
    "public CIDRs with existing": (
        _adopt({"public_access_cidrs": ["10.0.0.0/8"]}),
        "eks.public_access_cidrs: ['10.0.0.0/8']: conflicts with eks.existing: an adopted cluster keeps its own public "
        "endpoint CIDRs; remove eks.public_access_cidrs"),
    "logging with existing": (
        _adopt({"logging": ["api"]}),
        "eks.logging: ['api']: conflicts with eks.existing: an adopted cluster keeps its own control-plane logging; "
        "remove eks.logging"),
    "system node group with existing": (
        _adopt({"system_node_group": {"min_size": 1}}),
        "conflicts with eks.existing: an adopted cluster keeps its own node groups; remove eks.system_node_group"),
    "override of an add-on not opted in": (
        _adopt({"addon_versions": {"coredns": "v1.12.3-eksbuild.1"}}),
        "eks.addon_versions.coredns: 'v1.12.3-eksbuild.1': applies only to add-ons listed in eks.existing.manage_addons "
        "(the toolkit does not manage the other add-ons of an adopted cluster)"),
    "kubectl role of another account": (
        _adopt(kubectl_role_arn="arn:aws:iam::222222222222:role/eks-kubectl"),
        "eks.existing.kubectl_role_arn: 'arn:aws:iam::222222222222:role/eks-kubectl': must be in the environment's "
        "account 111111111111"),
    "OIDC provider of another partition": (
        _adopt(oidc_provider_arn=OIDC_ARN.replace("arn:aws:", "arn:aws-us-gov:")),
        "must be in partition 'aws' (the partition of region us-west-2)"),
    "OIDC provider of another Region": (
        _adopt(oidc_provider_arn=OIDC_ARN.replace("us-west-2", "us-east-1")),
        "eks.existing.oidc_provider_arn: 'arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/..."
        ": must be the OIDC provider of a cluster in region us-west-2"),
    "OIDC provider ARN that is not one": (
        _adopt(oidc_provider_arn="arn:aws:iam::111111111111:role/oidc"),
        "eks.existing.oidc_provider_arn: 'arn:aws:iam::111111111111:role/oidc': must be an IAM OIDC provider ARN of an "
        "EKS cluster"),
    "kubectl role ARN of a user": (
        _adopt(kubectl_role_arn="arn:aws:iam::111111111111:user/kubectl"),
        "eks.existing.kubectl_role_arn: 'arn:aws:iam::111111111111:user/kubectl': must be an IAM role ARN"),
    "cluster security group id malformed": (
        _adopt(cluster_security_group_id="sg-xyz"),
        "eks.existing.cluster_security_group_id: 'sg-xyz': must be a security group id"),
    "kubectl subnet id malformed": (
        _adopt(kubectl_private_subnet_ids=["subnet-1"]),
        "eks.existing.kubectl_private_subnet_ids[0]: 'subnet-1': must be a subnet id"),
    "kubectl subnet listed twice": (
        _adopt(kubectl_private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef0"]),
        "eks.existing.kubectl_private_subnet_ids: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef0']: lists a "
        "subnet twice"),
    "kubectl security group without subnets": (
        _adopt(kubectl_security_group_id="sg-0123456789abcdef1"),
        "eks.existing.kubectl_security_group_id: 'sg-0123456789abcdef1': applies only with "
        "eks.existing.kubectl_private_subnet_ids (the kubectl handler in the VPC)"),
    "unknown core add-on to manage": (
        _adopt(manage_addons=["calico"]),
        "eks.existing.manage_addons[0]: 'calico': must be a core add-on: vpc-cni, kube-proxy, coredns, "
        "eks-pod-identity-agent"),
    "core add-on to manage listed twice": (
        _adopt(manage_addons=["coredns", "coredns"]),
        "eks.existing.manage_addons: ['coredns', 'coredns']: lists an add-on twice"),
    "version of the adopted cluster HyperPod does not support": (
        _adopt(version="1.29"),
        "eks.existing.version: '1.29': must be one of 1.30, 1.31, 1.32, 1.33, 1.34, 1.35 (the versions HyperPod supports)"),
    "version of the adopted cluster unquoted": (
        _adopt(version=1.34),
        "eks.existing.version: 1.34: must be a quoted string such as '1.34' (YAML reads 1.34 as a number)"),
    "adopted cluster without its OIDC provider": (
        lambda data: data.__setitem__("eks", {"existing": {k: v for k, v in EXISTING.items() if k != "oidc_provider_arn"}}),
        "eks.existing.oidc_provider_arn: missing: is required"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_each_problem_is_one_line_naming_the_keys(base_configs, case: str) -> None:
    mutate, expected = ERRORS[case]
    # GIVEN dev with one problem in its eks section WHEN it is parsed
    with pytest.raises(ConfigError) as raised:
        _parse(base_configs, mutate)
    # THEN exactly one line, naming the file and the key(s)
    (line,) = str(raised.value).splitlines()
    assert line.startswith("dev.yaml: eks.")
    assert expected in line


# -- eks.operations_principals: the roles that run verify, smoke and rollout inside the cluster -----------------------

CHECKS_ROLE = "arn:aws:iam::111111111111:role/hpdpd-pipeline-checks"


def _operations(*principals: Any, admin: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["eks"]["operations_principals"] = list(principals)
        if admin:
            data["eks"]["admin_principals"] = list(admin)
    return mutate


def test_operations_principals_default_to_none_and_accept_roles_of_any_account_with_paths(base_configs) -> None:
    # GIVEN dev as committed THEN nobody has operations access
    assert _parse(base_configs, lambda data: None).eks.operations_principals == ()
    # AND roles with a path, of another account (STANDARD access entries may be cross-account), are accepted, on a
    # created and on an adopted cluster alike
    roles = (CHECKS_ROLE, "arn:aws:iam::222222222222:role/platform/sre-operations")
    assert _parse(base_configs, _operations(*roles)).eks.operations_principals == roles
    adopted = _parse(base_configs, lambda data: (_adopt()(data), _operations(*roles)(data)))
    assert adopted.eks.existing is not None and adopted.eks.operations_principals == roles


OPERATIONS_ERRORS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a user instead of a role": (
        _operations("arn:aws:iam::111111111111:user/ops"),
        "dev.yaml: eks.operations_principals[0]: 'arn:aws:iam::111111111111:user/ops': must be an IAM role ARN such as "
        "'arn:aws:iam::111111111111:role/hpdpd-pipeline-checks' (names of at most 64 characters)"),
    "an assumed-role session": (
        _operations("arn:aws:sts::111111111111:assumed-role/ops/session"),
        "dev.yaml: eks.operations_principals[0]: 'arn:aws:sts::111111111111:assumed-role/ops/session': must be an IAM "
        "role ARN such as 'arn:aws:iam::111111111111:role/hpdpd-pipeline-checks' (names of at most 64 characters)"),
    "a role name of 65 characters": (
        _operations("arn:aws:iam::111111111111:role/" + "r" * 65),
        f"dev.yaml: eks.operations_principals[0]: {render_value('arn:aws:iam::111111111111:role/' + 'r' * 65)}: must "
        "be an IAM role ARN such as 'arn:aws:iam::111111111111:role/hpdpd-pipeline-checks' (names of at most 64 characters)"),
    "a role of another partition": (
        _operations("arn:aws-cn:iam::111111111111:role/ops"),
        "dev.yaml: eks.operations_principals[0]: 'arn:aws-cn:iam::111111111111:role/ops': must be in partition 'aws' "
        "(the partition of region us-west-2)"),
    "a role listed twice": (
        _operations(CHECKS_ROLE, CHECKS_ROLE),
        f"dev.yaml: eks.operations_principals[1]: '{CHECKS_ROLE}': listed twice (first at operations_principals[0]); "
        "an IAM principal has one access entry"),
    "a role that is also an admin": (
        _operations(CHECKS_ROLE, admin=(CHECKS_ROLE,)),
        f"dev.yaml: eks.operations_principals[0]: '{CHECKS_ROLE}': is also in eks.admin_principals (cluster admin); "
        "an IAM principal has one access entry: list it in one of the two"),
}


@pytest.mark.parametrize("case", list(OPERATIONS_ERRORS))
def test_a_bad_operations_principal_is_one_line(base_configs, case: str) -> None:
    mutate, expected = OPERATIONS_ERRORS[case]
    # GIVEN dev with one bad operations role WHEN it is parsed
    with pytest.raises(ConfigError) as raised:
        _parse(base_configs, mutate)
    # THEN exactly one line: the file, the key with its index, the value and what it must be
    assert str(raised.value).splitlines() == [expected]
