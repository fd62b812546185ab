"""Operator releases: each maps to its add-on version, the default is the newest, later IEC fields name their release."""

from __future__ import annotations

import pytest

from hyperpod_dpd.catalogue.operator import (
    DEFAULT_OPERATOR,
    DPD_MINIMUM_OPERATOR,
    DPD_WORKER_IMAGES,
    IEC_EXTENSION_FIELDS,
    OPERATOR_RELEASES,
    image_lmcache_version,
    operator_for_addon,
    release_key,
    supports,
)


@pytest.mark.parametrize(("operator", "addon"), [
    ("3.2", "v1.3.0-eksbuild.1"), ("3.3", "v1.4.0-eksbuild.1"), ("3.4", "v1.5.0-eksbuild.1"),
    ("3.5", "v1.6.0-eksbuild.1"), ("3.6", "v1.7.0-eksbuild.1"), ("3.7", "v1.8.0-eksbuild.1"),
])
def test_each_dpd_release_maps_to_its_addon_version_and_back(operator: str, addon: str) -> None:
    # GIVEN a release of the catalogue
    release = OPERATOR_RELEASES[operator]
    # THEN it installs its add-on version, which an installed add-on maps back to
    assert release.addon_version == addon and release.dpd
    assert operator_for_addon(addon) == release
    # AND a newer build of the same add-on version still belongs to that release
    assert operator_for_addon(addon.replace("eksbuild.1", "eksbuild.3")) == release


def test_releases_are_listed_in_order_with_growing_addon_versions() -> None:
    releases = list(OPERATOR_RELEASES.values())
    assert [r.operator for r in releases] == sorted(OPERATOR_RELEASES, key=release_key)
    assert [r.addon for r in releases] == sorted(r.addon for r in releases)
    dated = [r.released for r in releases if len(r.released) == len("2026-09-17")]  # 3.1.3 has a year only
    assert dated == sorted(dated)


def test_the_default_is_the_newest_release_and_runs_dpd() -> None:
    assert DEFAULT_OPERATOR == max(OPERATOR_RELEASES, key=release_key) == "3.7"
    assert supports(DEFAULT_OPERATOR, DPD_MINIMUM_OPERATOR)


@pytest.mark.parametrize(("operator", "introduced", "expected"), [
    ("3.7", "3.7", True), ("3.10", "3.7", True), ("3.4", "3.7", False), ("3.1.3", "3.1.2", True), ("3.1.2", "3.2", False),
])
def test_supports_compares_releases_numerically(operator: str, introduced: str, expected: bool) -> None:
    assert supports(operator, introduced) is expected


def test_fields_beyond_the_vendored_crd_name_a_later_release_a_source_and_a_shape() -> None:
    # GIVEN the table of IEC fields newer than the vendored CRD (operator 3.3)
    assert set(IEC_EXTENSION_FIELDS) == {"spec.tolerations", "spec.lmcache", "spec.kubernetes.podTemplateAnnotations",
                                         "spec.modelCacheConfig.weightsCache", "spec.modelCacheConfig.imageCache",
                                         "spec.modelCacheConfig.weightsCache.nodeAffinity"}
    for path, field in IEC_EXTENSION_FIELDS.items():
        # THEN each row is keyed by its path, comes from a known release after 3.2, cites its source and has a type
        # (or, for a field the vendored 3.3 CRD declares already, the CRD's own shape)
        assert field.path == path and path.startswith("spec.")
        assert field.introduced in OPERATOR_RELEASES and not supports("3.2", field.introduced)
        assert "sagemaker-hyperpod-cli" in field.source
        assert field.schema["type"] in {"object", "array"} if not field.declared else field.schema == {}
    assert (IEC_EXTENSION_FIELDS["spec.tolerations"].introduced, IEC_EXTENSION_FIELDS["spec.lmcache"].introduced,
            IEC_EXTENSION_FIELDS["spec.kubernetes.podTemplateAnnotations"].introduced) == ("3.7", "3.7", "3.6")
    assert IEC_EXTENSION_FIELDS["spec.lmcache"].schema["properties"]["mode"]["enum"] == ["InProcess", "MultiProcess"]


@pytest.mark.parametrize(("image", "version"), [
    (DPD_WORKER_IMAGES[0], "0.4.3"),
    (DPD_WORKER_IMAGES[1], "0.4.3"),
    ("lmcache/vllm-openai:v0.5.1", "0.5.1"),
    ("123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/lmcache/vllm-openai:v0.6.0", "0.6.0"),
    ("lmcache/vllm-openai:latest", None),
    ("vllm/vllm-openai:v0.19.1", None),
])
def test_the_lmcache_version_of_an_image_is_known_only_when_the_catalogue_or_the_tag_says(image: str,
                                                                                        version: str | None) -> None:
    assert image_lmcache_version(image) == version
