"""DPD invariants of the InferenceEndpointConfig manifests that CDK applies to the cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hyperpod_dpd.catalogue.operator_api import IEC_KIND
from hyperpod_dpd.infra.guardrails.rules.base import Finding, Rule, Settings
from hyperpod_dpd.infra.guardrails.templates import Resource, StageTemplates

MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"
GPU = "nvidia.com/gpu"
ROLE_SPECS = ("prefillSpec", "decodingSpec")
ROLE_KEYS = {"replicas", "resources", "args", "nodeSelector"}


def _render(value: Any) -> str:
    """A manifest string, with CloudFormation tokens (Fn::Join of refs) replaced by placeholders."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return value["Fn::Join"][0].join(_render(p) for p in value["Fn::Join"][1])
    return '"<token>"'


def endpoint_configs(templates: StageTemplates) -> Iterator[tuple[Resource, int, dict[str, Any]]]:
    """Every IEC with a pdSpec in every KubernetesManifest of the stage."""
    for resource in templates.resources(MANIFEST_TYPE):
        try:
            objects = json.loads(_render(resource.properties.get("Manifest", "[]")))
        except json.JSONDecodeError:
            continue
        for index, obj in enumerate(objects if isinstance(objects, list) else [objects]):
            if isinstance(obj, dict) and obj.get("kind") == IEC_KIND and "pdSpec" in obj.get("spec", {}):
                yield resource, index, obj


def _hash_seed(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for resource, index, obj in endpoint_configs(templates):
        env = {e.get("name"): e.get("value") for e in obj["spec"].get("worker", {}).get("environmentVariables", [])}
        if env.get("PYTHONHASHSEED") != "0":
            yield Finding(resource, f"Manifest[{index}].spec.worker.environmentVariables",
                          f"{obj['metadata'].get('name')}: PYTHONHASHSEED is {env.get('PYTHONHASHSEED')!r}, not '0'")


def _one_image(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for resource, index, obj in endpoint_configs(templates):
        spec = obj["spec"]
        if not spec.get("worker", {}).get("image"):
            yield Finding(resource, f"Manifest[{index}].spec.worker.image", "no worker image")
        for role in ROLE_SPECS:
            extra = sorted(set(spec["pdSpec"].get(role, {})) - ROLE_KEYS)
            if extra:
                yield Finding(resource, f"Manifest[{index}].spec.pdSpec.{role}",
                              f"sets {extra}: both roles must run the one worker image")


def _gpu_requests(templates: StageTemplates, settings: Settings) -> Iterator[Finding]:
    for resource, index, obj in endpoint_configs(templates):
        for role in ROLE_SPECS:
            requests = obj["spec"]["pdSpec"].get(role, {}).get("resources", {}).get("requests", {})
            try:
                count = int(str(requests.get(GPU, "0")))
            except ValueError:
                count = 0
            if count < 1:
                yield Finding(resource, f"Manifest[{index}].spec.pdSpec.{role}.resources.requests",
                              f"{obj['metadata'].get('name')}: no {GPU} request")


RULES = [
    Rule(id="HPDPD-K8S1", description="DPD endpoints must set PYTHONHASHSEED=0 (prefiller and decoder must hash KV keys alike)",
         fix="Do not override PYTHONHASHSEED; DisaggregatedEndpoint sets it", check=_hash_seed),
    Rule(id="HPDPD-K8S2", description="Prefill and decode must run the same worker image",
         fix="Set the image once (worker.image); never per role", check=_one_image),
    Rule(id="HPDPD-K8S3", description="Prefill and decode pods must request GPUs",
         fix="Let DisaggregatedEndpoint set per-role nvidia.com/gpu requests", check=_gpu_requests),
]
