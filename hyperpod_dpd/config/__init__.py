"""Typed, validated environment configuration (``config/<env>.yaml``)."""

from hyperpod_dpd.config.eks import EksConfig, SystemNodeGroup
from hyperpod_dpd.config.eks_existing import ExistingEksCluster
from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.config.hyperpod import DependenciesChart, HyperPodConfig, InstanceGroup, Taint
from hyperpod_dpd.config.loader import (
    CONFIG_DIR_VARIABLE,
    config_dir,
    list_environments,
    load_all,
    load_environment,
    parse_environment,
)
from hyperpod_dpd.config.network import CreateVpc, ExistingSubnet, ExistingVpc, NetworkConfig

__all__ = [
    "CONFIG_DIR_VARIABLE",
    "CreateVpc",
    "DependenciesChart",
    "EksConfig",
    "EnvironmentConfig",
    "ExistingEksCluster",
    "ExistingSubnet",
    "ExistingVpc",
    "HyperPodConfig",
    "InstanceGroup",
    "NetworkConfig",
    "SystemNodeGroup",
    "Taint",
    "config_dir",
    "list_environments",
    "load_all",
    "load_environment",
    "parse_environment",
]
