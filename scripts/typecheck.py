"""Type-check the distribution as it installs (``make typecheck``, part of ``make test``).

The repository keeps ``hpdpd/``, ``infra/``, ``k8s/`` and ``stacks/`` at the top; the distribution nests them under
``hyperpod_dpd`` (setup.py). mypy does not follow setuptools' editable import hook, so this lays out the installed
shape as symlinks under ``.cache/typecheck/src`` and checks the package ``hyperpod_dpd`` there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / ".cache" / "typecheck" / "src"
PACKAGE_ROOTS = {"": "hpdpd", "infra": "infra", "k8s": "k8s", "stacks": "stacks"}  # as in setup.py


def lay_out() -> Path:
    package = SRC / "hyperpod_dpd"
    shutil.rmtree(SRC, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in (ROOT / PACKAGE_ROOTS[""]).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in PACKAGE_ROOTS.items():
        if name:
            (package / name).symlink_to(ROOT / folder, target_is_directory=True)
    return SRC


def main(argv: list[str]) -> int:
    src = lay_out()
    env = {**os.environ, "MYPYPATH": str(src)}
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".cache" / "mypy"), "-p", "hyperpod_dpd", *argv]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
