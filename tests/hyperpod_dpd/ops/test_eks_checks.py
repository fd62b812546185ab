"""An existing EKS cluster's version and authentication mode, and add-on versions against the catalogue
(moto has no EKS add-ons: botocore Stubber)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.catalogue.operator import INFERENCE_ADDON
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.ops.addons import InstalledAddon, expected_addons, installed_addons
from hyperpod_dpd.ops.checks import attempt
from hyperpod_dpd.ops.clusters import EksState
from hyperpod_dpd.ops.eks_checks import addon_checks, eks_checks

REGION = "us-west-2"


def _cluster(version: str = "1.35", mode: str | None = "API", status: str = "ACTIVE") -> EksState:
    return EksState(name="hpdpd-dev", status=status, version=version, authentication_mode=mode)


def _rows(env: EnvironmentConfig, cluster: EksState | None) -> dict[str, Any]:
    return {r.name: r for r in eks_checks(env, cluster)}


def test_a_cluster_that_does_not_exist_yet_passes(env: EnvironmentConfig) -> None:
    rows = _rows(env, None)
    assert list(rows) == ["eks-cluster"] and rows["eks-cluster"].status == "pass"
    assert "creates Kubernetes 1.35" in rows["eks-cluster"].detail


@pytest.mark.parametrize(("actual", "status", "words"), [
    ("1.35", "pass", "runs Kubernetes 1.35, as configured"),
    ("1.34", "warn", "the deploy upgrades the control plane to 1.35"),
    ("1.33", "fail", "EKS upgrades one minor version at a time"),
    ("1.29", "fail", "HyperPod supports 1.30-1.35"),
])
def test_the_cluster_version_is_compared_with_the_config(env: EnvironmentConfig, actual: str, status: str,
                                                         words: str) -> None:
    row = _rows(env, _cluster(version=actual))["eks-version"]
    assert row.status == status and words in row.detail


def test_a_cluster_newer_than_the_config_cannot_be_downgraded(make_env: Callable[..., EnvironmentConfig]) -> None:
    env = make_env(lambda d: d["eks"].__setitem__("version", "1.34"))
    row = _rows(env, _cluster(version="1.35"))["eks-version"]
    assert row.status == "fail" and "EKS cannot downgrade" in row.detail and row.fix == "set eks.version to '1.35'"


def test_the_config_map_authentication_mode_fails_with_the_command_to_change_it(env: EnvironmentConfig) -> None:
    row = _rows(env, _cluster(mode="CONFIG_MAP"))["eks-authentication-mode"]
    assert row.status == "fail"
    assert row.fix == ("aws eks update-cluster-config --name hpdpd-dev "
                       "--access-config authenticationMode=API_AND_CONFIG_MAP")
    assert _rows(env, _cluster(mode="API_AND_CONFIG_MAP"))["eks-authentication-mode"].status == "pass"
    assert _rows(env, _cluster(mode=None))["eks-authentication-mode"].status == "warn"


def test_a_failed_cluster_fails(env: EnvironmentConfig) -> None:
    assert _rows(env, _cluster(status="FAILED"))["eks-cluster"].status == "fail"


def _offer_all(stub: Stubber, env: EnvironmentConfig, missing: dict[str, list[str]] | None = None) -> None:
    """Queue DescribeAddonVersions answers: each pinned version is offered unless ``missing`` replaces the list."""
    for addon in expected_addons(env):
        versions = (missing or {}).get(addon.name, [addon.configured])
        stub.add_response("describe_addon_versions", {"addons": [{
            "addonName": addon.name, "addonVersions": [{"addonVersion": v} for v in versions]}]},
            {"addonName": addon.name, "kubernetesVersion": env.eks.version})


def _installed(env: EnvironmentConfig, **overrides: tuple[str, str]) -> dict[str, InstalledAddon]:
    found = {a.name: InstalledAddon(name=a.name, version=a.configured, status="ACTIVE") for a in expected_addons(env)}
    for name, (version, status) in overrides.items():
        found[name.replace("_", "-")] = InstalledAddon(name=name.replace("_", "-"), version=version, status=status,
                                                       issues=("InsufficientNumberOfReplicas: 0/2 ready",)
                                                       if status.endswith("FAILED") else ())
    return found


def test_an_inference_addon_older_than_dpd_needs_fails_with_the_update_command(env: EnvironmentConfig,
                                                                              aws_credentials: None) -> None:
    # GIVEN a cluster with the inference add-on of operator 3.1.2 and everything else as pinned
    eks = boto3.client("eks", region_name=REGION)
    installed = _installed(env, **{INFERENCE_ADDON.replace("-", "_"): ("v1.2.0-eksbuild.1", "ACTIVE")})
    with Stubber(eks) as stub:
        _offer_all(stub, env)
        # WHEN the add-on checks run
        rows = {r.name: r for r in addon_checks(env, eks, _cluster(), installed)}
        stub.assert_no_pending_responses()
    # THEN the inference add-on fails, naming the operator and the minimum, with the exact upgrade command
    row = rows[f"addon:{INFERENCE_ADDON}"]
    assert row.status == "fail"
    assert "installed v1.2.0-eksbuild.1 (operator 3.1.2) is below the minimum v1.3.0-eksbuild.1" in row.detail
    assert row.fix == (f"aws eks update-addon --cluster-name hpdpd-dev --addon-name {INFERENCE_ADDON} "
                       f"--addon-version {env.operator.effective_addon_version} --resolve-conflicts OVERWRITE")
    assert rows["addon:vpc-cni"].status == "pass" and "offered for Kubernetes 1.35" in rows["addon:vpc-cni"].detail


def test_failed_below_minimum_newer_and_unoffered_addons(env: EnvironmentConfig, aws_credentials: None) -> None:
    eks = boto3.client("eks", region_name=REGION)
    installed = _installed(env, vpc_cni=("v1.18.2-eksbuild.1", "ACTIVE"), coredns=("v1.13.1-eksbuild.1", "CREATE_FAILED"),
                           cert_manager=("v1.99.0-eksbuild.1", "ACTIVE"))
    with Stubber(eks) as stub:
        _offer_all(stub, env, missing={"metrics-server": ["v0.8.0-eksbuild.1", "v0.7.2-eksbuild.9"]})
        rows = {r.name: r for r in addon_checks(env, eks, _cluster(), installed)}
    # THEN the VPC CNI under 1.18.3 fails, a failed add-on shows its health issue, a newer one warns,
    # and a pin AWS no longer offers fails with the newest offered version
    assert rows["addon:vpc-cni"].status == "fail" and "below the minimum v1.18.3-eksbuild.1" in rows["addon:vpc-cni"].detail
    assert rows["addon:coredns"].status == "fail" and "InsufficientNumberOfReplicas" in rows["addon:coredns"].detail
    assert rows["addon:cert-manager"].status == "warn" and "EKS does not downgrade" in rows["addon:cert-manager"].detail
    metrics = rows["addon:metrics-server"]
    assert metrics.status == "fail" and "newest offered: v0.8.0-eksbuild.1" in metrics.detail


@pytest.mark.parametrize(("version", "status", "words"), [
    ("v1.5.0-eksbuild.1", "DEGRADED", "is DEGRADED, not ACTIVE: 0/2 replicas ready"),
    ("v1.5.0-eksbuild.1", "CREATING", "is CREATING, not ACTIVE"),
    ("v1.5.0-eksbuild.1", "DELETING", "is DELETING, not ACTIVE"),
    ("1.3", "ACTIVE", "installed version '1.3' (ACTIVE) cannot be compared with the minimum v1.3.0-eksbuild.1"),
    ("", "ACTIVE", "installed version '(none)' (ACTIVE) cannot be compared"),
])
def test_an_inference_addon_eks_cannot_confirm_as_working_and_new_enough_warns(
        env: EnvironmentConfig, aws_credentials: None, version: str, status: str, words: str) -> None:
    # GIVEN the inference add-on installed in a state that is not ACTIVE, or at a version that cannot be compared with
    # the DPD minimum (everything else as pinned and ACTIVE)
    eks = boto3.client("eks", region_name=REGION)
    installed = _installed(env)
    installed[INFERENCE_ADDON] = InstalledAddon(name=INFERENCE_ADDON, version=version, status=status,
                                                issues=("0/2 replicas ready",) if status == "DEGRADED" else ())
    with Stubber(eks) as stub:
        _offer_all(stub, env)
        # WHEN the add-on checks run
        rows = {r.name: r for r in addon_checks(env, eks, _cluster(), installed)}
    # THEN its row warns (it never passes on what EKS did not confirm) and says how to look
    row = rows[f"addon:{INFERENCE_ADDON}"]
    assert row.status == "warn" and words in row.detail, row
    assert row.fix == f"aws eks describe-addon --cluster-name hpdpd-dev --addon-name {INFERENCE_ADDON}"
    assert rows["addon:vpc-cni"].status == "pass"


def test_addons_of_a_cluster_not_yet_created_are_checked_for_availability_only(env: EnvironmentConfig,
                                                                               aws_credentials: None) -> None:
    eks = boto3.client("eks", region_name=REGION)
    with Stubber(eks) as stub:
        _offer_all(stub, env)
        rows = list(addon_checks(env, eks, None, None))
    assert len(rows) == len(expected_addons(env)) == 9
    assert all(r.status == "pass" and "installed" not in r.detail for r in rows)


def test_addon_apis_that_cannot_be_called_warn_with_the_permission(env: EnvironmentConfig,
                                                                   aws_credentials: None) -> None:
    eks = boto3.client("eks", region_name=REGION)
    with Stubber(eks) as stub:
        # GIVEN a caller that may call neither ListAddons nor DescribeAddonVersions
        stub.add_client_error("list_addons", "AccessDeniedException", "not authorized", http_status_code=403)
        for _ in expected_addons(env):
            stub.add_client_error("describe_addon_versions", "AccessDeniedException", "not authorized",
                                  http_status_code=403)
        denied = attempt(lambda: installed_addons(eks, "hpdpd-dev"))
        assert isinstance(denied, BaseException)
        # WHEN the add-on checks run
        rows = list(addon_checks(env, eks, _cluster(), denied))
    # THEN every row warns and names the permissions it needs
    assert all(r.status == "warn" for r in rows)
    assert "eks:DescribeAddonVersions" in (rows[0].fix or "")
    assert "could not read the installed version: access denied" in rows[0].detail
    assert "ListAddons" in rows[0].detail


def test_installed_addons_are_listed_across_pages_and_described(aws_credentials: None) -> None:
    eks = boto3.client("eks", region_name=REGION)
    with Stubber(eks) as stub:
        stub.add_response("list_addons", {"addons": ["vpc-cni"], "nextToken": "n"}, {"clusterName": "c"})
        stub.add_response("list_addons", {"addons": ["coredns"]}, {"clusterName": "c", "nextToken": "n"})
        stub.add_response("describe_addon", {"addon": {"addonName": "vpc-cni", "addonVersion": "v1.20.4-eksbuild.2",
                                                       "status": "ACTIVE"}}, {"clusterName": "c", "addonName": "vpc-cni"})
        stub.add_response("describe_addon", {"addon": {
            "addonName": "coredns", "addonVersion": "v1.13.1-eksbuild.1", "status": "DEGRADED",
            "health": {"issues": [{"code": "InsufficientNumberOfReplicas", "message": "no nodes yet"}]}}},
            {"clusterName": "c", "addonName": "coredns"})
        found = installed_addons(eks, "c")
    assert found["vpc-cni"].status == "ACTIVE"
    assert found["coredns"].issues == ("no nodes yet",)
