"""Retention rules: a production environment loses no stateful resource to a stack deletion or a replacement."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings
from hyperpod_dpd.infra.guardrails.stateful import RETAINED_TYPES, missing_retention
from hyperpod_dpd.infra.guardrails.templates import StageTemplates


def _retained(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    if not settings.production:
        return
    for resource in templates.resources(*RETAINED_TYPES):
        raw = templates.templates[resource.template_path]["Resources"][resource.logical_id]
        missing = missing_retention(raw)
        if missing:
            yield Finding(resource, next(iter(missing)),
                          f"{resource.type} {resource.logical_id}: " + ", ".join(f"{k} is {v!r}" for k, v in missing.items()))


RULES = [
    Rule(id="HPDPD-DATA1",
         description="A production environment must retain every stateful resource (DeletionPolicy and "
                     "UpdateReplacePolicy Retain): the HyperPod cluster, the network, EKS, buckets, keys, log groups",
         fix="Set removal_policy: retain; the stage applies hyperpod_dpd.infra.guardrails.stateful.retain_stateful_resources",
         check=_retained),
]
