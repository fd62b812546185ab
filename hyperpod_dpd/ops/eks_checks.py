"""Checks of an existing EKS cluster: Kubernetes version, authentication mode, and add-on versions.

Add-on rows combine two facts: the pinned version is offered for the configured Kubernetes version
(``DescribeAddonVersions``; AWS publishes new builds often), and an installed add-on is at or above the catalogue
minimum (the inference add-on at ``v1.3.0-eksbuild.1`` or newer for DPD).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.operator import INFERENCE_ADDON, operator_for_addon
from hyperpod_dpd.catalogue.versions import EKS_VERSIONS, parse_addon_version
from hyperpod_dpd.ops.addons import (
    ACTIVE,
    FAILED_STATUSES,
    ExpectedAddon,
    InstalledAddon,
    below_minimum,
    expected_addons,
)
from hyperpod_dpd.ops.checks import STATUSES, Check, Status, attempt, failed, passed, warned, why_unchecked
from hyperpod_dpd.ops.clusters import EksState

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

ALLOWED_AUTH_MODES = ("API", "API_AND_CONFIG_MAP")
ADDON_VERSIONS_PERMISSION = "eks:DescribeAddonVersions"
ADDON_READ_PERMISSIONS = "eks:ListAddons and eks:DescribeAddon"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def eks_checks(env: EnvironmentConfig, cluster: EksState | None) -> Iterator[Check]:
    name = env.eks.cluster_name
    if cluster is None:
        yield passed("eks-cluster", f"{name} does not exist yet; the stack creates Kubernetes {env.eks.version}")
        return
    if cluster.status == "FAILED":
        yield failed("eks-cluster", f"{name} is FAILED", fix=f"inspect it with 'aws eks describe-cluster --name {name}'")
    elif cluster.status != "ACTIVE":
        yield warned("eks-cluster", f"{name} is {cluster.status}",
                     fix="wait until it is ACTIVE before deploying (an update is probably in progress)")
    yield _version_check(env, cluster)
    yield _auth_check(cluster)


def _version_check(env: EnvironmentConfig, cluster: EksState) -> Check:
    name, actual, wanted = "eks-version", cluster.version, env.eks.version
    supported = f"{EKS_VERSIONS[0]}-{EKS_VERSIONS[-1]}"
    try:
        actual_minor, wanted_minor = _minor(actual), _minor(wanted)
    except ValueError:
        return warned(name, f"EKS reported an unreadable version {actual!r}")
    if actual not in EKS_VERSIONS:
        return failed(name, f"{cluster.name} runs Kubernetes {actual}; HyperPod supports {supported}",
                      fix=f"upgrade the cluster one minor version at a time to {wanted}")
    if wanted_minor < actual_minor:
        return failed(name, f"{cluster.name} runs {actual} but eks.version is {wanted}; EKS cannot downgrade",
                      fix=f"set eks.version to '{actual}'")
    if wanted_minor[1] - actual_minor[1] > 1:
        return failed(name, f"{cluster.name} runs {actual} but eks.version is {wanted}; EKS upgrades one minor "
                            "version at a time", fix=f"deploy with eks.version '{actual_minor[0]}.{actual_minor[1] + 1}' first")
    if wanted_minor != actual_minor:
        return warned(name, f"{cluster.name} runs {actual}; the deploy upgrades the control plane to {wanted}",
                      fix="check add-on and workload compatibility with the new version before deploying")
    return passed(name, f"{cluster.name} runs Kubernetes {actual}, as configured")


def _auth_check(cluster: EksState) -> Check:
    name, mode = "eks-authentication-mode", cluster.authentication_mode
    if mode is None:
        return warned(name, f"EKS did not report the authentication mode of {cluster.name}",
                      fix=f"check accessConfig.authenticationMode with 'aws eks describe-cluster --name {cluster.name}'")
    if mode not in ALLOWED_AUTH_MODES:
        return failed(name, f"authentication mode {mode}; HyperPod needs API or API_AND_CONFIG_MAP",
                      fix=f"aws eks update-cluster-config --name {cluster.name} "
                          "--access-config authenticationMode=API_AND_CONFIG_MAP")
    return passed(name, f"authentication mode {mode}")


@dataclass(frozen=True, kw_only=True)
class _Part:
    status: Status
    text: str
    fix: str | None = None


def _worst(parts: list[_Part]) -> Status:
    return max((p.status for p in parts), key=STATUSES.index)


def offered_versions(eks: Any, addon: str, kubernetes_version: str) -> set[str]:
    versions: set[str] = set()
    for page in eks.get_paginator("describe_addon_versions").paginate(addonName=addon,
                                                                       kubernetesVersion=kubernetes_version):
        for entry in page.get("addons", []):
            versions.update(str(v["addonVersion"]) for v in entry.get("addonVersions", []) if v.get("addonVersion"))
    return versions


def _offered_part(expected: ExpectedAddon, offered: set[str] | BaseException, kubernetes: str) -> _Part:
    if isinstance(offered, BaseException):
        reason, fix = why_unchecked(offered, permission=ADDON_VERSIONS_PERMISSION)
        return _Part(status="warn", text=f"could not list offered versions: {reason}", fix=fix)
    if expected.configured in offered:
        return _Part(status="pass", text=f"pinned {expected.configured} is offered for Kubernetes {kubernetes}")
    newest = max(offered, key=_sort_key, default=None)
    return _Part(status="fail", text=f"pinned {expected.configured} is not offered for Kubernetes {kubernetes}"
                                     + (f" (newest offered: {newest})" if newest else " (none offered)"),
                 fix=f"pin an offered version (aws eks describe-addon-versions --addon-name {expected.name} "
                     f"--kubernetes-version {kubernetes})")


def _sort_key(version: str) -> tuple[int, int, int, int]:
    try:
        parsed = parse_addon_version(version)
    except ValueError:
        return (-1, -1, -1, -1)
    return (parsed.major, parsed.minor, parsed.patch, parsed.build)


def _operator_note(name: str, version: str) -> str:
    if name != INFERENCE_ADDON:
        return ""
    try:
        release = operator_for_addon(version)
    except ValueError:
        return ""
    return f" (operator {release.operator})" if release else ""


def _installed_part(env: EnvironmentConfig, expected: ExpectedAddon, installed: InstalledAddon | None) -> _Part:
    cluster = env.eks.cluster_name
    update = (f"aws eks update-addon --cluster-name {cluster} --addon-name {expected.name} "
              f"--addon-version {expected.configured} --resolve-conflicts OVERWRITE")
    if installed is None:
        return _Part(status="pass", text=f"not installed yet; the stack installs {expected.configured}")
    note = _operator_note(expected.name, installed.version)
    if installed.status in FAILED_STATUSES:
        issues = "; ".join(installed.issues) or "no health issues reported"
        return _Part(status="fail", text=f"installed {installed.version}{note} is {installed.status}: {issues}",
                     fix=f"aws eks describe-addon --cluster-name {cluster} --addon-name {expected.name}")
    if below_minimum(installed, expected):
        return _Part(status="fail", text=f"installed {installed.version}{note} is below the minimum {expected.minimum} "
                                         f"({expected.why})", fix=update)
    parsed, pinned = installed.parsed_version, parse_addon_version(expected.configured)
    describe = f"aws eks describe-addon --cluster-name {cluster} --addon-name {expected.name}"
    if parsed is None:  # EKS answered a version this check cannot compare: the minimum is not confirmed
        return _Part(status="warn", text=f"installed version {installed.version or '(none)'!r} ({installed.status}) "
                                         "cannot be compared"
                                         + (f" with the minimum {expected.minimum}" if expected.minimum else "")
                                         + f" or the pinned {expected.configured}", fix=describe)
    if parsed > pinned:
        return _Part(status="warn", text=f"installed {installed.version}{note} is newer than the pinned "
                                         f"{expected.configured}; EKS does not downgrade add-ons",
                     fix="raise the pin in the environment file to the installed version")
    if installed.status != ACTIVE:  # CREATING, UPDATING, DELETING, DEGRADED: not (yet) working
        issues = "; ".join(installed.issues)
        return _Part(status="warn", text=f"installed {installed.version}{note} is {installed.status or '(no status)'}, "
                                         f"not {ACTIVE}" + (f": {issues}" if issues else ""), fix=describe)
    return _Part(status="pass", text=f"installed {installed.version}{note} ({installed.status})")


def addon_checks(env: EnvironmentConfig, eks: Any, cluster: EksState | None,
                 installed: dict[str, InstalledAddon] | BaseException | None) -> Iterator[Check]:
    """One row per expected add-on; ``installed`` is None when the cluster does not exist yet."""
    for expected in expected_addons(env):
        offered = attempt(functools.partial(offered_versions, eks, expected.name, env.eks.version))
        parts = [_offered_part(expected, offered, env.eks.version)]
        if isinstance(installed, BaseException):
            reason, remedy = why_unchecked(installed, permission=ADDON_READ_PERMISSIONS)
            parts.append(_Part(status="warn", text=f"could not read the installed version: {reason}", fix=remedy))
        elif installed is not None:
            parts.append(_installed_part(env, expected, installed.get(expected.name)))
        status = _worst(parts)
        fix = "; ".join(dict.fromkeys(p.fix for p in parts if p.status == status and p.fix)) or None
        yield Check(name=f"addon:{expected.name}", status=status, detail="; ".join(p.text for p in parts), fix=fix)
