"""Package discovery: ``hyperpod_dpd/`` is the package; the required top-level ``infra/``, ``k8s/`` and ``stacks/``
are linked inside it (``hyperpod_dpd/infra`` -> ``../infra``, ...), so they are ``hyperpod_dpd.infra``,
``hyperpod_dpd.k8s`` and ``hyperpod_dpd.stacks`` from a checkout and in the wheel alike, and an installed copy never
collides with a consumer's own ``infra`` or ``stacks``. setuptools' package finder (namespace packages too: the Lambda handlers have no ``__init__.py``) follows the links (it walks with
``followlinks=True``) and the wheel holds real files. Everything else is in ``pyproject.toml``.
"""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["hyperpod_dpd", "hyperpod_dpd.*"], exclude=["*__pycache__*"]))
