"""hyperpod-dpd's own validation rules, for what cdk-nag cannot see (aws_eks_v2 clusters, HyperPod, DPD manifests).

They run as a CDK policy-validation plugin on every stage, next to cdk-nag, so findings land in the same
validation report, fail synthesis the same way, and are acknowledged the same way
(``cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id="HyperPodDpd::<rule>", reason=...))``).
"""

from hyperpod_dpd.infra.guardrails.apply import apply_guardrails
from hyperpod_dpd.infra.guardrails.plugin import PLUGIN_NAME, HyperPodDpdChecks, acknowledge
from hyperpod_dpd.infra.guardrails.rules import RULES, Settings

__all__ = ["PLUGIN_NAME", "RULES", "HyperPodDpdChecks", "Settings", "acknowledge", "apply_guardrails"]

