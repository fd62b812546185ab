"""The operator's Kubernetes API names in the catalogue are the vendored CRD's own (k8s/crds/SOURCES.md)."""

from __future__ import annotations

import pytest
import yaml

from hyperpod_dpd.catalogue.operator_api import (
    IEC_API_VERSION,
    IEC_GROUP,
    IEC_KIND,
    IEC_PLURAL,
    IEC_RESOURCE,
    IEC_VERSION,
)
from tests.paths import ROOT

CRD = ROOT / "k8s" / "crds" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"


@pytest.fixture(scope="module")
def crd() -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser: the file is 459 kB
    return yaml.load(CRD.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader


def test_the_group_kind_and_plural_are_the_crds(crd: dict) -> None:
    # GIVEN the InferenceEndpointConfig CRD the operator's chart ships (vendored under k8s/crds/)
    # WHEN its group and names are read
    # THEN the catalogue's constants are exactly those, and the resource name is the CRD's own metadata.name
    assert (IEC_GROUP, IEC_KIND, IEC_PLURAL) == (crd["spec"]["group"], crd["spec"]["names"]["kind"],
                                                 crd["spec"]["names"]["plural"])
    assert IEC_RESOURCE == crd["metadata"]["name"]


def test_the_version_is_the_one_served_and_stored(crd: dict) -> None:
    # GIVEN the CRD's versions (v1 and v1alpha1, converted by the operator's webhook)
    # WHEN the one that is both served and the storage version is picked
    # THEN it is the version the toolkit renders and reads
    stored = [v["name"] for v in crd["spec"]["versions"] if v["served"] and v["storage"]]
    assert stored == [IEC_VERSION]
    assert IEC_API_VERSION == f"{crd['spec']['group']}/{stored[0]}"
