"""Typed, validated environment configuration (``config/<env>.yaml``)."""

from hpdpd.config.eks import EksConfig, SystemNodeGroup
from hpdpd.config.environment import EnvironmentConfig
from hpdpd.config.hyperpod import DependenciesChart, HyperPodConfig, InstanceGroup, Taint
from hpdpd.config.loader import (
    DEFAULT_CONFIG_DIR,
    list_environments,
    load_all,
    load_environment,
    parse_environment,
)
from hpdpd.config.network import CreateVpc, ExistingSubnet, ExistingVpc, NetworkConfig

__all__ = [
    "DEFAULT_CONFIG_DIR",
    "CreateVpc",
    "DependenciesChart",
    "EksConfig",
    "EnvironmentConfig",
    "ExistingSubnet",
    "ExistingVpc",
    "HyperPodConfig",
    "InstanceGroup",
    "NetworkConfig",
    "SystemNodeGroup",
    "Taint",
    "list_environments",
    "load_all",
    "load_environment",
    "parse_environment",
]
