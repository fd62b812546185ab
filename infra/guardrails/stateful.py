"""Which resources hold state, and which of their properties force a replacement when they change.

Used by the replacement guards: the logical ids of these resources are committed per environment
(``security/stateful-resources.json``, ``make stateful-manifest``), and tests prove that routine changes neither
rename them nor touch a create-only property. Create-only properties come from the CloudFormation registry schemas
(cfn-lint's copy), so the list follows AWS rather than memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STATEFUL_TYPES: tuple[str, ...] = (
    "AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::VPCCidrBlock", "AWS::EC2::SecurityGroup",
    "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup",
    "AWS::IAM::OIDCProvider",
)
# Data that must survive a stack deletion in an environment whose removal policy is "retain".
RETAINED_TYPES: tuple[str, ...] = ("AWS::S3::Bucket", "AWS::KMS::Key", "AWS::EKS::Cluster")


def stateful_resources(template: Mapping[str, Any]) -> dict[str, str]:
    """``logical id -> type`` of the stateful resources of one template."""
    return {k: v["Type"] for k, v in sorted(template.get("Resources", {}).items()) if v.get("Type") in STATEFUL_TYPES}


def create_only_values(resource: Mapping[str, Any], pointers: list[str]) -> dict[str, Any]:
    """The values of a resource at the schema's ``createOnlyProperties`` pointers (``/properties/Orchestrator/Eks``)."""
    values: dict[str, Any] = {}
    for pointer in pointers:
        parts = pointer.split("/")[2:]
        value: Any = resource.get("Properties", {})
        for part in parts:
            value = value.get(part) if isinstance(value, dict) else None
        values[pointer] = value
    return values
