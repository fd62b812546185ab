"""Write every environment's DPD dashboard as Grafana JSON (``dist/grafana/<env>/dpd.json``), for import into
Amazon Managed Grafana or any Grafana (docs/monitoring.md, "Import the dashboard").

    python -m hyperpod_dpd.monitoring.export --out dist/grafana [--config-dir config] [--env dev ...]

Every dashboard is built and schema-checked before the first file is written. An environment without endpoints
has no dashboard, and a stale one of it is removed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyperpod_dpd.config import EnvironmentConfig, load_all
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.monitoring.dashboard import render

FILE_NAME = "dpd.json"


def write_dashboards(out_dir: Path, configs: Sequence[EnvironmentConfig] | None = None) -> dict[str, Path | None]:
    """``<env>`` -> the file written (None for an environment without endpoints)."""
    selected = list(configs) if configs is not None else load_all()
    rendered: dict[str, dict[str, Any] | None] = {
        c.name: render(c) if c.endpoints else None for c in selected}  # fail before writing anything
    written: dict[str, Path | None] = {}
    for name, document in rendered.items():
        path = out_dir / name / FILE_NAME
        if document is None:
            path.unlink(missing_ok=True)
            written[name] = None
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        written[name] = path
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperpod_dpd.monitoring.export",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("dist/grafana"), help="output directory (default: dist/grafana)")
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="configuration directory (default: $HPDPD_CONFIG_DIR, else ./config)")
    parser.add_argument("--env", action="append", dest="envs",
                        help="environment to write (repeatable; default: $HPDPD_ENVIRONMENTS, else all)")
    args = parser.parse_args(argv)
    try:
        written = write_dashboards(args.out, load_all(args.config_dir, args.envs))
    except HpdpdError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for env, path in written.items():
        print(f"{env}: {path}" if path else f"{env}: no endpoints, no dashboard")
    return 0


if __name__ == "__main__":
    sys.exit(main())
