"""A small, offline evaluator of IAM identity policies, for testing synthesized templates.

It follows the IAM User Guide's policy evaluation logic for one principal's identity policies (no resource policies,
permissions boundaries, SCPs or session policies):

* a request is allowed when some ``Allow`` statement applies and no ``Deny`` statement applies (an explicit deny
  always wins; with nothing applying, the request is implicitly denied);
* a statement applies when its ``Action``/``NotAction``, ``Resource``/``NotResource`` and every condition match;
* actions match case-insensitively with ``*``/``?``; resources are ARNs matched component by component (partition,
  service, Region, account: a wildcard never crosses a ``:``), the resource part as a whole;
* conditions: every operator block and every key in it must hold (AND), any of a key's values may match (OR). The
  operators: ``String{Equals,NotEquals,EqualsIgnoreCase,NotEqualsIgnoreCase,Like,NotLike}``,
  ``Arn{Equals,Like,NotEquals,NotLike}``, ``Bool``, ``Null``, each with ``IfExists`` (not ``Null``) and the
  ``ForAnyValue:``/``ForAllValues:`` set qualifiers. A key missing from the request makes a positive operator false,
  a negated one (``...Not...``) true, any ``...IfExists`` true; ``ForAllValues`` over no values is true,
  ``ForAnyValue`` over no values is false. Condition key names are case-insensitive, values are not (except
  ``...IgnoreCase`` and ``Bool``).

Other operators (numeric, date, IP address, binary) raise :class:`UnsupportedPolicy`, so a test never passes on a
condition this module did not understand. :func:`resolve` turns the CloudFormation intrinsics CDK writes into
policies (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select``, ``Fn::Split``) into strings for one
account, Region and partition.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

URL_SUFFIXES = {"aws": "amazonaws.com", "aws-cn": "amazonaws.com.cn", "aws-us-gov": "amazonaws.com"}


class UnsupportedPolicy(ValueError):
    """The policy uses something this evaluator does not model."""


# -- CloudFormation intrinsics ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Deployment:
    """Where a template is deployed: pseudo parameters, and values for ``Ref``/``Fn::GetAtt`` of its resources.

    Unknown resources resolve to readable placeholders, ``<LogicalId>`` and ``<LogicalId.Attribute>``.
    """

    account: str = "111111111111"
    region: str = "us-west-2"
    partition: str = "aws"
    refs: Mapping[str, str] = field(default_factory=dict)
    attributes: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def pseudo(self, name: str) -> str | None:
        return {"AWS::AccountId": self.account, "AWS::Region": self.region, "AWS::Partition": self.partition,
                "AWS::URLSuffix": URL_SUFFIXES[self.partition], "AWS::StackName": "Stack"}.get(name)


def resolve(value: Any, deployment: Deployment) -> Any:
    """``value`` with every intrinsic function replaced by its string, recursively (lists and maps too)."""
    if isinstance(value, list):
        return [resolve(v, deployment) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (name, argument), = value.items()
        if name == "Ref":
            pseudo = deployment.pseudo(argument)
            return pseudo if pseudo is not None else deployment.refs.get(argument, f"<{argument}>")
        if name == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return deployment.attributes.get((logical_id, attribute), f"<{logical_id}.{attribute}>")
        if name == "Fn::Join":
            separator, parts = argument
            return separator.join(str(resolve(p, deployment)) for p in resolve(parts, deployment))
        if name == "Fn::Sub":
            template, variables = (argument, {}) if isinstance(argument, str) else argument
            values = {k: resolve(v, deployment) for k, v in variables.items()}

            def substitute(match: re.Match[str]) -> str:
                key = match.group(1)
                if key in values:
                    return str(values[key])
                if "." in key:
                    return str(resolve({"Fn::GetAtt": key.split(".", 1)}, deployment))
                return str(resolve({"Ref": key}, deployment))

            return re.sub(r"\$\{([^!}][^}]*)\}", substitute, template)
        if name == "Fn::Select":
            index, items = argument
            return resolve(items, deployment)[int(resolve(index, deployment))]
        if name == "Fn::Split":
            separator, text = argument
            return str(resolve(text, deployment)).split(separator)
        if name.startswith("Fn::") or name == "Condition":
            raise UnsupportedPolicy(f"intrinsic function {name} is not resolved by this evaluator")
    return {k: resolve(v, deployment) for k, v in value.items()}


# -- matching --------------------------------------------------------------------------------------------------------

def _glob(pattern: str, text: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcards: ``*`` any run of characters, ``?`` one character; nothing else is special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)  # not fnmatch: no [...]
    flags = (re.IGNORECASE | re.DOTALL) if ignore_case else re.DOTALL
    return re.fullmatch(regex, text, flags=flags) is not None


def action_matches(pattern: str, action: str) -> bool:
    return _glob(pattern, action, ignore_case=True)


def arn_matches(pattern: str, arn: str) -> bool:
    """``*`` alone matches everything; otherwise the six ARN components match one by one (the last, the resource,
    may hold ``:`` and ``/``)."""
    if pattern == "*":
        return True
    pattern_parts, arn_parts = pattern.split(":", 5), arn.split(":", 5)
    if len(pattern_parts) != 6 or len(arn_parts) != 6:
        return _glob(pattern, arn)
    return all(_glob(p, a) for p, a in zip(pattern_parts, arn_parts, strict=True))


# -- conditions ------------------------------------------------------------------------------------------------------

def _string_equals(policy: str, value: str) -> bool:
    return policy == value


def _string_equals_ignore_case(policy: str, value: str) -> bool:
    return policy.lower() == value.lower()


def _string_like(policy: str, value: str) -> bool:
    return _glob(policy, value)


def _bool(policy: str, value: str) -> bool:
    return policy.lower() == value.lower()


# operator -> (compare(policy value, request value), negated)
_OPERATORS = {
    "StringEquals": (_string_equals, False), "StringNotEquals": (_string_equals, True),
    "StringEqualsIgnoreCase": (_string_equals_ignore_case, False),
    "StringNotEqualsIgnoreCase": (_string_equals_ignore_case, True),
    "StringLike": (_string_like, False), "StringNotLike": (_string_like, True),
    "ArnEquals": (arn_matches, False), "ArnLike": (arn_matches, False),
    "ArnNotEquals": (arn_matches, True), "ArnNotLike": (arn_matches, True),
    "Bool": (_bool, False),
}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _values(value: Any) -> list[str]:
    return [_text(v) for v in (value if isinstance(value, list) else [value])]


def _lookup(context: Mapping[str, Any], key: str) -> list[str] | None:
    """The request's values of ``key`` (names are case-insensitive), or None when the key is absent."""
    for name, value in context.items():
        if name.lower() == key.lower():
            return None if value is None else _values(value)
    return None


