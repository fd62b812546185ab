"""All of hyperpod-dpd's own rules, one module per service."""

from hyperpod_dpd.infra.guardrails.rules import eks, hyperpod, iam, manifests, retention, s3, trust
from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings

RULES: tuple[Rule, ...] = (*eks.RULES, *hyperpod.RULES, *s3.RULES, *iam.RULES, *trust.RULES, *manifests.RULES,
                          *retention.RULES)

__all__ = ["RULES", "Finding", "Rule", "Settings"]
