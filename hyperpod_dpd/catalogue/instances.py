"""HyperPod instance types: the five DPD-capable GPU types and the CPU types a ``system`` group may use.

Sources (see ``docs/catalogue-sources.md`` for the full list):

* GPU count, GPU memory, EFA interfaces, network cards, ENIs and bandwidth: EC2
  ``DescribeInstanceTypes`` (cross-checked in ``tests/hyperpod_dpd/catalogue/test_instances.py``
  against the copy of that data shipped with moto), karpenter-provider-aws generated tables.
* Dense BF16 throughput, HBM bandwidth and NVLink bandwidth: NVIDIA datasheets
  (H100 SXM5, H200 SXM, HGX B200, HGX B300). Dense = half the "with sparsity" figure.
* ``priced_regions``: the Regions where cfn-lint 1.58.0 (rule E3644, built from EC2 pricing) accepts the
  type. Outside them the type is sold only through capacity blocks / training plans, so the toolkit
  requires a training plan there and acknowledges E3644 deliberately.

Confidence: ``V`` verified from EC2 data, ``D`` derived (EFA interfaces = network cards),
``U`` unverified or third-party.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from hyperpod_dpd.catalogue.offerings import CDK_VALIDATOR_LAGS, PRICED

Arch = Literal["x86_64", "arm64"]


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Throughput in TFLOP/s, bandwidths in GB/s (10^9 bytes)."""

    model: str
    memory_gib: float
    bf16_dense_tflops: float
    hbm_bandwidth_gbps: float
    nvlink_bandwidth_gbps: float
    source: str


@dataclass(frozen=True)
class InstanceSpec:
    """One SageMaker HyperPod instance type (``ml.X`` has the hardware of EC2 ``X``)."""

    name: str
    vcpus: int
    memory_gib: int
    arch: Arch
    gpu: GpuSpec | None = None
    gpu_count: int = 0
    efa_interfaces: int = 0
    network_cards: int = 1
    max_enis: int = 0
    ipv4_per_eni: int = 0
    network_gbps: int = 0
    efa_generation: str | None = None
    confidence: str = "V"

    @property
    def ec2_name(self) -> str:
        """The EC2 instance type with the same hardware (``ml.p5.48xlarge`` -> ``p5.48xlarge``)."""
        return self.name.removeprefix("ml.")

    @property
    def priced_regions(self) -> frozenset[str]:
        """Regions where the type is offered on demand (cfn-lint's pricing-based E3644 list)."""
        return PRICED.get(self.name, frozenset())

    @property
    def cdk_validator_lags(self) -> frozenset[str]:
        """Regions where aws-cdk-lib's bundled validator still rejects the type although it is priced there."""
        return CDK_VALIDATOR_LAGS.get(self.name, frozenset())

    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def efa_bandwidth_gbps(self) -> int:
        """Aggregate EFA bandwidth of the instance in Gbit/s."""
        return self.network_gbps if self.efa_interfaces else 0

    @property
    def max_pod_ips(self) -> int:
        """Upper bound of pod IPs the VPC CNI can hand out on one node (ENIs x IPv4 per ENI)."""
        return self.max_enis * self.ipv4_per_eni


H100 = GpuSpec(
    model="H100",
    memory_gib=80.0,
    bf16_dense_tflops=989.4,
    hbm_bandwidth_gbps=3350.0,
    nvlink_bandwidth_gbps=900.0,
    source="NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1,979 TFLOPS with sparsity, HBM3 3.35 TB/s, NVLink 900 GB/s",
)
H200 = GpuSpec(
    model="H200",
    memory_gib=141.0,
    bf16_dense_tflops=989.4,
    hbm_bandwidth_gbps=4800.0,
    nvlink_bandwidth_gbps=900.0,
    source="NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1,979 TFLOPS with sparsity, HBM3e 4.8 TB/s, NVLink 900 GB/s",
)
B200 = GpuSpec(
    model="B200",
    memory_gib=179.0,
    bf16_dense_tflops=2250.0,
    hbm_bandwidth_gbps=7700.0,
    nvlink_bandwidth_gbps=1800.0,
    source="NVIDIA HGX B200 specifications: 36 PFLOPS BF16 with sparsity per 8 GPUs, 62 TB/s HBM3e aggregate, NVLink 5 1.8 TB/s",
)
B300 = GpuSpec(
    model="B300",
    memory_gib=268.0,
    bf16_dense_tflops=2250.0,
    hbm_bandwidth_gbps=8000.0,
    nvlink_bandwidth_gbps=1800.0,
    source="NVIDIA HGX B300 specifications: 36 PFLOPS BF16 with sparsity per 8 GPUs, HBM3e 8 TB/s per GPU, NVLink 5 1.8 TB/s",
)

