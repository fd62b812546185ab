"""EKS rules (cdk-nag's EKS rules test the v1 ``aws_eks.CfnCluster`` class and never fire on ``aws_eks_v2``).

They judge the ``AWS::EKS::Cluster`` resources the stacks create. An adopted cluster (``eks.existing``) is not in
the templates: its logging, secrets encryption and endpoint are its owner's, outside what synthesis can see, so
these rules have nothing to check there (docs/adopting.md lists what to verify on such a cluster).
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_dpd.config.network import public_cidrs_problem
from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings
from hyperpod_dpd.infra.guardrails.templates import StageTemplates

REQUIRED_LOGS = ("api", "audit", "authenticator")


def _control_plane_logging(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for cluster in templates.resources("AWS::EKS::Cluster"):
        enabled = {t.get("Type") for t in cluster.properties.get("Logging", {}).get("ClusterLogging", {}).get("EnabledTypes", [])}
        missing = [t for t in REQUIRED_LOGS if t not in enabled]
        if missing:
            yield Finding(cluster, "Properties.Logging.ClusterLogging.EnabledTypes", f"missing log types {missing}")


def _secrets_encryption(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for cluster in templates.resources("AWS::EKS::Cluster"):
        configs = cluster.properties.get("EncryptionConfig", [])
        if not any("secrets" in c.get("Resources", []) and c.get("Provider", {}).get("KeyArn") for c in configs):
            yield Finding(cluster, "Properties.EncryptionConfig", "Kubernetes secrets are not envelope-encrypted with KMS")


def _restricted_endpoint(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    if not settings.production:
        return
    for cluster in templates.resources("AWS::EKS::Cluster"):
        vpc = cluster.properties.get("ResourcesVpcConfig", {})
        if vpc.get("EndpointPublicAccess", True) is False:
            continue
        cidrs = vpc.get("PublicAccessCidrs", ["0.0.0.0/0"])  # EKS's default when the property is absent
        if not isinstance(cidrs, list) or not all(isinstance(c, str) for c in cidrs):
            # a token or an intrinsic: what it resolves to is unknown here, so it counts as open
            yield Finding(cluster, "Properties.ResourcesVpcConfig",
                          "production API endpoint's PublicAccessCidrs are not literal CIDRs, so they may be public")
            continue
        try:
            problem = public_cidrs_problem(cidrs)
        except ValueError as error:
            problem = f"PublicAccessCidrs are not CIDRs ({error})"
        if problem:  # judged by the address space they cover, not the spelling 0.0.0.0/0
            yield Finding(cluster, "Properties.ResourcesVpcConfig", f"production API endpoint: {problem}")


RULES = [
    Rule(id="HPDPD-EKS1", description="EKS control-plane logging must include api, audit and authenticator logs",
         fix="Keep eks.logging at its default (all log types) or include api, audit and authenticator",
         check=_control_plane_logging),
    Rule(id="HPDPD-EKS2", description="EKS secrets must be encrypted with a KMS key",
         fix="Create the cluster with HyperPodEksCluster (it sets secrets_encryption_key)", check=_secrets_encryption),
    Rule(id="HPDPD-EKS3", description="A production EKS API endpoint must be private or restricted to known CIDRs",
         fix="Set eks.endpoint_access: private, or eks.public_access_cidrs to your networks", check=_restricted_endpoint),
]