def condition_holds(operator: str, key: str, policy_values: Any, context: Mapping[str, Any]) -> bool:
    """One key of one operator block against the request context."""
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAnyValue", "ForAllValues"):
        raise UnsupportedPolicy(f"condition set operator {qualifier}")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    expected = _values(policy_values)
    actual = _lookup(context, key)
    if base == "Null":
        if qualifier or if_exists:
            raise UnsupportedPolicy(f"{operator} is not a valid condition operator")
        absent = actual is None or actual == []
        return all((v.lower() == "true") == absent for v in expected)
    if base not in _OPERATORS:
        raise UnsupportedPolicy(f"condition operator {base}")
    compare, negated = _OPERATORS[base]

    def one(value: str) -> bool:
        matched = any(compare(p, value) for p in expected)
        return not matched if negated else matched

    if qualifier == "ForAllValues":  # vacuously true over no values: the documented pitfall
        return all(one(v) for v in actual or [])
    if qualifier == "ForAnyValue":
        return (actual is None and if_exists) or any(one(v) for v in actual or [])
    if actual is None:
        return if_exists or negated
    if len(actual) != 1:
        raise UnsupportedPolicy(f"{key} has several values; use ForAnyValue:/ForAllValues: with {base}")
    return one(actual[0])


def conditions_hold(conditions: Mapping[str, Mapping[str, Any]] | None, context: Mapping[str, Any]) -> bool:
    return all(condition_holds(operator, key, values, context)
               for operator, block in (conditions or {}).items() for key, values in block.items())


