"""Build the CDK app: validate every environment first, then create one stage per environment."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from hyperpod_dpd.config import EnvironmentConfig, load_all
from hyperpod_dpd.config.pipeline import PipelineConfig, cross_check, pipeline_file, read_pipeline
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.stacks.environment_stage import EnvironmentStage
from hyperpod_dpd.stacks.pipeline_stack import PIPELINE_ID, PipelineStack, pinned_cli_version

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def cdk_json_context(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """Feature flags from ``cdk.json`` plus the committed ``cdk.context.json``: what ``cdk synth`` would pass.

    Tests build apps in-process with this, so they synthesize exactly what the CLI synthesizes.
    """
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
) -> tuple[cdk.App, dict[str, EnvironmentStage]]:
    """All configs are loaded and validated before the first construct exists, so bad input makes nothing."""
    selected = list(configs) if configs is not None else load_all(config_dir, list(environments) if environments else None)
    pipeline = _pipeline_config(config_dir, selected)
    app = cdk.App(outdir=outdir, context=context) if (outdir or context is not None) else cdk.App()
    stages = {c.name: EnvironmentStage(app, c.name, config=c) for c in selected}
    # Last: the pipeline deploys these very stages, and CDK Pipelines synthesizes each stage as it is added.
    if pipeline is not None:
        PipelineStack(app, PIPELINE_ID, config=pipeline, stages=[stages[n] for n in pipeline.order],
                      cli_version=pinned_cli_version(PROJECT_ROOT))
    return app, stages


def _pipeline_config(config_dir: Path | None, selected: Sequence[EnvironmentConfig]) -> PipelineConfig | None:
    """The pipeline when ``config_dir`` has ``pipeline.yaml`` and the selection holds all of its environments.

    A selection that leaves some out (``HPDPD_ENVIRONMENTS=dev``) synthesizes no pipeline rather than a partial
    one: deploying a pipeline without prod would silently drop prod's stage. The file itself is validated either
    way; its cross-checks against environment contents run only when the pipeline is built.
    """
    if not pipeline_file(config_dir).is_file():
        return None
    config = read_pipeline(config_dir)
    names = {c.name for c in selected}
    if not all(n in names for n in config.order):
        return None
    cross_check(config, selected, config_dir=config_dir)
    return config


def _selected_environments(value: str | None) -> list[str] | None:
    """``HPDPD_ENVIRONMENTS=dev,staging`` -> ``["dev", "staging"]``; unset or empty -> every environment."""
    if not value:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def main() -> int:
    """Entry point of ``app.py``: one line per problem on stderr and exit code 2, never a traceback.

    ``HPDPD_CONFIG_DIR`` points at another config directory; ``HPDPD_ENVIRONMENTS=dev,staging`` limits the
    environments synthesized (default: every file in it).
    """
    try:
        names = _selected_environments(os.environ.get("HPDPD_ENVIRONMENTS"))
        # Run by the CDK CLI, the context (cdk.json flags + cdk.context.json) arrives in the environment; run
        # directly (python app.py), read the same files so the same feature flags apply.
        launched_by_cli = any(v in os.environ for v in ("CDK_CONTEXT_JSON", "CONTEXT_OVERFLOW_LOCATION"))
        app, _ = build_app(environments=names,
                           context=None if launched_by_cli else cdk_json_context())
        app.synth()
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # jsii surfaces CDK validation failures as RuntimeError
        message = str(exc).strip().splitlines()
        print("error: synthesis failed: " + (message[0] if message else type(exc).__name__), file=sys.stderr)
        for line in message[1:40]:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0
