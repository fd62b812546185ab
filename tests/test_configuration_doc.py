"""docs/configuration.md says it lists every key of an environment file: each section's table names every field of
the model that section documents (a key documented only in another page still gets its row, which links there)."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from hyperpod_dpd.config import EnvironmentConfig
from tests.paths import ROOT

DOC = (ROOT / "docs" / "configuration.md").read_text()


def _section(heading: str) -> str:
    """The text under ``heading`` (a ``##`` or ``###`` line), up to the next heading."""
    match = re.search(rf"^#{{2,3}} {re.escape(heading)}\n(.*?)(?=^#{{2,3}} |\Z)", DOC, re.M | re.S)
    assert match, f"docs/configuration.md has no heading {heading!r}"
    return match.group(1)


def _model(path: str) -> type[BaseModel]:
    """The model at a dotted field path of the environment file (``hyperpod.instance_groups``: one group)."""
    model: type[BaseModel] = EnvironmentConfig
    for part in filter(None, path.split(".")):
        candidates = [model.model_fields[part].annotation]
        while candidates:
            candidate = candidates.pop()
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                model = candidate
                break
            if typing.get_origin(candidate) in (typing.Annotated, typing.Union, types.UnionType, tuple, list):
                candidates.extend(typing.get_args(candidate))
        else:
            raise AssertionError(f"{path}: no model at {part!r}")
    return model


# heading in docs/configuration.md -> the field path of the model its table documents
SECTIONS = {
    "Top level": "",
    "`network`": "network",
    "`network.create`": "network.create",
    "`network.existing`": "network.existing",
    "`eks`": "eks",
    "`eks.system_node_group`": "eks.system_node_group",
    "`hyperpod`": "hyperpod",
    "`hyperpod.autoscaling`": "hyperpod.autoscaling",
    "`hyperpod.dependencies_chart`": "hyperpod.dependencies_chart",
    "`hyperpod.instance_groups[]`": "hyperpod.instance_groups",
    "`operator`": "operator",
    "`endpoints[]`": "endpoints",
    "`alerts`": "alerts",
}


def _documented(key: str, text: str) -> bool:
    # The key in backticks, alone or as one part of a dotted path (`observability.enabled`, `prefill.autoscaling`).
    return re.search(rf"`(?:[\w\[\]]+\.)*{re.escape(key)}(?:[.\[][^`]*)?`", text) is not None


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_every_key_of_the_section_has_a_row(heading: str) -> None:
    # GIVEN the model the section documents and the section's text
    model: Any = _model(SECTIONS[heading])
    text = _section(heading)
    # THEN every key a file may write there is named in it
    missing = [name for name, field in model.model_fields.items() if not _documented(field.alias or name, text)]
    assert not missing, f"docs/configuration.md, {heading}: no row for {missing}"