# -- evaluation ------------------------------------------------------------------------------------------------------

class Decision(enum.Enum):
    ALLOW = "Allow"
    EXPLICIT_DENY = "ExplicitDeny"
    IMPLICIT_DENY = "ImplicitDeny"


@dataclass(frozen=True)
class Request:
    """One API call as IAM sees it: the action, the resource ARN, and the request context's condition keys."""

    action: str
    resource: str = "*"
    context: Mapping[str, str | bool | Sequence[str]] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.action} on {self.resource}" + (f" with {dict(self.context)}" if self.context else "")


@dataclass(frozen=True)
class Result:
    decision: Decision
    statements: tuple[str, ...]  # the Sids (or indexes) that decided: the denying ones, else the allowing ones

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


def _as_list(value: Any) -> list[Any]:
    return [] if value is None else value if isinstance(value, list) else [value]


def statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "Principal" in statement or "NotPrincipal" in statement:
        raise UnsupportedPolicy("resource-based policy statements (Principal) are not evaluated")
    if ("Action" in statement) == ("NotAction" in statement):
        raise UnsupportedPolicy("a statement needs exactly one of Action and NotAction")
    if "Action" in statement:
        action_ok = any(action_matches(a, request.action) for a in _as_list(statement["Action"]))
    else:
        action_ok = not any(action_matches(a, request.action) for a in _as_list(statement["NotAction"]))
    if not action_ok:
        return False
    if "NotResource" in statement:
        resource_ok = not any(arn_matches(r, request.resource) for r in _as_list(statement["NotResource"]))
    else:
        resource_ok = any(arn_matches(r, request.resource) for r in _as_list(statement.get("Resource")))
    return resource_ok and conditions_hold(statement.get("Condition"), request.context)


def evaluate(documents: Iterable[Mapping[str, Any]], request: Request) -> Result:
    """The decision of a principal's identity policies (already resolved: plain strings) on ``request``."""
    allows: list[str] = []
    denies: list[str] = []
    for document in documents:
        for index, statement in enumerate(_as_list(document.get("Statement"))):
            if statement_applies(statement, request):
                name = statement.get("Sid") or f"#{index}"
                (denies if statement["Effect"] == "Deny" else allows).append(name)
    if denies:
        return Result(Decision.EXPLICIT_DENY, tuple(denies))
    if allows:
        return Result(Decision.ALLOW, tuple(allows))
    return Result(Decision.IMPLICIT_DENY, ())


# -- templates -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RolePolicies:
    """The identity policies of one role in a template: the documents it can evaluate, and the AWS managed
    policies it cannot (their content is not in the template)."""

    documents: tuple[Mapping[str, Any], ...]
    unevaluated: tuple[str, ...]

    def evaluate(self, request: Request) -> Result:
        return evaluate(self.documents, request)


def role_policies(template: Mapping[str, Any], role_id: str, deployment: Deployment = Deployment()) -> RolePolicies:
    """Inline policies of ``role_id``, ``AWS::IAM::Policy`` resources attached to it, and customer managed policies of
    the template it lists, resolved for ``deployment``."""
    resources = template["Resources"]
    role = resources[role_id]["Properties"]
    documents = [p["PolicyDocument"] for p in role.get("Policies", [])]
    unevaluated = []
    for managed in role.get("ManagedPolicyArns", []):
        if isinstance(managed, dict) and "Ref" in managed and managed["Ref"] in resources:
            documents.append(resources[managed["Ref"]]["Properties"]["PolicyDocument"])
        else:
            unevaluated.append(str(resolve(managed, deployment)))
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"].get("Roles", []):
            documents.append(resource["Properties"]["PolicyDocument"])
    return RolePolicies(tuple(resolve(d, deployment) for d in documents), tuple(unevaluated))


__all__ = ["Decision", "Deployment", "Request", "Result", "RolePolicies", "UnsupportedPolicy", "action_matches",
           "arn_matches", "condition_holds", "evaluate", "resolve", "role_policies", "statement_applies"]
