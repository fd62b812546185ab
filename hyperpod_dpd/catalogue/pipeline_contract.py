"""Names the pipeline's CodeBuild projects (the CDK wing) and the ``hpdpd`` commands they run (the operate wing) share.

The checks runner (``hyperpod_dpd.infra.checks_runner``) and the checks role (``hyperpod_dpd.infra.checks_role``)
build the project, its bucket and its grants; ``hpdpd checks run`` / ``checks exec``
(``hyperpod_dpd.ops.remote_checks``) upload to that bucket, start the build and read back its exit code. The pipeline
stack (``hyperpod_dpd.stacks.pipeline_stack``) hands ``hpdpd verify`` its Prometheus URL. These are this toolkit's own
names, not upstream facts: one definition here keeps the two wings from drifting apart without either importing the
other. Where AWS fixes the mechanism, it is cited where it is used (buildspec ``env: exported-variables``, CodeBuild
``StartBuild`` ``environmentVariablesOverride``).
"""

from __future__ import annotations

ARGS_VARIABLE = "HPDPD_ARGS"  # the command, a JSON array of strings (no shell ever parses it)
ENVIRONMENT_VARIABLE = "HPDPD_CHECKS_ENVIRONMENT"  # set on the project: the one environment its role may check
EXIT_CODE_VARIABLE = "HPDPD_EXIT_CODE"  # exported by the runner's buildspec (env: exported-variables)
SOURCE_PREFIX = "sources/"  # every run's zip; the checks role may write only here, the runner read only here
DEFAULT_SOURCE_KEY = f"{SOURCE_PREFIX}checkout.zip"  # the project's own location; every build overrides it
PROMETHEUS_ENV = "HPDPD_PROMETHEUS_URL"  # where hpdpd verify finds Prometheus; the pipeline's steps set it
