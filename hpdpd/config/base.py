"""Base model and shared field types of the environment configuration."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any

from hyperpod_dpd.catalogue.versions import AddonVersion, parse_addon_version
from hyperpod_dpd.errors import Issue
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict


class Model(BaseModel):
    """Frozen, strict-keyed base: unknown keys are errors, objects are immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Cross-field checks that need the whole environment (``root``); ``path`` prefixes field paths."""
        return iter(())


def join(path: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{path}[{name}]"
    return f"{path}.{name}" if path else name


def pattern(regex: str, what: str) -> AfterValidator:
    """A string field that must fully match ``regex``; the error says what it must be."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return AfterValidator(check)


def _cidr(value: str) -> str:
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 CIDR block such as '10.192.0.0/16' ({exc})") from None
    return str(net)


AccountId = Annotated[str, pattern(r"\d{12}", "a 12-digit AWS account id (quote it in YAML)")]
Region = Annotated[str, pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS Region code such as 'us-west-2'")]
AvailabilityZone = Annotated[str, pattern(r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]", "an Availability Zone name such as 'us-west-2a'")]
ResourceName = Annotated[
    str,
    pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", "1-63 letters, digits and hyphens, starting and ending with a letter or digit"),
]
Cidr = Annotated[str, AfterValidator(_cidr)]
IamPrincipalArn = Annotated[
    str,
    pattern(
        r"arn:aws(-cn|-us-gov)?:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+",
        "an IAM role or user ARN such as 'arn:aws:iam::111111111111:role/PlatformAdmin'",
    ),
]


def quoted_choice(allowed: Iterable[str], *, example: str, rule: str) -> BeforeValidator:
    """A version-like string from ``allowed``. YAML reads an unquoted ``1.30`` as the number 1.3, so a number is
    refused with the advice to quote it rather than silently becoming another version."""
    choices = tuple(allowed)

    def check(value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError(f"must be a quoted string such as '{example}' (YAML reads {value} as a number)")
        if not isinstance(value, str) or value not in choices:
            raise ValueError(rule)
        return value

    return BeforeValidator(check)


def addon_version_issues(path: str, versions: Mapping[str, str], minimums: Mapping[str, AddonVersion | None],
                         *, kind: str, why: str) -> Iterator[Issue]:
    """Check ``{add-on name: version}`` overrides: a known add-on, a well-formed version, at or above its minimum."""
    for name, version in versions.items():
        where = join(path, name)
        if name not in minimums:
            yield Issue(where, name, f"is not a {kind} add-on; allowed: {', '.join(minimums)}")
            continue
        try:
            parsed = parse_addon_version(version)
        except ValueError as exc:
            yield Issue(where, version, str(exc))
            continue
        minimum = minimums[name]
        if minimum is not None and parsed < minimum:
            yield Issue(where, version, f"is below the minimum {why} ({minimum}); set {minimum} or newer")