_DPD = [
    InstanceSpec(
        name="ml.p5.48xlarge", vcpus=192, memory_gib=2048, arch="x86_64", gpu=H100, gpu_count=8,
        efa_interfaces=32, network_cards=32, max_enis=64, ipv4_per_eni=50, network_gbps=3200,
        efa_generation="EFAv2", confidence="V",
    ),
    InstanceSpec(
        name="ml.p5e.48xlarge", vcpus=192, memory_gib=2048, arch="x86_64", gpu=H200, gpu_count=8,
        efa_interfaces=32, network_cards=32, max_enis=64, ipv4_per_eni=50, network_gbps=3200,
        efa_generation="EFAv2", confidence="cards/bandwidth V; EFA count D"
    ),
    InstanceSpec(
        name="ml.p5en.48xlarge", vcpus=192, memory_gib=2048, arch="x86_64", gpu=H200, gpu_count=8,
        efa_interfaces=16, network_cards=16, max_enis=64, ipv4_per_eni=50, network_gbps=3200,
        efa_generation="EFAv3", confidence="cards/bandwidth V; EFA count D",
    ),
    InstanceSpec(
        name="ml.p6-b200.48xlarge", vcpus=192, memory_gib=2048, arch="x86_64", gpu=B200, gpu_count=8,
        efa_interfaces=8, network_cards=8, max_enis=32, ipv4_per_eni=50, network_gbps=3200,
        efa_generation="EFAv4", confidence="cards/bandwidth V; EFA count D",
    ),
    InstanceSpec(
        name="ml.p6-b300.48xlarge", vcpus=192, memory_gib=4096, arch="x86_64", gpu=B300, gpu_count=8,
        efa_interfaces=16, network_cards=17, max_enis=68, ipv4_per_eni=50, network_gbps=6400,
        efa_generation="EFAv4", confidence="cards/bandwidth V; EFA count D; HBM U",
    ),
]

# CPU types a ``system`` instance group may use: x86_64 only, because the inference operator image is
# amd64-only (the operator Helm chart pins it to kubernetes.io/arch=amd64). Sizes from EC2 DescribeInstanceTypes.
_SYSTEM_SIZES = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "12xlarge": 48,
                 "16xlarge": 64, "24xlarge": 96}
_GIB_PER_VCPU = {"m5": 4, "m6i": 4, "m7i": 4, "c6i": 2}
_SYSTEM = [
    InstanceSpec(name=f"ml.{family}.{size}", vcpus=cpus, memory_gib=cpus * gib, arch="x86_64")
    for family, gib in _GIB_PER_VCPU.items()
    for size, cpus in _SYSTEM_SIZES.items()
]

DPD_INSTANCE_TYPES: Mapping[str, InstanceSpec] = MappingProxyType({i.name: i for i in _DPD})
SYSTEM_INSTANCE_TYPES: Mapping[str, InstanceSpec] = MappingProxyType({i.name: i for i in _SYSTEM})
INSTANCE_TYPES: Mapping[str, InstanceSpec] = MappingProxyType({**DPD_INSTANCE_TYPES, **SYSTEM_INSTANCE_TYPES})


def instance(name: str) -> InstanceSpec:
    """Look an instance type up; ``KeyError`` names the allowed types."""
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}; known: {', '.join(sorted(INSTANCE_TYPES))}") from None
