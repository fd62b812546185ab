"""Views of the real synthesized stages, deep-copied so each test can break one thing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_dpd.infra.guardrails.rules import RULES, Settings
from hyperpod_dpd.infra.guardrails.templates import StageTemplates


def stage_view(synthesized: Any, env: str) -> StageTemplates:
    templates = {f"{e}/{part}": copy.deepcopy(t) for (e, part), t in synthesized.templates.items() if e == env}
    names = {synthesized.stack_names[(e, part)]: f"{e}/{part}" for (e, part) in synthesized.templates if e == env}
    return StageTemplates.from_dicts(templates, names)


def run(rule_id: str, view: StageTemplates, settings: Settings = Settings()) -> list[Any]:
    rule = next(r for r in RULES if r.id == rule_id)
    return list(rule.check(view, settings))


@pytest.fixture
def view(synthesized: Any) -> Callable[[str], StageTemplates]:
    return lambda env="dev": stage_view(synthesized, env)


def first(view: StageTemplates, type_: str, prefix: str = "") -> dict[str, Any]:
    """The raw resource dict (mutable) of the first resource of a type, optionally by logical-id prefix."""
    for template in view.templates.values():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == type_ and logical_id.startswith(prefix):
                return resource
    raise AssertionError(f"no {type_} {prefix}")
