"""What a rule is: an id, what it checks, how to fix it, and a check over the stage's templates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hyperpod_dpd.infra.guardrails.templates import Resource, StageTemplates


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Environment facts the rules need, passed in as values (never derived from the environment's name)."""

    production: bool = False


@dataclass(frozen=True)
class Finding:
    resource: Resource
    location: str
    detail: str


Check = Callable[[StageTemplates, Settings], Iterator[Finding]]


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    description: str
    fix: str
    check: Check


def as_list(value: object) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
