"""The CDK policy-validation plugin that runs the toolkit's rules over a stage's templates."""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from constructs import IConstruct

from hyperpod_dpd import __version__
from hyperpod_dpd.infra.guardrails.rules import RULES, Settings
from hyperpod_dpd.infra.guardrails.templates import StageTemplates

PLUGIN_NAME = "HyperPodDpd"


@jsii.implements(cdk.IPolicyValidationPlugin)
class HyperPodDpdChecks:
    """Register with ``cdk.Validations.of(stage).add_plugins(HyperPodDpdChecks(Settings(production=...)))``."""

    def __init__(self, settings: Settings = Settings()) -> None:
        self._settings = settings

    @property
    def name(self) -> str:
        return PLUGIN_NAME

    @property
    def version(self) -> str:
        return __version__

    @property
    def rule_ids(self) -> list[str]:
        return [r.id for r in RULES]

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        templates = StageTemplates.load(list(context.template_paths))
        violations = []
        for rule in RULES:
            findings = list(rule.check(templates, self._settings))
            if not findings:
                continue
            violations.append(cdk.PolicyViolation(
                rule_name=rule.id,
                description=f"{rule.description}. " + "; ".join(sorted({f.detail for f in findings}))[:900],
                fix=rule.fix,
                severity="error",
                violating_resources=[cdk.PolicyViolatingResource(
                    resource_logical_id=f.resource.logical_id, template_path=f.resource.template_path,
                    locations=[f.location]) for f in findings],
            ))
        return cdk.PolicyValidationPluginReport(success=not violations, violations=violations, plugin_version=__version__)


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one of the toolkit's own rules on one construct (and its children), with the reason."""
    if rule_id not in {r.id for r in RULES}:
        raise KeyError(f"unknown rule {rule_id}")
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=f"{PLUGIN_NAME}::{rule_id}", reason=reason))
