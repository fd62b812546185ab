"""One call that puts the project's guardrails on any CDK app, stage or stack."""

from __future__ import annotations

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
    Plugins report on the stacks of ``scope``'s own assembly: call it on each ``cdk.Stage`` that holds the
    constructs, or on the app when the stacks sit directly in it.
    """
    skip_generated_handlers(scope)
    cdk.Validations.of(scope).add_plugins(
        cdk_nag.AwsSolutionsChecks(scope),
        HyperPodDpdChecks(Settings(production=production)),
    )
