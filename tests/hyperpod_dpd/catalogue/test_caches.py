"""The cache facts agree with their sources: local NVMe per instance type with EC2's DescribeInstanceTypes (the copy
moto ships), the IEC paths and defaults with the vendored operator 3.3 CRD."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from hyperpod_dpd.catalogue.caches import (
    DEFAULT_WEIGHTS_HOST_PATH,
    HOST_PATH_MAX,
    IMAGE_CACHE_PATH,
    LOCAL_NVME_GB,
    WEIGHTS_CACHE_PATH,
    local_nvme_gb,
)
from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES

CRD = Path(__file__).resolve().parents[3] / "k8s" / "crds" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"


@pytest.fixture(scope="module")
def instance_storage() -> dict[str, int]:
    with mock_aws():
        client = boto3.client("ec2", region_name="us-east-1")
        names = [spec.ec2_name for spec in INSTANCE_TYPES.values()]
        found: dict[str, int] = {}
        for start in range(0, len(names), 50):
            for item in client.describe_instance_types(InstanceTypes=names[start:start + 50])["InstanceTypes"]:
                info = item.get("InstanceStorageInfo") or {}
                if item.get("InstanceStorageSupported") and info.get("NvmeSupport") in ("required", "supported"):
                    found[f"ml.{item['InstanceType']}"] = int(info["TotalSizeInGB"])
    return found


def test_local_nvme_matches_ec2_for_every_catalogue_type(instance_storage: dict[str, int]) -> None:
    assert dict(LOCAL_NVME_GB) == instance_storage
    assert {name: local_nvme_gb(name) for name in INSTANCE_TYPES if not local_nvme_gb(name)} == {
        name: 0 for name in INSTANCE_TYPES if name not in instance_storage}


def test_the_paths_and_defaults_are_the_vendored_crds() -> None:
    crd = yaml.load(CRD.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    spec = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    cache = spec["modelCacheConfig"]["properties"]
    assert {WEIGHTS_CACHE_PATH, IMAGE_CACHE_PATH} == {f"spec.modelCacheConfig.{k}" for k in cache}
    host_path = cache["weightsCache"]["properties"]["hostPath"]
    assert (host_path["default"], host_path["maxLength"], host_path["minLength"]) == (DEFAULT_WEIGHTS_HOST_PATH,
                                                                                      HOST_PATH_MAX, 1)
    assert cache["imageCache"]["required"] == ["enabled"]
