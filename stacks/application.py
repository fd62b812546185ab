"""Build the CDK app: validate every environment first, then create one stage per environment."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hyperpod_dpd.config import EnvironmentConfig, load_all
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.errors import ConfigError, HpdpdError
from hyperpod_dpd.node_runtime import fit_node_to_machine


def load_selected() -> list[EnvironmentConfig] | None:
    """The selected environments (``$HPDPD_ENVIRONMENTS``, else every file), or None once each problem is printed as
    one ``error:`` line on stderr. An empty or missing configuration directory is a problem. Imports no CDK."""
    try:
        return load_all()
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


if __name__ == "__main__":
    # `python -m hyperpod_dpd.stacks.application --check`: a bad configuration is refused before the CDK and its Node
    # process start (a fraction of a second instead of the CDK's import), and Node is fitted to the machine before
    # jsii starts it, as app.py does.
    if sys.argv[1:] == ["--check"] and load_selected() is None:
        sys.exit(2)
    fit_node_to_machine()

import aws_cdk as cdk  # noqa: E402 - after the configuration is checked and the Node options are set

from hyperpod_dpd.config.files import display_path, present  # noqa: E402
from hyperpod_dpd.config.global_gateway import global_file, has_global, load_global  # noqa: E402
from hyperpod_dpd.config.identity import check_identity  # noqa: E402
from hyperpod_dpd.config.pipeline import PipelineConfig, cross_check, pipeline_file, read_pipeline  # noqa: E402
from hyperpod_dpd.config.template_limits import template_limit_issues  # noqa: E402
from hyperpod_dpd.errors import Issue  # noqa: E402
from hyperpod_dpd.infra.config_warnings import annotate_warnings  # noqa: E402
from hyperpod_dpd.infra.platform import availability_zone_context  # noqa: E402
from hyperpod_dpd.stacks.environment_stage import EnvironmentStage  # noqa: E402
from hyperpod_dpd.stacks.global_gateway_stack import GlobalGatewayStage  # noqa: E402
from hyperpod_dpd.stacks.pipeline_stack import PIPELINE_ID, PipelineStack, pinned_cli_version  # noqa: E402


def cdk_json_context(root: Path | None = None) -> dict[str, Any]:
    """The ``context`` of ``cdk.json`` plus ``cdk.context.json`` of ``root`` (default: the current directory, where
    ``cdk`` runs the app), each when present: what ``cdk synth`` would pass. A directory without ``cdk.json`` (or a
    ``cdk.json`` without ``context``) adds nothing, as under the CLI: each environment's stage sets the toolkit's feature
    flags itself, so the check also runs in another project's directory or outside any.

    Tests build apps in-process with this, so they synthesize exactly what the CLI synthesizes.
    """
    root = root or Path.cwd()
    settings = root / "cdk.json"
    # A dangling link or a directory is not "no cdk.json": reading it fails and says so.
    data = json.loads(settings.read_text()) if settings.exists() or settings.is_symlink() else {}
    if not isinstance(data, dict) or not isinstance(data.get("context", {}), dict):
        raise TypeError("expected a JSON object whose 'context', when given, is an object")
    context = dict(data.get("context", {}))
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
    if configs is not None:  # built in memory, so not checked against each other by load_all
        check_identity(selected)
    selected, pipeline = pipeline_environments(config_dir, selected)
    app = cdk.App(outdir=outdir, context={**availability_zone_context(*selected), **(context or {})})
    stages = {c.name: EnvironmentStage(app, c.name, config=c) for c in selected}
    for stage in stages.values():  # each warning once, as an annotation on the stack (or manifest) it concerns
        annotate_warnings(stage.config, environment=stage.platform, endpoints=stage.endpoints.manifests,
                          endpoint_fallback=stage.endpoints)
    # The global inference gateways (global.yaml), each a stage of its own in its home account and Region, deployed
    # after its members (stacks/global_gateway_stack.py): by the pipeline after its last member's wave.
    global_stages = global_gateway_stages(app, config_dir, selected, pipeline)
    # Last: the pipeline deploys these very stages, and CDK Pipelines synthesizes each stage as it is added.
    if pipeline is not None:
        PipelineStack(app, PIPELINE_ID, config=pipeline, stages=[stages[n] for n in pipeline.order],
                      cli_version=pinned_cli_version(project_root or Path.cwd()), global_stages=global_stages)
    return app, stages


def global_gateway_stages(app: cdk.App, config_dir: Path | None, selected: Sequence[EnvironmentConfig],
                          pipeline: PipelineConfig | None) -> list[GlobalGatewayStage]:
    """One stage per gateway of ``global.yaml`` whose members are all selected (like the pipeline, none for a partial
    selection); the file is checked either way. With a pipeline, every member must be promoted by it."""
    if not has_global(config_dir):
        return []
    config = load_global(config_dir, environments=selected)
    by_name = {c.name: c for c in selected}
    if pipeline is not None:
        problems = [Issue(f"gateways[{i}].members", g.name, f"environment {e} is not in pipeline.yaml's order, so the "
                          "pipeline cannot deploy the gateway after it") for i, g in enumerate(config.gateways)
                    for e in g.member_environments if e not in pipeline.order]
        waves = {name for name, _ in pipeline.waves if name is not None}
        problems += [Issue(f"gateways[{i}].name", g.name, f"its stage {g.stage_id} is also a wave of pipeline.yaml; "
                           "rename the gateway or the wave") for i, g in enumerate(config.gateways) if g.stage_id in waves]
        if problems:
            raise ConfigError(display_path(global_file(config_dir)), problems)
    return [GlobalGatewayStage(app, config=g, environments=by_name,
                               production=any(by_name[e].production for e in g.member_environments))
            for g in config.gateways if all(e in by_name for e in g.member_environments)]


def pipeline_environments(config_dir: Path | None, selected: Sequence[EnvironmentConfig],
                          ) -> tuple[list[EnvironmentConfig], PipelineConfig | None]:
    """The selected environments as the pipeline deploys them (:meth:`PipelineConfig.trusted_environment`), and the
    pipeline when ``config_dir`` has ``pipeline.yaml`` and the selection holds all of its environments.

    A selection that leaves some out (``HPDPD_ENVIRONMENTS=dev``) synthesizes no pipeline rather than a partial
    one: deploying a pipeline without prod would silently drop prod's stage. The file itself, and its cross-checks
    against the selected environments it lists, are validated either way.
    """
    if not present(pipeline_file(config_dir)):  # a looping link or a directory is not "no pipeline": read_yaml says
        return list(selected), None
    config = read_pipeline(config_dir)
    cross_check(config, selected, config_dir=config_dir)  # before the trusts: their problems name pipeline.yaml
    trusted = [config.trusted_environment(c) for c in selected]
    names = {c.name for c in selected}
    return trusted, (config if all(n in names for n in config.order) else None)


def print_warnings(configs: Iterable[EnvironmentConfig]) -> None:
    """One ``warning:`` line per configuration warning (the environment's and its endpoints'), each once, on stderr:
    ``warning: <file>: <field path>: <value>: <what to do>`` (synthesis goes on)."""
    for config in configs:
        for warning in environment_warnings(config):
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
    errors = synthesis_errors(assembly) + validation_failures(assembly.directory) + template_limit_issues(assembly)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    # The warnings of an accepted configuration (a refused one prints its errors only). Under the CDK CLI they are
    # annotations, which the CLI shows for the stacks it selects (`cdk deploy "dev/*"`, `cdk synth '**'`; make synth's
    # --check printed them): printed here too they would show twice.
    if not errors and not launched_by_cli:
        print_warnings(stage.config for stage in stages.values())
    return 1 if errors else 0


# The CDK CLI passes this flag off (see validation_failures); --check does the same, so that a finding is written to
# the report and read from it as one line, exactly as under `cdk synth`, instead of failing the synthesis midway.
FAIL_ON_FINDINGS = "@aws-cdk/core:failSynthOnValidationErrors"


def check(project_root: Path | None = None) -> int:
    """``python -m hyperpod_dpd.stacks.application --check``: everything ``app.py`` checks, nothing it writes.

    The configuration is loaded first (a bad file exits 2 before any construct exists; run as a module, before the
    CDK is even imported); then the same app is built
    and synthesized into a temporary directory that is removed afterwards: every construct-time check (endpoint
    charts and their manifest validation, alert rules, the pipeline's cross-checks, the checks runner's names, the
    CDK's own stage and stack names), every guardrail (cdk-nag, the project's rules, CloudFormation validation) and
    every error annotation run as under ``cdk synth``. So "configuration ok" means the synthesis will not reject it;
    ``make synth`` runs this before it touches ``cdk.out``. Exit codes as :func:`main`: 2 bad configuration, 1 a
    synthesis that fails or carries an error.
    """
    root = project_root or Path.cwd()
    selected = load_selected()
    if selected is None:
        return 2
    try:
        context = {**_project_context(root), FAIL_ON_FINDINGS: False}
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="hpdpd-check-") as outdir:
        try:
            app, _ = build_app(configs=selected, outdir=outdir, context=context, project_root=root)
            assembly = app.synth()
            errors = synthesis_errors(assembly) + validation_failures(outdir) + template_limit_issues(assembly)
        except HpdpdError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except RuntimeError as exc:  # jsii surfaces the CDK's own construct-time refusals as RuntimeError
            lines = str(exc).strip().splitlines()
            print("error: synthesis failed: " + (lines[0] if lines else type(exc).__name__), file=sys.stderr)
            return 1
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    if errors:
        return 1
    print_warnings(selected)  # each once, of an accepted configuration: the check runs no CDK CLI to show annotations
    print(f"configuration ok: {', '.join(c.name for c in selected)} (synthesized and validated, nothing written)")
    return 0


def _project_context(root: Path) -> dict[str, Any]:
    """:func:`cdk_json_context` of ``root`` (and, with a pipeline, the CLI version ``package.json`` pins), or a
    :class:`ConfigError` when one of them is there but cannot be read, or a pipeline's ``package.json`` is missing."""
    name = "cdk.json"
    try:
        context = cdk_json_context(root)
        if present(pipeline_file(None)):
            name = "package.json"
            pinned_cli_version(root)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        hint = ("the check reads the CDK context of the directory it runs from: fix the file, or run it elsewhere"
                if name == "cdk.json" else "a pipeline.yaml needs the project's package.json (its aws-cdk pin): run "
                "the check from the project's directory")
        raise ConfigError.single(str(root / name), "<file>", str(root / name),
                                 f"cannot be read ({type(exc).__name__}: {exc}); {hint}") from None
    return context


def _module_main(argv: list[str]) -> int:
    """``python -m hyperpod_dpd.stacks.application --check [--config-dir DIR]``; with no argument, as ``app.py``.
    Anything else is one line and exit 2: an option this entry point does not know never synthesizes the default
    configuration instead."""
    if not argv:
        return main()
    options, rest = argv[:1], argv[1:]
    if options != ["--check"] or (rest and (len(rest) != 2 or rest[0] != "--config-dir")):
        print("error: usage: python -m hyperpod_dpd.stacks.application [--check [--config-dir DIR]] "
              f"(got {' '.join(argv)!r})", file=sys.stderr)
        return 2
    if rest:
        os.environ["HPDPD_CONFIG_DIR"] = rest[1]  # where the loader reads it (hyperpod_dpd.config.loader.config_dir)
    return check()


if __name__ == "__main__":
    sys.exit(_module_main(sys.argv[1:]))
