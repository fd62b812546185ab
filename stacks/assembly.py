"""Reading a synthesized cloud assembly: the templates of every stage's stacks, by environment and stack part."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Synthesized:
    """The cloud assembly of a whole app, with its templates by ``(environment, stack part)``."""

    outdir: Path
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    stack_names: dict[tuple[str, str], str] = field(default_factory=dict)

    def template(self, env: str, part: str) -> dict[str, Any]:
        return self.templates[(env, part)]

    def resources(self, env: str, part: str, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template(env, part)["Resources"].items() if v["Type"] == type_}

    def only(self, env: str, part: str, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(env, part, type_)
        assert len(found) == 1, f"expected one {type_} in {env}/{part}, found {sorted(found)}"
        return next(iter(found.items()))


def read_assembly(outdir: Path) -> Synthesized:
    result = Synthesized(outdir)
    manifest = json.loads((outdir / "manifest.json").read_text())
    for artifact in manifest["artifacts"].values():
        if artifact.get("type") != "cdk:cloud-assembly":
            continue
        nested = outdir / artifact["properties"]["directoryName"]
        nested_manifest = json.loads((nested / "manifest.json").read_text())
        for stack in nested_manifest["artifacts"].values():
            if stack.get("type") != "aws:cloudformation:stack":
                continue
            stage, part = stack["displayName"].split("/", 1)
            key = (stage, part.lower())
            result.templates[key] = json.loads((nested / stack["properties"]["templateFile"]).read_text())
            result.stack_names[key] = stack["properties"].get("stackName", "")
    return result
