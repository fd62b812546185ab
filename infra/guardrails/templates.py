"""Read-only view of a stage's synthesized templates, with cross-stack references resolved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Resource:
    template_path: str
    logical_id: str
    type: str
    properties: dict[str, Any]


@dataclass
class StageTemplates:
    """All templates a validation plugin is given, indexed by path and by stack name."""

    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    stack_names: dict[str, str] = field(default_factory=dict)  # stack name -> template path

    @classmethod
    def load(cls, paths: list[str]) -> StageTemplates:
        view = cls()
        for path in paths:
            view.templates[path] = json.loads(Path(path).read_text())
        for directory in {Path(p).parent for p in paths}:
            manifest = directory / "manifest.json"
            if not manifest.is_file():
                continue
            for artifact in json.loads(manifest.read_text()).get("artifacts", {}).values():
                if artifact.get("type") == "aws:cloudformation:stack":
                    template = str(directory / artifact["properties"]["templateFile"])
                    view.stack_names[artifact["properties"].get("stackName", artifact.get("displayName", ""))] = template
        return view

    @classmethod
    def from_dicts(cls, templates: dict[str, dict[str, Any]], stack_names: dict[str, str] | None = None) -> StageTemplates:
        return cls(templates=dict(templates), stack_names=dict(stack_names or {}))

    def resources(self, *types: str) -> Iterator[Resource]:
        for path, template in self.templates.items():
            for logical_id, resource in template.get("Resources", {}).items():
                if not types or resource.get("Type") in types:
                    yield Resource(path, logical_id, resource.get("Type", ""), resource.get("Properties", {}) or {})

    def get(self, path: str, logical_id: str) -> Resource | None:
        resource = self.templates.get(path, {}).get("Resources", {}).get(logical_id)
        if resource is None:
            return None
        return Resource(path, logical_id, resource.get("Type", ""), resource.get("Properties", {}) or {})

    def target(self, path: str, value: Any) -> Resource | None:
        """The resource a Ref / GetAtt / cross-stack output reference points at, if it is in these templates."""
        if not isinstance(value, dict):
            return None
        if "Ref" in value:
            return self.get(path, value["Ref"])
        if "Fn::GetAtt" in value:
            return self.get(path, value["Fn::GetAtt"][0])
        if "Fn::GetStackOutput" in value:
            ref = value["Fn::GetStackOutput"]
            other = self.stack_names.get(ref.get("StackName", ""))
            if other is None:
                return None
            output = self.templates[other].get("Outputs", {}).get(ref.get("OutputName", ""), {})
            return self.target(other, output.get("Value"))
        if "Fn::ImportValue" in value:
            for other, template in self.templates.items():
                for output in template.get("Outputs", {}).values():
                    if output.get("Export", {}).get("Name") == value["Fn::ImportValue"]:
                        return self.target(other, output.get("Value"))
        return None
