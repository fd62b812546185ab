"""Which resource types each IAM action is authorized on, offline, and the scoping mistakes that follow from it.

The data is AWS's machine-readable Service Authorization Reference as cfn-lint ships it
(``cfnlint/data/AdditionalSpecs/Policies.json`` in cfn-lint 1.58.0; ``cfnlint/maintenance.py``, ``update_iam_policies``,
builds it from the reference's per-service JSON): for each service prefix, each action (lower case) with the resource
types it is authorized on (``Resources``; none listed: the action takes no resource, and IAM grants it only through
``"Resource": "*"``).

:func:`scoping_problems` reads the identity policies of CloudFormation templates and names, per statement:

* an action on ``*`` that takes a resource type (it could be scoped), unless the caller keeps it there with a reason;
* an action on ARNs only that takes no resource type (the grant is void), unless the caller keeps it with a reason;
* an action the reference does not know (a typo grants nothing), and ``*`` or ``service:*`` as an action;
* ``iam:PassRole`` without an ``iam:PassedToService`` condition.

Actions with a wildcard in their name (``s3:GetObject*``, as aws-cdk-lib's grants write them) are checked only for
the last two points: a family mixes actions with and without resource types.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

IAM_POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")

# This project's exemptions, each with its reason (infra/policies.py says which statements keep them).
# Actions kept on "*" although the reference lists a resource type for them.
KEPT_ON_EVERY_RESOURCE: Mapping[str, str] = {
    # The load balancer controller asks for the protection of a load balancer (DescribeProtection with ResourceArn);
    # which protection ARN IAM then authorizes is not documented, so AWS's "*" stays.
    "shield:DescribeProtection": "called with the load balancer's ARN, not a protection's",
    # KEDA's CloudWatch triggers read metrics by namespace and name; "dataset" is an optional resource type of
    # CloudWatch's, not the metrics a trigger names.
    "cloudwatch:GetMetricData": "metrics are no resource; 'dataset' is not what KEDA reads",
    "cloudwatch:ListMetrics": "metrics are no resource; 'dataset' is not what KEDA reads",
}
# Actions on ARNs although the reference lists no resource type (so that part of the grant is void).
KEPT_VOID: Mapping[str, str] = {
    # AWS's HyperPodObservabilityAddonRole (observability-template.yaml @ 14144a4, CloudwatchLogsAccess) grants both
    # on the /aws/sagemaker/Clusters/* log groups too; kept as AWS's role has them until the collector's calls are
    # known (on "*" they would widen what AWS grants).
    "logs:DescribeLogGroups": "as AWS's observability role grants it",
    "logs:StopQuery": "as AWS's observability role grants it",
}


class UnknownAction(KeyError):
    """The Service Authorization Reference lists no such action."""


@functools.cache
def _services() -> dict[str, Any]:
    data = resources.files("cfnlint.data.AdditionalSpecs").joinpath("Policies.json").read_text()
    return json.loads(data)


def resource_types(action: str) -> tuple[str, ...]:
    """The resource types ``action`` (``service:Name``) is authorized on; ``()`` when it takes none."""
    service, _, name = action.partition(":")
    entry = _services().get(service.lower(), {}).get("Actions", {}).get(name.lower())
    if entry is None:
        raise UnknownAction(action)
    return tuple(entry.get("Resources", ()))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def identity_statements(template: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(logical id, statement)`` for every statement of every identity policy in ``template``: inline policies of
    roles, ``AWS::IAM::Policy`` and ``AWS::IAM::ManagedPolicy`` (trust policies are not identity policies)."""
    for logical_id, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in properties.get("Policies", [])]
        elif resource["Type"] in IAM_POLICY_TYPES:
            documents = [properties["PolicyDocument"]]
        else:
            continue
        for document in documents:
            for statement in _as_list(document.get("Statement", [])):
                yield logical_id, statement


def scoping_problems(templates: Mapping[str, Mapping[str, Any]], *,
                     kept_on_every_resource: Mapping[str, str] = KEPT_ON_EVERY_RESOURCE,
                     kept_void: Mapping[str, str] = KEPT_VOID, all_exemptions_used: bool = True) -> list[str]:
    """One line per problem (see the module docstring) in the Allow statements of ``templates`` (name -> template).

    ``kept_on_every_resource`` and ``kept_void`` map actions to the reason they are kept on ``*``, or on ARNs although
    void; with ``all_exemptions_used`` every entry must be needed, so a fixed grant cannot leave its exemption behind.
    """
    problems: list[str] = []
    used: set[str] = set()
    for name, template in templates.items():
        for logical_id, statement in identity_statements(template):
            if statement.get("Effect") != "Allow" or "Action" not in statement:
                continue
            where = f"{name}/{logical_id}/{statement.get('Sid', '-')}"
            everywhere = "*" in _as_list(statement.get("Resource", []))
            for action in _as_list(statement["Action"]):
                service, _, operation = action.partition(":")
                if action == "*" or operation == "*":
                    problems.append(f"{where}: {action} grants every action of {service or 'every service'}")
                    continue
                if action.lower() == "iam:passrole" and not _names_passed_to_service(statement.get("Condition", {})):
                    problems.append(f"{where}: iam:PassRole without an iam:PassedToService condition")
                if "*" in operation or "?" in operation:
                    continue  # an action family: only the checks above
                try:
                    types = resource_types(action)
                except UnknownAction:
                    problems.append(f"{where}: {action} is not an action of the Service Authorization Reference")
                    continue
                if everywhere and types:
                    if action in kept_on_every_resource:
                        used.add(action)
                    else:
                        problems.append(f"{where}: {action} is on '*' but takes {', '.join(types)}")
                if not everywhere and not types:
                    if action in kept_void:
                        used.add(action)
                    else:
                        problems.append(f"{where}: {action} takes no resource type, so on ARNs it grants nothing")
    if all_exemptions_used:
        problems += [f"exemption of {a} is not needed any more"
                     for a in sorted({*kept_on_every_resource, *kept_void} - used)]
    return problems


def _names_passed_to_service(conditions: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(key.lower() == "iam:passedtoservice" for block in conditions.values() for key in block)
