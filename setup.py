"""Package layout: the repository keeps its top-level folders; the distribution nests them under ``hyperpod_dpd``.

``hpdpd/`` is ``hyperpod_dpd``; ``infra/``, ``k8s/`` and ``stacks/`` are ``hyperpod_dpd.infra``, ``hyperpod_dpd.k8s``
and ``hyperpod_dpd.stacks``, so an installed copy never collides with a consumer's own ``infra`` or ``stacks``.
Everything else (metadata, dependencies, package data) is in ``pyproject.toml``.
"""

from setuptools import find_namespace_packages, setup

PACKAGE_ROOTS = {
    "hyperpod_dpd": "hpdpd",
    "hyperpod_dpd.infra": "infra",
    "hyperpod_dpd.k8s": "k8s",
    "hyperpod_dpd.stacks": "stacks",
}


def _packages() -> list[str]:
    found = []
    for name, folder in PACKAGE_ROOTS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])
                  if f"{name}.{sub}" not in PACKAGE_ROOTS]
    return found


setup(packages=_packages(), package_dir=PACKAGE_ROOTS)
