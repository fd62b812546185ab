"""Pinned versions: ordering of add-on versions, minimums, and one kubectl layer per supported EKS version."""

from __future__ import annotations

import importlib.util

import pytest

from hyperpod_dpd.catalogue.versions import (
    CORE_ADDONS,
    DEFAULT_EKS_VERSION,
    EKS_VERSIONS,
    KUBECTL_LAYERS,
    VPC_CNI_MINIMUM,
    eks_version_sources,
    parse_addon_version,
)


def test_addon_versions_order_numerically_not_lexically() -> None:
    assert parse_addon_version("v1.10.0-eksbuild.1") > parse_addon_version("v1.9.9-eksbuild.9")
    assert parse_addon_version("v1.3.0-eksbuild.2") > parse_addon_version("v1.3.0-eksbuild.1")
    assert str(parse_addon_version("1.14.1")) == "v1.14.1-eksbuild.0"


@pytest.mark.parametrize("bad", ["latest", "v1.2", "1.2.3-build.1", ""])
def test_malformed_addon_version_is_rejected_with_the_expected_form(bad: str) -> None:
    with pytest.raises(ValueError, match="v1.14.1-eksbuild.1"):
        parse_addon_version(bad)


def test_hyperpod_eks_range_and_default() -> None:
    assert EKS_VERSIONS == ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
    # THEN the default is the newest version that more than one copy of HyperPod's page documents
    assert DEFAULT_EKS_VERSION == "1.34"
    assert len(eks_version_sources("1.34")) == 2 and len(eks_version_sources("1.35")) == 1
    # AND every accepted version is documented by at least one copy, with its source recorded
    assert all(eks_version_sources(v) for v in EKS_VERSIONS)


def test_a_version_only_the_newest_page_lists_warns_but_is_allowed(write_config) -> None:
    from hyperpod_dpd.config import load_environment

    # GIVEN dev on EKS 1.35 (one copy documents it) and on the default
    newest = load_environment("dev", write_config(lambda d: d["eks"].__setitem__("version", "1.35")))
    default = load_environment("dev", write_config(lambda d: d["eks"].__setitem__("version", "1.34")))
    # THEN the first loads with one EKS warning naming the field and the documented default, the second with none
    # (the fixture's other warnings, such as its alert guards, are the same for both)
    (warning,) = [w for w in newest.warnings() if w.path.startswith("eks")]
    assert warning.path == "eks.version" and "documented default is '1.34'" in warning.message
    assert [w for w in default.warnings() if w.path.startswith("eks")] == []


@pytest.mark.parametrize("version", EKS_VERSIONS)
def test_a_pinned_kubectl_layer_is_installed_for_every_eks_version(version: str) -> None:
    module, cls = KUBECTL_LAYERS[version]
    assert importlib.util.find_spec(module) is not None, f"{module} is not installed (requirements.txt)"
    assert cls == f"KubectlV{version.split('.')[1]}Layer"


@pytest.mark.parametrize("version", EKS_VERSIONS)
def test_core_addons_are_pinned_for_every_eks_version_and_meet_minimums(version: str) -> None:
    for addon in CORE_ADDONS:
        pinned = parse_addon_version(addon.version_for(version))
        if addon.minimum:
            assert pinned >= addon.minimum
    assert parse_addon_version(next(a for a in CORE_ADDONS if a.name == "vpc-cni").version_for(version)) >= VPC_CNI_MINIMUM


def test_kube_proxy_minor_matches_the_cluster_minor() -> None:
    kube_proxy = next(a for a in CORE_ADDONS if a.name == "kube-proxy")
    for version in EKS_VERSIONS:
        assert kube_proxy.version_for(version).startswith(f"v{version}.")
