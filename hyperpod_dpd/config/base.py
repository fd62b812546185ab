"""Base model and shared field types of the environment configuration."""

from __future__ import annotations

import functools
import ipaddress
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationInfo, field_validator

from hyperpod_dpd.catalogue.versions import AddonVersion, parse_addon_version
from hyperpod_dpd.catalogue.zones import LOCAL_ZONE_WHY, is_local_zone, zone_kind
from hyperpod_dpd.errors import MISSING, Issue

NumberKind = Literal["int", "float"]
_BOOLEANS = "YAML reads true/false, yes/no and on/off as booleans"


class YamlOctal(int):
    """An integer the YAML file wrote with a leading zero, such as ``010``: YAML 1.1 (PyYAML) reads it as octal (8),
    YAML 1.2 as decimal (10). The loader keeps the text so checks can refuse the ambiguity and quote the original."""

    text: str

    def __new__(cls, value: int, text: str) -> YamlOctal:
        number = super().__new__(cls, value)
        number.text = text
        return number

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Any, ...]:
        return (YamlOctal, (int(self), self.text))


def number_problem(value: Any, kind: NumberKind) -> str | None:
    """Why ``value`` is not a number of ``kind``, or None. Strict: no booleans, no quoted numbers, no ``2.0`` counts."""
    what = "a whole number" if kind == "int" else "a number"
    if isinstance(value, bool):
        return f"must be {what}, not a boolean ({_BOOLEANS})"
    if isinstance(value, YamlOctal):
        return (f"is ambiguous: YAML 1.1 reads {value.text} as the octal number {int(value)}; write the number "
                "without a leading zero")
    if isinstance(value, int) or (kind == "float" and isinstance(value, float)):
        return None
    if isinstance(value, str):
        quoted = re.fullmatch(r"\s*[-+]?\d[\d_]*(\.\d*)?\s*", value)
        return f"must be {what}, not a string" + (" (write it without quotes)" if quoted else "")
    if isinstance(value, float):
        return f"must be {what} (no decimal point)"
    return None  # lists, mappings: pydantic's own type error says what is wrong


def _number_kind(annotation: Any) -> NumberKind | None:
    """``int`` for int, ``Literal[1, 2]`` and their Optional forms; ``float`` for float; None for anything else."""
    kinds: set[str] = set()
    pending = [annotation]
    while pending:
        current = pending.pop()
        origin = typing.get_origin(current)
        if origin is Annotated:
            pending.append(typing.get_args(current)[0])
        elif origin in (typing.Union, types.UnionType):
            pending.extend(typing.get_args(current))
        elif origin is Literal:
            args = typing.get_args(current)
            kinds.add("int" if all(type(a) is int for a in args) else "other")
        elif current is type(None):
            continue
        elif current is int:
            kinds.add("int")
        elif current is float:
            kinds.add("float")
        else:
            kinds.add("other")
    if not kinds or "other" in kinds:
        return None
    return "float" if "float" in kinds else "int"


@functools.cache
def number_fields(model: type[BaseModel]) -> dict[str, NumberKind]:
    """The fields of ``model`` that take a number, and which kind."""
    return {name: kind for name, field in model.model_fields.items()
            if (kind := _number_kind(field.annotation)) is not None}


class Model(BaseModel):
    """Frozen, strict-keyed base: unknown keys are errors, objects are immutable once loaded.

    Numbers are strict: a field that takes a number refuses a boolean (YAML reads ``yes`` as true, and pydantic
    would read true as 1), a quoted number and an ambiguous ``010``; a whole-number field refuses ``2.0``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @field_validator("*", mode="before")
    @classmethod
    def _strict_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        kind = number_fields(cls).get(info.field_name or "")
        if kind is None or value is None:
            return value
        problem = number_problem(value, kind)
        if problem:
            raise ValueError(problem)
        return value

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Cross-field checks that need the whole environment (``root``); ``path`` prefixes field paths."""
        return iter(())

    def given(self, name: str) -> Any:
        """The value of field ``name`` for an error line: :data:`MISSING` when the key was left out."""
        return getattr(self, name) if name in self.model_fields_set else MISSING


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


def _account_suggestion(value: int) -> str | None:
    """The quoted form the author most likely meant for an account id YAML read as a number."""
    if isinstance(value, YamlOctal):
        return value.text if re.fullmatch(r"\d{12}", value.text) else None
    digits = str(value)
    if value >= 0 and len(digits) == 12:
        return digits
    if value >= 0 and len(digits) == 11:
        return "0" + digits  # a reader that drops the leading zero of 012345678901
    return None


def _account_number(value: Any) -> Any:
    """An unquoted account id is a YAML number (and loses a leading zero or turns octal): say to quote it."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    suggestion = _account_suggestion(value)
    read = (f"YAML reads the unquoted {value.text} as the octal number {int(value)}; "
            if isinstance(value, YamlOctal) else "")
    if suggestion:
        raise ValueError(f"must be a 12-digit string; {read}quote it in YAML (\"{suggestion}\")")
    raise ValueError(f"must be a 12-digit string; {read}quote the account id in YAML, leading zeros included")


AccountId = Annotated[str, BeforeValidator(_account_number),
                      pattern(r"\d{12}", "a 12-digit AWS account id (quote it in YAML)")]

Region = Annotated[str, pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS Region code such as 'us-west-2'")]


def _zone(*, ids: bool) -> AfterValidator:
    """An Availability Zone name (``us-west-2a``), or with ``ids`` also an AZ ID (``usw2-az2``); which zones exist in
    the environment's Region is checked with the Region (hyperpod_dpd.catalogue.zones.check_zone)."""
    allowed = "an Availability Zone name such as 'us-west-2a'" + (" or an AZ ID such as 'usw2-az2'" if ids else "")

    def check(value: str) -> str:
        kind = zone_kind(value)
        if kind == "name" or (kind == "id" and ids):
            return value
        if kind == "id":
            raise ValueError("is an AZ ID; this field takes the AZ's name (such as 'us-west-2a'), which "
                             "'aws ec2 describe-availability-zones' lists next to the ID for your account")
        if is_local_zone(value):
            raise ValueError(LOCAL_ZONE_WHY)
        raise ValueError(f"must be {allowed}")

    return AfterValidator(check)


AvailabilityZone = Annotated[str, _zone(ids=False)]
# The GPU zone and the zones that must equal it: GPU capacity is reported per AZ ID (docs/configuration.md, "Zones").
AvailabilityZoneRef = Annotated[str, _zone(ids=True)]
Cidr = Annotated[str, AfterValidator(_cidr)]
_IAM_NAME = r"[\w+=,.@-]{1,64}"
IamPrincipalArn = Annotated[
    str,
    pattern(
        rf"arn:aws(-cn|-us-gov)?:(iam|sts)::\d{{12}}:((role|user)(/[\w+=,.@-]+)*/{_IAM_NAME}|assumed-role/{_IAM_NAME}/{_IAM_NAME})",
        "an IAM role or user ARN such as 'arn:aws:iam::111111111111:role/PlatformAdmin' (names of at most 64 characters)",
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
