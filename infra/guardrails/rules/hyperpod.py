"""HyperPod rules: recovery, deep health checks, the EFA security group, the execution role."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings, as_list
from hyperpod_dpd.infra.guardrails.templates import Resource, StageTemplates

GPU_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
ADMIN_POLICIES = ("AdministratorAccess", "PowerUserAccess", "IAMFullAccess")
_ADMIN_ARN = re.compile(r"policy/(" + "|".join(ADMIN_POLICIES) + r")\"")


def _node_recovery(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for cluster in templates.resources("AWS::SageMaker::Cluster"):
        if cluster.properties.get("NodeRecovery") != "Automatic":
            yield Finding(cluster, "Properties.NodeRecovery", f"is {cluster.properties.get('NodeRecovery')!r}")


def _deep_health_checks(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for cluster in templates.resources("AWS::SageMaker::Cluster"):
        for index, group in enumerate(cluster.properties.get("InstanceGroups", [])):
            spec = INSTANCE_TYPES.get(group.get("InstanceType", ""))
            if spec is None or not spec.is_gpu:
                continue
            missing = [c for c in GPU_HEALTH_CHECKS if c not in group.get("OnStartDeepHealthChecks", [])]
            if missing:
                yield Finding(cluster, f"Properties.InstanceGroups[{index}].OnStartDeepHealthChecks",
                              f"GPU group {group.get('InstanceGroupName')} skips {missing}")


def _efa_group_closed(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for cluster in templates.resources("AWS::SageMaker::Cluster"):
        for ref in cluster.properties.get("VpcConfig", {}).get("SecurityGroupIds", []):
            group = templates.target(cluster.template_path, ref)
            if group is None or group.type != "AWS::EC2::SecurityGroup":
                continue  # created outside these templates (e.g. the EKS cluster security group)
            yield from _outside_ingress(templates, group)


def _outside_ingress(templates: StageTemplates, group: Resource) -> Iterator[Finding]:
    for index, rule in enumerate(group.properties.get("SecurityGroupIngress", [])):
        yield Finding(group, f"Properties.SecurityGroupIngress[{index}]", f"inline ingress {rule}")
    for ingress in templates.resources("AWS::EC2::SecurityGroupIngress"):
        target = templates.target(ingress.template_path, ingress.properties.get("GroupId"))
        if target is None or (target.template_path, target.logical_id) != (group.template_path, group.logical_id):
            continue
        source = templates.target(ingress.template_path, ingress.properties.get("SourceSecurityGroupId"))
        foreign = any(k in ingress.properties for k in ("CidrIp", "CidrIpv6", "SourcePrefixListId"))
        if foreign or source is None or (source.template_path, source.logical_id) != (group.template_path, group.logical_id):
            yield Finding(ingress, "Properties", f"admits traffic from outside EFA security group {group.logical_id}")


def _execution_role_not_admin(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    seen: set[tuple[str, str]] = set()
    for cluster in templates.resources("AWS::SageMaker::Cluster"):
        for group in cluster.properties.get("InstanceGroups", []):
            role = templates.target(cluster.template_path, group.get("ExecutionRole"))
            if role is None or (role.template_path, role.logical_id) in seen:
                continue
            seen.add((role.template_path, role.logical_id))
            for arn in role.properties.get("ManagedPolicyArns", []):
                if _ADMIN_ARN.search(json.dumps(arn)):
                    yield Finding(role, "Properties.ManagedPolicyArns", f"attaches an admin managed policy {arn}")
            documents = [p.get("PolicyDocument", {}) for p in role.properties.get("Policies", [])]
            documents += [p.properties.get("PolicyDocument", {}) for p in templates.resources("AWS::IAM::Policy")
                          if {"Ref": role.logical_id} in p.properties.get("Roles", []) and p.template_path == role.template_path]
            for document in documents:
                for statement in as_list(document.get("Statement")):
                    actions = as_list(statement.get("Action"))
                    if statement.get("Effect") == "Allow" and any(a in ("*", "iam:*", "sts:*") for a in actions):
                        yield Finding(role, "PolicyDocument", f"grants {actions}")


RULES = [
    Rule(id="HPDPD-HP1", description="HyperPod node recovery must be Automatic",
         fix="Set hyperpod.node_recovery: Automatic (needs the health-monitoring agent of the dependencies chart)",
         check=_node_recovery),
    Rule(id="HPDPD-HP2", description="GPU instance groups must run the InstanceStress and InstanceConnectivity deep health checks",
         fix="Remove deep_health_checks from the group to get both, or list both", check=_deep_health_checks),
    Rule(id="HPDPD-HP3", description="The EFA security group of a HyperPod cluster must admit traffic only from itself",
         fix="Remove the ingress rule; reach HyperPod pods through the EKS cluster security group or a load balancer",
         check=_efa_group_closed),
    Rule(id="HPDPD-HP4", description="The HyperPod execution role must not be an administrator",
         fix="Grant the specific actions the nodes need (see HyperPodCluster._grant_node_permissions)",
         check=_execution_role_not_admin),
]
