"""The single catalogue of versions, limits and hardware figures.

Every figure that the toolkit checks or emits lives here, with its source.
Nothing else in the project hard-codes a version or an instance figure.
"""

from hyperpod_dpd.catalogue.instances import (
    DPD_INSTANCE_TYPES,
    INSTANCE_TYPES,
    SYSTEM_INSTANCE_TYPES,
    GpuSpec,
    InstanceSpec,
    instance,
)
from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS
from hyperpod_dpd.catalogue.versions import (
    CORE_ADDONS,
    DEFAULT_EKS_VERSION,
    EKS_VERSIONS,
    AddonVersion,
    parse_addon_version,
)

__all__ = [
    "CORE_ADDONS",
    "DEFAULT_EKS_VERSION",
    "DPD_INSTANCE_TYPES",
    "EKS_VERSIONS",
    "HYPERPOD_REGIONS",
    "INSTANCE_TYPES",
    "SYSTEM_INSTANCE_TYPES",
    "AddonVersion",
    "GpuSpec",
    "InstanceSpec",
    "instance",
    "parse_addon_version",
]
