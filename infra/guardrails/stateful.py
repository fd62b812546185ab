"""Which resources hold state, which of their properties force a replacement when they change, and how an
environment whose removal policy is ``retain`` keeps all of them.

Used by the replacement guards: the logical ids of these resources are committed per environment
(``security/stateful-resources.json``, ``make stateful-manifest``), and tests prove that routine changes neither
rename them nor touch a create-only property, theirs or that of a resource they point at
(:func:`replaced_resources`). Create-only properties come from the CloudFormation registry schemas
(cfn-lint's copy), so the list follows AWS rather than memory. :func:`retain_stateful_resources` gives every one
of them ``DeletionPolicy`` and ``UpdateReplacePolicy`` ``Retain`` in such an environment (rule ``HPDPD-DATA1`` checks
it in production).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct

STATEFUL_TYPES: tuple[str, ...] = (
    "AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::VPCCidrBlock", "AWS::EC2::SecurityGroup",
    "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup",
    "AWS::IAM::OIDCProvider", "AWS::APS::Workspace", "AWS::Grafana::Workspace",
)
# What must survive a stack deletion or a replacement in an environment whose removal policy is "retain": every
# stateful type. The HyperPod cluster holds the GPU capacity (and any training-plan reservation); the network holds
# what the cluster's create-only VpcConfig points at; the Prometheus workspace holds the metrics history the SLO
# alerts and the canary read, the Grafana workspace its users, permissions and dashboards.
RETAINED_TYPES: tuple[str, ...] = STATEFUL_TYPES
RETAIN_ATTRIBUTES: tuple[str, ...] = ("DeletionPolicy", "UpdateReplacePolicy")


def retain_stateful_resources(scope: IConstruct, policy: cdk.RemovalPolicy) -> None:
    """Retain every stateful resource under ``scope`` when ``policy`` is ``RETAIN``; any other policy changes nothing
    (each construct keeps the policy it was given).

    ``RETAIN`` sets both ``DeletionPolicy`` and ``UpdateReplacePolicy`` on every ``CfnResource`` of a
    :data:`RETAINED_TYPES` type in the subtree, whatever its construct chose: one mechanism for L2 constructs, L1
    resources (the HyperPod cluster) and what aws-cdk-lib creates inside them. It is aws-cdk-lib's own
    ``RemovalPolicies`` aspect, which runs inside the CDK: a Python aspect would cost a call from the CDK into
    Python for every construct of the environment.
    """
    if policy == cdk.RemovalPolicy.RETAIN:
        cdk.RemovalPolicies.of(scope).retain(apply_to_resource_types=list(RETAINED_TYPES),
                                             priority=cdk.AspectPriority.MUTATING)


def missing_retention(resource: Mapping[str, Any]) -> dict[str, Any]:
    """The retention attributes of one template resource that are not ``Retain``, with their values."""
    return {a: resource.get(a) for a in RETAIN_ATTRIBUTES if resource.get(a) != "Retain"}


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


def _references(value: Any) -> set[str]:
    """The logical ids a template value points at: ``Ref`` and ``Fn::GetAtt`` (the list and the ``"Id.Attr"`` forms),
    anywhere inside it (``Fn::Join``, ``Fn::Sub``'s variable map)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str) and not inner.startswith("AWS::"):
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) and inner else inner
                if isinstance(target, str):
                    found.add(target.split(".")[0])
            else:
                found |= _references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _references(inner)
    return found


def replaced_resources(before: Mapping[str, Any], after: Mapping[str, Any],
                       create_only: Callable[[str], Sequence[str]]) -> dict[str, str]:
    """``logical id -> why`` for every resource of ``before`` that deploying ``after`` over it replaces or deletes:
    its logical id is gone, one of its create-only properties (``create_only(type)``, the registry schema's
    ``createOnlyProperties``) has another value, or a create-only property points at a resource that is itself
    replaced (a new role gives the EKS cluster's ``RoleArn`` a new value although the template text is the same).
    References are followed within the one template."""
    old, new = before.get("Resources", {}), after.get("Resources", {})
    why: dict[str, str] = {}
    pointed: dict[str, set[str]] = {}
    for logical_id, resource in old.items():
        if logical_id not in new or new[logical_id].get("Type") != resource.get("Type"):
            why[logical_id] = "removed or renamed"
            continue
        pointers = list(create_only(resource["Type"]))
        then, now = create_only_values(resource, pointers), create_only_values(new[logical_id], pointers)
        changed = [p for p in pointers if then[p] != now[p]]
        if changed:
            why[logical_id] = f"create-only {', '.join(changed)} changed"
        pointed[logical_id] = _references(now)
    grown = True
    while grown:  # a replacement propagates through create-only references until nothing more is replaced
        grown = False
        for logical_id, targets in pointed.items():
            hit = sorted(t for t in targets if t in why)
            if logical_id not in why and hit:
                why[logical_id] = f"a create-only property points at replaced {', '.join(hit)}"
                grown = True
    return why
