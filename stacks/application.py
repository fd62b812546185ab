"""Build the CDK app: validate every environment first, then create one stage per environment."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from hyperpod_dpd.config import EnvironmentConfig, load_all
from hyperpod_dpd.config.pipeline import PipelineConfig, cross_check, pipeline_file, read_pipeline
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.infra.platform import availability_zone_context
from hyperpod_dpd.stacks.environment_stage import EnvironmentStage
from hyperpod_dpd.stacks.pipeline_stack import PIPELINE_ID, PipelineStack, pinned_cli_version


def cdk_json_context(root: Path | None = None) -> dict[str, Any]:
    """Feature flags from ``cdk.json`` plus ``cdk.context.json`` (if any) of ``root`` (default: the current
    directory, where ``cdk`` runs the app): what ``cdk synth`` would pass.

    Tests build apps in-process with this, so they synthesize exactly what the CLI synthesizes.
    """
    root = root or Path.cwd()
    context = dict(json.loads((root / "cdk.json").read_text())["context"])
    lookups = root / "cdk.context.json"
    if lookups.is_file():
        context.update(json.loads(lookups.read_text()))
    return context


def build_app(
    *,
    config_dir: Path | None = None,
    environments: Sequence[str] | None = None,
    configs: Sequence[EnvironmentConfig] | None = None,
    outdir: str | None = None,
    context: dict[str, Any] | None = None,
    project_root: Path | None = None,
) -> tuple[cdk.App, dict[str, EnvironmentStage]]:
    """All configs are loaded and validated before the first construct exists, so bad input makes nothing.

    Each environment's availability zones come from its configuration (:func:`availability_zone_context`), so
    no account needs a ``cdk.context.json`` entry; ``context`` (and the CLI's context) take precedence.

    An environment with endpoints that ``pipeline.yaml`` promotes gets the checks runner inside its VPC and, without
    an explicit ``checks_role_arn``, the toolkit's checks role that starts it, trusted by the pipeline's CodeBuild role
    of its checks, whether or not the pipeline itself is synthesized (``HPDPD_ENVIRONMENTS=dev``): ``cdk deploy
    "dev/*"`` and the pipeline then deploy the same platform stack.
    """
    selected = list(configs) if configs is not None else load_all(config_dir, list(environments) if environments else None)
    selected, pipeline = pipeline_environments(config_dir, selected)
    app = cdk.App(outdir=outdir, context={**availability_zone_context(*selected), **(context or {})})
    stages = {c.name: EnvironmentStage(app, c.name, config=c) for c in selected}
    # Last: the pipeline deploys these very stages, and CDK Pipelines synthesizes each stage as it is added.
    if pipeline is not None:
        PipelineStack(app, PIPELINE_ID, config=pipeline, stages=[stages[n] for n in pipeline.order],
                      cli_version=pinned_cli_version(project_root or Path.cwd()))
    return app, stages


def pipeline_environments(config_dir: Path | None, selected: Sequence[EnvironmentConfig],
                          ) -> tuple[list[EnvironmentConfig], PipelineConfig | None]:
    """The selected environments as the pipeline deploys them (:meth:`PipelineConfig.trusted_environment`), and the
    pipeline when ``config_dir`` has ``pipeline.yaml`` and the selection holds all of its environments.

    A selection that leaves some out (``HPDPD_ENVIRONMENTS=dev``) synthesizes no pipeline rather than a partial
    one: deploying a pipeline without prod would silently drop prod's stage. The file itself, and its cross-checks
    against the selected environments it lists, are validated either way.
    """
    if not pipeline_file(config_dir).is_file():
        return list(selected), None
    config = read_pipeline(config_dir)
    cross_check(config, selected, config_dir=config_dir)  # before the trusts: their problems name pipeline.yaml
    trusted = [config.trusted_environment(c) for c in selected]
    names = {c.name for c in selected}
    return trusted, (config if all(n in names for n in config.order) else None)


def print_warnings(configs: Iterable[EnvironmentConfig]) -> None:
    """One ``warning:`` line per configuration warning, on stderr (synthesis goes on)."""
    for config in configs:
        for warning in config.warnings():
            print(f"warning: {warning.render(config.source)}", file=sys.stderr)


def synthesis_errors(assembly: cdk.cx_api.CloudAssembly) -> list[str]:
    """One line per error annotation of any stack in the assembly, nested stage assemblies included:
    ``<stage>/<stack> (<stack name>): <message>``. An assembly with any of them cannot deploy."""
    lines = []
    for stack in assembly.stacks_recursively:
        for message in stack.messages:
            if message.level == cdk.cx_api.SynthesisMessageLevel.ERROR:
                text = " ".join(str(message.entry.data).split())
                lines.append(f"{stack.hierarchical_id} ({stack.stack_name}): {text}")
    return lines


def validation_failures(outdir: Path | str) -> list[str]:
    """One line per error-level finding of the CDK's validation report in ``outdir`` (CloudFormation validation,
    cdk-nag, the project's rules): ``<plugin> <rule> at <construct paths>: <description>``.

    The CDK CLI synthesizes with ``@aws-cdk/core:failSynthOnValidationErrors`` off, so under ``cdk synth`` a finding
    fails neither the synthesis nor an annotation; it is only in this report. Warnings are not failures.
    """
    report = Path(outdir) / "validation-report.json"
    if not report.is_file():
        return []
    lines = []
    for plugin in json.loads(report.read_text()).get("pluginReports", []):
        for violation in plugin.get("violations", []):
            if violation.get("severity", "error") not in ("error", "fatal"):
                continue
            paths = ", ".join(c.get("constructPath", "?") for c in violation.get("violatingConstructs", []))
            description = " ".join(str(violation.get("description", "")).split())
            lines.append(f"{plugin.get('pluginName')} {violation.get('ruleName')} at {paths}: {description}")
    return lines


def main(project_root: Path | None = None) -> int:
    """Entry point of ``app.py``: one line per problem on stderr and a non-zero exit, never a traceback.

    Exit 2: bad configuration (nothing synthesized). Exit 1: synthesis failed, a stack carries an error
    annotation, or the validation report holds an error-level finding (an assembly that cannot deploy, or that the
    guardrails refuse, is never reported as a success).
    ``HPDPD_CONFIG_DIR`` points at another config directory; ``HPDPD_ENVIRONMENTS=dev,staging`` limits the
    environments synthesized (default: every file in it).
    """
    root = project_root or Path.cwd()
    try:
        # Run by the CDK CLI, the context (cdk.json flags + cdk.context.json) arrives in the environment; run
        # directly (python app.py), read the same files so the same feature flags apply.
        launched_by_cli = any(v in os.environ for v in ("CDK_CONTEXT_JSON", "CONTEXT_OVERFLOW_LOCATION"))
        app, stages = build_app(project_root=root,
                                context=None if launched_by_cli else cdk_json_context(root))
        print_warnings(stage.config for stage in stages.values())
        assembly = app.synth()
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # jsii surfaces CDK validation failures as RuntimeError
        message = str(exc).strip().splitlines()
        print("error: synthesis failed: " + (message[0] if message else type(exc).__name__), file=sys.stderr)
        for line in message[1:40]:
            print(f"  {line}", file=sys.stderr)
        return 1
    errors = synthesis_errors(assembly) + validation_failures(assembly.directory)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    return 1 if errors else 0


def check() -> int:
    """``python -m hyperpod_dpd.stacks.application --check``: validate the selected environments and the
    pipeline file without synthesizing (``make synth`` runs it before it touches ``cdk.out``)."""
    try:
        selected = load_all()  # $HPDPD_ENVIRONMENTS, else every environment
        pipeline_environments(None, selected)  # warnings are printed once, by the synthesis that follows
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"configuration ok: {', '.join(c.name for c in selected)}")
    return 0


if __name__ == "__main__":
    sys.exit(check() if sys.argv[1:] == ["--check"] else main())
