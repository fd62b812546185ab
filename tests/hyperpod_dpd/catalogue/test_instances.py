"""The instance catalogue agrees with EC2's own DescribeInstanceTypes data (the copy moto ships)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, INSTANCE_TYPES, SYSTEM_INSTANCE_TYPES, instance


@pytest.fixture(scope="module")
def ec2_types() -> dict[str, dict]:
    with mock_aws():
        client = boto3.client("ec2", region_name="us-east-1")
        names = [spec.ec2_name for spec in INSTANCE_TYPES.values()]
        found: dict[str, dict] = {}
        for start in range(0, len(names), 50):
            for item in client.describe_instance_types(InstanceTypes=names[start:start + 50])["InstanceTypes"]:
                found[item["InstanceType"]] = item
    return found


def test_catalogue_lists_exactly_the_five_dpd_types() -> None:
    assert sorted(DPD_INSTANCE_TYPES) == sorted(
        ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge"])


@pytest.mark.parametrize("name", sorted(DPD_INSTANCE_TYPES))
def test_dpd_type_matches_ec2_data(name: str, ec2_types: dict[str, dict]) -> None:
    # GIVEN the catalogue entry and EC2's record of the same hardware
    spec = DPD_INSTANCE_TYPES[name]
    ec2 = ec2_types[spec.ec2_name]
    gpu = ec2["GpuInfo"]["Gpus"][0]
    network = ec2["NetworkInfo"]
    # THEN GPUs, GPU memory, EFA, network cards, ENIs, bandwidth, CPU and architecture agree
    assert spec.gpu is not None
    assert (spec.gpu_count, spec.gpu.model) == (gpu["Count"], gpu["Name"])
    assert spec.gpu.memory_gib == pytest.approx(gpu["MemoryInfo"]["SizeInMiB"] / 1024, rel=0.01)
    assert spec.efa_interfaces == network["EfaInfo"]["MaximumEfaInterfaces"]
    assert spec.network_cards == network["MaximumNetworkCards"]
    assert spec.max_enis == network["MaximumNetworkInterfaces"]
    assert spec.ipv4_per_eni == network["Ipv4AddressesPerInterface"]
    assert f"{spec.network_gbps} Gigabit" == network["NetworkPerformance"]
    assert spec.vcpus == ec2["VCpuInfo"]["DefaultVCpus"]
    assert spec.memory_gib == ec2["MemoryInfo"]["SizeInMiB"] // 1024
    assert spec.arch in ec2["ProcessorInfo"]["SupportedArchitectures"]


@pytest.mark.parametrize("name", sorted(SYSTEM_INSTANCE_TYPES))
def test_system_type_matches_ec2_data(name: str, ec2_types: dict[str, dict]) -> None:
    spec = SYSTEM_INSTANCE_TYPES[name]
    ec2 = ec2_types[spec.ec2_name]
    assert spec.vcpus == ec2["VCpuInfo"]["DefaultVCpus"]
    assert spec.memory_gib == ec2["MemoryInfo"]["SizeInMiB"] // 1024
    assert spec.arch == "x86_64" and "x86_64" in ec2["ProcessorInfo"]["SupportedArchitectures"]
    assert not spec.is_gpu and "GpuInfo" not in ec2


def test_every_catalogue_type_is_a_hyperpod_cluster_instance_type() -> None:
    model = boto3.client("sagemaker", region_name="us-east-1").meta.service_model
    enum = set(model.shape_for("ClusterInstanceType").enum)
    assert set(INSTANCE_TYPES) <= enum


def test_gpu_figures_carry_their_source() -> None:
    for spec in DPD_INSTANCE_TYPES.values():
        assert spec.gpu and spec.gpu.source and spec.gpu.bf16_dense_tflops > 0 and spec.gpu.hbm_bandwidth_gbps > 0


def test_lookup_of_unknown_type_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: .*ml.p5.48xlarge"):
        instance("ml.p4d.24xlarge")
    assert instance("ml.p5.48xlarge").max_pod_ips == 64 * 50
