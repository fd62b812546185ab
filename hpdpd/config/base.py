"""Base model and shared field types of the environment configuration."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict

from hpdpd.errors import Issue


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


def _pattern(regex: str, what: str):
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


AccountId = Annotated[str, _pattern(r"\d{12}", "a 12-digit AWS account id (quote it in YAML)")]
Region = Annotated[str, _pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS Region code such as 'us-west-2'")]
AvailabilityZone = Annotated[str, _pattern(r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]", "an Availability Zone name such as 'us-west-2a'")]
ResourceName = Annotated[
    str,
    _pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", "1-63 letters, digits and hyphens, starting and ending with a letter or digit"),
]
Cidr = Annotated[str, AfterValidator(_cidr)]
IamPrincipalArn = Annotated[
    str,
    _pattern(
        r"arn:aws(-cn|-us-gov)?:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+",
        "an IAM role or user ARN such as 'arn:aws:iam::111111111111:role/PlatformAdmin'",
    ),
]
