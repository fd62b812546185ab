"""EKS section: the cluster that orchestrates HyperPod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from hyperpod_dpd.catalogue.versions import CORE_ADDONS, DEFAULT_EKS_VERSION, EKS_VERSIONS
from hyperpod_dpd.config.base import (
    Cidr,
    IamPrincipalArn,
    Model,
    ResourceName,
    addon_version_issues,
    join,
    quoted_choice,
)
from hyperpod_dpd.errors import Issue
from pydantic import Field

LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
ALL_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class SystemNodeGroup(Model):
    """A small managed node group for cluster services (CoreDNS, operator, router) when HyperPod has no system group."""

    instance_type: str = Field(default="m7i.xlarge", pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
    min_size: int = Field(default=2, ge=0, le=20)
    desired_size: int = Field(default=2, ge=0, le=20)
    max_size: int = Field(default=3, ge=1, le=20)
    disk_size_gb: int = Field(default=50, ge=20, le=1000)

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if not self.min_size <= self.desired_size <= self.max_size:
            yield Issue(join(path, "desired_size"), self.desired_size,
                        f"must be between min_size ({self.min_size}) and max_size ({self.max_size})")


class EksConfig(Model):
    cluster_name: ResourceName
    version: Annotated[str, quoted_choice(EKS_VERSIONS, example=DEFAULT_EKS_VERSION,
                                          rule=f"must be one of {', '.join(EKS_VERSIONS)} (the versions HyperPod supports)")] \
        = DEFAULT_EKS_VERSION
    endpoint_access: Literal["public_and_private", "private"] = "public_and_private"
    public_access_cidrs: tuple[Cidr, ...] = ("0.0.0.0/0",)
    admin_principals: tuple[IamPrincipalArn, ...] = ()
    logging: tuple[LogType, ...] = ALL_LOG_TYPES
    system_node_group: SystemNodeGroup | None = None
    addon_versions: dict[str, str] = Field(default_factory=dict)

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if self.system_node_group:
            yield from self.system_node_group.issues(root, join(path, "system_node_group"))
        yield from addon_version_issues(join(path, "addon_versions"), self.addon_versions,
                                        {a.name: a.minimum for a in CORE_ADDONS}, kind="core", why="HyperPod needs")
        if self.endpoint_access == "private" and self.public_access_cidrs != ("0.0.0.0/0",):
            yield Issue(join(path, "public_access_cidrs"), list(self.public_access_cidrs),
                        "applies only to endpoint_access 'public_and_private'")

    def addon_version(self, name: str) -> str:
        """The pinned (or overridden) version of a core add-on for this cluster's Kubernetes version."""
        if name in self.addon_versions:
            return self.addon_versions[name]
        return next(a for a in CORE_ADDONS if a.name == name).version_for(self.version)
