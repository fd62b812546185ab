"""The EKS add-ons an environment needs, with their minimum versions, and what the cluster has installed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.operator import DPD_MINIMUM_ADDON, INFERENCE_ADDON, OBSERVABILITY_ADDON, PREREQUISITE_ADDONS
from hyperpod_dpd.catalogue.versions import CORE_ADDONS, AddonVersion, parse_addon_version
from hyperpod_dpd.ops.answers import member

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

ADDON_PERMISSIONS = "eks:ListAddons and eks:DescribeAddon"
ACTIVE = "ACTIVE"
FAILED_STATUSES = frozenset({"CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED"})


@dataclass(frozen=True, kw_only=True)
class ExpectedAddon:
    """An add-on the environment installs: the version it pins and the oldest version that still works."""

    name: str
    configured: str
    minimum: AddonVersion | None
    why: str


@dataclass(frozen=True, kw_only=True)
class InstalledAddon:
    name: str
    version: str
    status: str
    issues: tuple[str, ...] = ()

    @property
    def parsed_version(self) -> AddonVersion | None:
        try:
            return parse_addon_version(self.version)
        except ValueError:
            return None


def expected_addons(env: EnvironmentConfig) -> tuple[ExpectedAddon, ...]:
    """Core add-ons, the inference operator's prerequisites, the inference add-on (and observability when enabled)."""
    addons = [ExpectedAddon(name=a.name, configured=env.eks.addon_version(a.name), minimum=a.minimum,
                            why="core add-on" + (" (HyperPod supports only the VPC CNI from 1.18.3)" if a.minimum else ""))
              for a in CORE_ADDONS]
    addons += [ExpectedAddon(name=p.name, configured=env.operator.prerequisite_version(p.name),
                             minimum=p.minimum_version, why="inference operator prerequisite")
               for p in PREREQUISITE_ADDONS]
    addons.append(ExpectedAddon(name=INFERENCE_ADDON, configured=env.operator.effective_addon_version,
                                minimum=DPD_MINIMUM_ADDON, why="inference operator; DPD (pdSpec) needs operator 3.2+"))
    if env.operator.observability.enabled:
        addons.append(ExpectedAddon(name=OBSERVABILITY_ADDON, configured=env.operator.observability.addon_version,
                                    minimum=None, why="DPD dashboards"))
    return tuple(addons)


def installed_addons(eks: Any, cluster_name: str) -> dict[str, InstalledAddon]:
    """Every add-on on the cluster (``ListAddons`` pages, then ``DescribeAddon`` for each)."""
    names: list[str] = []
    for page in eks.get_paginator("list_addons").paginate(clusterName=cluster_name):
        names.extend(page.get("addons", []))
    found: dict[str, InstalledAddon] = {}
    for name in names:
        addon = member(eks.describe_addon(clusterName=cluster_name, addonName=name), "addon", client=eks,
                       operation="DescribeAddon")
        issues = tuple(" ".join(str(i.get("message") or i.get("code") or "").split())
                       for i in (addon.get("health") or {}).get("issues", []))
        found[name] = InstalledAddon(name=name, version=addon.get("addonVersion", ""), status=addon.get("status", ""),
                                     issues=tuple(i for i in issues if i))
    return found


def below_minimum(installed: InstalledAddon, expected: ExpectedAddon) -> bool:
    parsed = installed.parsed_version
    return expected.minimum is not None and parsed is not None and parsed < expected.minimum
