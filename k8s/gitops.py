"""Write every environment's Kubernetes manifests as plain YAML for GitOps (``dist/k8s/<env>/<endpoint>.k8s.yaml``).

    python -m hyperpod_dpd.k8s.gitops --out dist/k8s [--config-dir config] [--env dev ...]

Each environment directory is rewritten from scratch, so an endpoint removed from the config disappears from Git
too (and a pruning GitOps controller deletes it). Every manifest is schema-validated before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import cdk8s
import yaml

from hyperpod_dpd.config import EnvironmentConfig, load_all
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.k8s.charts import add_environment_charts

SUFFIX = ".k8s.yaml"


def render_environment(config: EnvironmentConfig) -> dict[str, list[dict]]:
    """``<endpoint name>`` -> validated manifests of that endpoint's chart."""
    app = cdk8s.App()
    return {chart.node.id: chart.to_json() for chart in add_environment_charts(app, config)}


def write_environment(config: EnvironmentConfig, out_dir: Path,
                      rendered: dict[str, list[dict]] | None = None) -> list[Path]:
    """Rewrite ``<out_dir>/<env>/`` from ``rendered`` (default: render and validate now, before touching it)."""
    rendered = render_environment(config) if rendered is None else rendered
    target = out_dir / config.name
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob(f"*{SUFFIX}"):
        stale.unlink()
    written = []
    for name, manifests in rendered.items():
        path = target / f"{name}{SUFFIX}"
        path.write_text(yaml.safe_dump_all(manifests, sort_keys=False), encoding="utf-8")
        written.append(path)
    return written


def write_manifests(out_dir: Path, configs: Sequence[EnvironmentConfig] | None = None) -> dict[str, list[Path]]:
    """Write every environment (default: all of ``config/``); all are rendered before the first file is written."""
    selected = list(configs) if configs is not None else load_all()
    rendered = {c.name: render_environment(c) for c in selected}  # fail before writing anything
    return {c.name: write_environment(c, out_dir, rendered[c.name]) for c in selected}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperpod_dpd.k8s.gitops", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("dist/k8s"), help="output directory (default: dist/k8s)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="configuration directory (default: $HPDPD_CONFIG_DIR, else ./config)")
    parser.add_argument("--env", action="append", dest="envs", help="environment to write (repeatable; default: $HPDPD_ENVIRONMENTS, else all)")
    args = parser.parse_args(argv)
    try:
        written = write_manifests(args.out, load_all(args.config_dir, args.envs))
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for env, paths in written.items():
        print(f"{env}: {len(paths)} file(s) in {args.out / env}")
        for path in paths:
            print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
