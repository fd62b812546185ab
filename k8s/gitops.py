"""Write every environment's Kubernetes objects as a GitOps tree (``<out>/<env>/``, docs/gitops.md).

    python -m hyperpod_dpd.k8s.gitops --out DIR [--config-dir config] [--env dev ...]

An environment with ``delivery.endpoints: gitops`` gets everything a controller applies in place of CDK (namespaces,
operations RBAC, Karpenter node classes and pools, endpoints; a ``PrometheusRule`` beside them), ordered by Argo CD
sync waves and built by the ``kustomization.yaml`` of its directory. One with ``cdk`` (the default) gets no
directory a controller could apply, only its endpoints' manifests for review in ``DIR/_cdk/<env>/``: CDK applies
them. The writer owns ``DIR`` through
its marker file and deletes what it no longer renders (k8s/gitops_tree.py); every object is validated, and every
environment rendered, before the first byte is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from hyperpod_dpd.config import EnvironmentConfig, list_environments, load_all
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.k8s.gitops_render import CDK_REVIEW_DIR, SUFFIX, EnvironmentTree, endpoint_manifests, render_tree
from hyperpod_dpd.k8s.gitops_tree import MARKER, GitOpsTreeError, WriteResult, write_tree

__all__ = ["CDK_REVIEW_DIR", "MARKER", "SUFFIX", "GitOpsTreeError", "main", "render_environment", "render_trees", "write_manifests"]


def render_environment(config: EnvironmentConfig) -> dict[str, list[dict]]:
    """``<endpoint name>`` -> validated manifests of that endpoint's chart, its namespace included (what CDK applies
    as the endpoint's manifest and its ``Namespace-<name>`` manifest)."""
    return endpoint_manifests(config)


def render_trees(configs: Sequence[EnvironmentConfig]) -> list[EnvironmentTree]:
    """Every environment's files, all validated (the first problem raises) before any is written."""
    return [render_tree(config) for config in configs]


def write_manifests(out_dir: Path, configs: Sequence[EnvironmentConfig] | None = None, *,
                    known: Collection[str] | None = None) -> WriteResult:
    """Write ``configs`` into ``out_dir``. ``known``: the names of every environment of the configuration, so that
    the files of one removed or renamed are deleted (without it, other environments' files stay). Default: the
    environments of the configuration directory, ``known`` included."""
    if configs is None:
        selected, known = load_all(), list_environments() if known is None else known
    else:
        selected = list(configs)
    return write_tree(out_dir, render_trees(selected), known=known)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperpod_dpd.k8s.gitops", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("dist/k8s"),
                        help=f"the tree's directory: empty, new, or one this writer owns (its marker {MARKER}); "
                             "default: dist/k8s")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="configuration directory (default: $HPDPD_CONFIG_DIR, else ./config)")
    parser.add_argument("--env", action="append", dest="envs",
                        help="environment to write (repeatable; default: $HPDPD_ENVIRONMENTS, else all); the others "
                             "keep their files")
    args = parser.parse_args(argv)
    try:
        configs = load_all(args.config_dir, args.envs)
        result = write_manifests(args.out, configs, known=list_environments(args.config_dir))
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a directory that cannot be created or written: one line, not a traceback
        print(f"error: {args.out}: cannot write the GitOps tree ({exc.strerror or exc})", file=sys.stderr)
        return 2
    modes = {c.name: c.delivery.endpoints for c in configs}
    for env, paths in result.written.items():
        where = args.out / env if modes[env] == "gitops" else args.out / CDK_REVIEW_DIR / env
        print(f"{env} (delivery.endpoints: {modes[env]}): {len(paths)} file(s) in {where}")
    for path in result.deleted:
        print(f"deleted {args.out / path} (no longer rendered)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
