"""One call that puts the project's guardrails on any CDK app, stage or stack."""

from __future__ import annotations

from collections.abc import Hashable
from functools import lru_cache
from typing import cast

import aws_cdk as cdk
import cdk_nag
from constructs import IConstruct

from hyperpod_dpd.infra.checkov import skip_generated_handlers
from hyperpod_dpd.infra.guardrails.plugin import HyperPodDpdChecks
from hyperpod_dpd.infra.guardrails.rules import Settings


def apply_guardrails(scope: IConstruct, *, production: bool = False) -> None:
    """cdk-nag's AwsSolutions pack and the project's own rules as validation plugins on ``scope`` (an app, a stage
    or a stack), plus the checkov skips of aws-cdk-lib's generated handlers.

    Findings fail synthesis unless acknowledged on the construct they concern; the project's constructs carry
    their own acknowledgments (each an exact finding id with a reason), so they apply in any app. ``production``
    switches on the rules that only production environments must pass (retained data, termination protection).
    The project's rules report on the stacks of ``scope``'s own assembly: call it on each ``cdk.Stage`` that holds
    the constructs, or on the app when the stacks sit directly in it. cdk-nag checks every construct of the app
    whichever scope it is registered on (the CDK hands it the app's root), so all calls in one app share one
    AwsSolutions plugin: the CDK runs it once, over every guarded stage's templates, instead of once per stage.
    """
    skip_generated_handlers(scope)
    cdk.Validations.of(scope).add_plugins(
        aws_solutions_checks(scope.node.root),
        HyperPodDpdChecks(Settings(production=production)),
    )


def aws_solutions_checks(root: IConstruct) -> cdk_nag.AwsSolutionsChecks:
    """The one cdk-nag AwsSolutions plugin of the app whose root is ``root``."""
    return _checks_of(cast(Hashable, root))


@lru_cache(maxsize=64)
def _checks_of(root: Hashable) -> cdk_nag.AwsSolutionsChecks:
    return cdk_nag.AwsSolutionsChecks(cast(IConstruct, root))
