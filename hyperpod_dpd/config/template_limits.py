"""CloudFormation's limits on one template, checked on a synthesized cloud assembly before anything deploys it.

The configuration bounds what it can (an S3 prefix fits an S3 key, names fit their services), but a template's size
is the sum of everything rendered into it, so the last word is the template itself: :func:`template_limit_issues`
reads every stack template of an assembly (nested stage assemblies and nested stack templates included) and returns
one line per template over a limit of :mod:`hyperpod_dpd.catalogue.limits`. It reads the files the synthesis wrote,
because their bytes are what CloudFormation receives (the CDK uploads each template as a file asset and passes its
URL). No CDK import: anything shaped like ``aws_cdk.cx_api.CloudAssembly`` will do.

What the CDK does itself (aws-cdk-lib 2.275.0, core/lib/stack.js, ``_synthesizeTemplate``): more than 500 resources
throw ``TooManyResourcesInStack`` unless the context ``@aws-cdk/core:stackResourceLimit`` raises or disables the
limit; a template over 80 % of ``TEMPLATE_BODY_MAXIMUM_SIZE`` (1e6 characters) is only a *warning*
(``@aws-cdk/core:Stack.templateSize``) and is written anyway, so a template CloudFormation will refuse synthesizes
"successfully". Here both are errors, and the size is counted in bytes, not characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from hyperpod_dpd.catalogue.limits import (
    MAX_MAPPINGS,
    MAX_OUTPUTS,
    MAX_PARAMETERS,
    MAX_RESOURCES,
    TEMPLATE_BODY_S3_BYTES,
)

NESTED_TEMPLATES = "*.nested.template.json"  # how the CDK names a nested stack's template in the assembly
# (template section, most entries, what they are): the counted limits of the CloudFormation quotas page.
SECTIONS: tuple[tuple[str, int, str], ...] = (
    ("Resources", MAX_RESOURCES, "resources"),
    ("Outputs", MAX_OUTPUTS, "outputs"),
    ("Parameters", MAX_PARAMETERS, "parameters"),
    ("Mappings", MAX_MAPPINGS, "mappings"),
)


class StackArtifact(Protocol):
    """The part of ``aws_cdk.cx_api.CloudFormationStackArtifact`` read here."""

    @property
    def hierarchical_id(self) -> str: ...

    @property
    def stack_name(self) -> str: ...

    @property
    def template_full_path(self) -> str: ...


class CloudAssembly(Protocol):
    """The part of ``aws_cdk.cx_api.CloudAssembly`` read here."""

    @property
    def stacks_recursively(self) -> Sequence[StackArtifact]: ...


def template_limit_issues(assembly: CloudAssembly) -> list[str]:
    """One line per template over a CloudFormation limit: ``<stage>/<stack> (<stack name>): <what> ...``."""
    lines: list[str] = []
    folders: set[Path] = set()
    for stack in assembly.stacks_recursively:
        path = Path(stack.template_full_path)
        lines += [f"{stack.hierarchical_id} ({stack.stack_name}): {problem}" for problem in _problems(path)]
        folders.add(path.parent)
    for folder in sorted(folders):
        for nested in sorted(folder.glob(NESTED_TEMPLATES)):
            lines += [f"{folder.name}/{nested.name} (a nested stack's template): {problem}"
                      for problem in _problems(nested)]
    return lines


def _problems(path: Path) -> Iterator[str]:
    size = path.stat().st_size
    if size > TEMPLATE_BODY_S3_BYTES:
        yield (f"the template has {size:,} bytes; CloudFormation reads at most {TEMPLATE_BODY_S3_BYTES:,} bytes of "
               "template from S3, which is how the CDK deploys it: shorten the long strings the configuration "
               "renders into it (they are repeated per resource), or split the stack")
    template: Any = json.loads(path.read_text(encoding="utf-8"))
    for section, most, what in SECTIONS:
        count = len(template.get(section) or {}) if isinstance(template, dict) else 0
        if count > most:
            yield (f"the template declares {count:,} {what}; CloudFormation allows at most {most} per template: "
                   "split the stack")
