"""S3 rules: every bucket encrypted, TLS-only and private."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings, as_list
from hyperpod_dpd.infra.guardrails.templates import StageTemplates

PUBLIC_ACCESS_BLOCK = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")


def _encrypted(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for bucket in templates.resources("AWS::S3::Bucket"):
        rules = bucket.properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        if not rules:
            yield Finding(bucket, "Properties.BucketEncryption", "no default encryption")


def _tls_only(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    policies = list(templates.resources("AWS::S3::BucketPolicy"))
    for bucket in templates.resources("AWS::S3::Bucket"):
        enforced = False
        for policy in policies:
            if policy.template_path != bucket.template_path or policy.properties.get("Bucket") != {"Ref": bucket.logical_id}:
                continue
            for statement in as_list(policy.properties.get("PolicyDocument", {}).get("Statement")):
                condition = statement.get("Condition", {}).get("Bool", {})
                if statement.get("Effect") == "Deny" and str(condition.get("aws:SecureTransport")).lower() == "false":
                    enforced = True
        if not enforced:
            yield Finding(bucket, "Properties", "no bucket policy denies requests without TLS (aws:SecureTransport)")


def _private(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for bucket in templates.resources("AWS::S3::Bucket"):
        block = bucket.properties.get("PublicAccessBlockConfiguration", {})
        off = [k for k in PUBLIC_ACCESS_BLOCK if block.get(k) is not True]
        if off:
            yield Finding(bucket, "Properties.PublicAccessBlockConfiguration", f"{off} not enabled")


RULES = [
    Rule(id="HPDPD-S3-1", description="S3 buckets must have default encryption",
         fix="Create buckets with hyperpod_dpd.infra.buckets.secure_bucket", check=_encrypted),
    Rule(id="HPDPD-S3-2", description="S3 buckets must refuse requests without TLS",
         fix="Create buckets with enforce_ssl=True (hyperpod_dpd.infra.buckets.secure_bucket)", check=_tls_only),
    Rule(id="HPDPD-S3-3", description="S3 buckets must block all public access",
         fix="Create buckets with BlockPublicAccess.BLOCK_ALL (hyperpod_dpd.infra.buckets.secure_bucket)", check=_private),
]
