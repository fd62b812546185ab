"""IAM rules: partition-aware ARNs and no full wildcard grants."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings, as_list
from hyperpod_dpd.infra.guardrails.templates import Resource, StageTemplates

_LITERAL_PARTITION = re.compile(r"arn:aws(-cn|-us-gov|-iso[a-z-]*)?:")
IAM_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role")


def _documents(resource: Resource) -> Iterator[tuple[str, Any]]:
    if resource.type == "AWS::IAM::Role":
        for index, policy in enumerate(resource.properties.get("Policies", [])):
            yield f"Properties.Policies[{index}].PolicyDocument", policy.get("PolicyDocument", {})
        yield "Properties.ManagedPolicyArns", resource.properties.get("ManagedPolicyArns", [])
    else:
        yield "Properties.PolicyDocument", resource.properties.get("PolicyDocument", {})


def _partition_aware(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for resource in templates.resources(*IAM_TYPES):
        for location, document in _documents(resource):
            literal = sorted(set(m.group(0) for m in _LITERAL_PARTITION.finditer(json.dumps(document))))
            if literal:
                yield Finding(resource, location, f"hard-codes the partition ({', '.join(literal)}); use ${{AWS::Partition}}")


def _no_full_wildcard(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for resource in templates.resources(*IAM_TYPES):
        for location, document in _documents(resource):
            if not isinstance(document, dict):
                continue
            for index, statement in enumerate(as_list(document.get("Statement"))):
                if statement.get("Effect") == "Allow" and "*" in as_list(statement.get("Action")) \
                        and "*" in as_list(statement.get("Resource")):
                    yield Finding(resource, f"{location}.Statement[{index}]", "allows every action on every resource")


RULES = [
    Rule(id="HPDPD-IAM1", description="IAM ARNs must take the partition from ${AWS::Partition}",
         fix="Build ARNs with hyperpod_dpd.infra.arns.arn / iam_arn", check=_partition_aware),
    Rule(id="HPDPD-IAM2", description="No IAM statement may allow '*' actions on '*' resources",
         fix="Grant the specific actions on the specific resources", check=_no_full_wildcard),
]
