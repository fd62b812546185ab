"""Nothing lost on update or delete: stateful logical ids match the committed manifest, routine changes neither
rename nor replace a stateful resource, and retained environments keep their data."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.infra.guardrails.stateful import (
    RETAINED_TYPES,
    STATEFUL_TYPES,
    create_only_values,
    stateful_resources,
)
from hyperpod_dpd.stacks.application import build_app
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly
from tests.paths import ROOT

# The fixture environments' record; security/stateful-resources.json records the user's (tests/test_user_config.py).
MANIFEST = ROOT / "tests" / "fixtures" / "stateful-resources.json"


def test_stateful_logical_ids_match_the_committed_manifest(synthesized: Synthesized) -> None:
    committed = json.loads(MANIFEST.read_text())
    current: dict[str, dict[str, dict[str, str]]] = {}
    for (env, part), template in synthesized.templates.items():
        if env in committed:
            current.setdefault(env, {})[part] = stateful_resources(template)
    assert current == committed, (
        "stateful resources were renamed, added or removed; a rename replaces the resource. If the change is "
        "deliberate, run 'make stateful-manifest' and review the diff")


def _synth(config_dir: Path, outdir: Path, cdk_context: dict[str, Any]) -> Synthesized:
    app, _ = build_app(configs=[load_environment("dev", config_dir)], outdir=str(outdir), context=cdk_context)
    app.synth()
    return read_assembly(outdir)


def _variant(base: dict[str, Any], *, prefill_nodes: int, replicas: int, threshold: int, image: str | None,
             max_replicas: int) -> dict[str, Any]:
    data = copy.deepcopy(base)
    groups = {g["name"]: g for g in data["hyperpod"]["instance_groups"]}
    groups["prefill"]["count"] = prefill_nodes
    groups["system"]["count"] = prefill_nodes
    endpoint = data["endpoints"][0]
    endpoint["prefill"] = {**endpoint["prefill"], "replicas": replicas, "autoscaling": {
        "min_replicas": 1, "max_replicas": max_replicas,
        "prometheus": {"query": "sum(vllm:num_requests_waiting)", "target_value": 8}}}
    endpoint["routing"] = {**endpoint["routing"], "threshold": threshold}
    if image:
        endpoint["image"] = image
    return data


@pytest.fixture(scope="module")
def before_after(tmp_path_factory: pytest.TempPathFactory, base_configs: dict[str, Any],
                 cdk_context: dict[str, Any]) -> tuple[Synthesized, Synthesized]:
    """dev twice: then and after a routine change of instance counts, prefill replicas, routing threshold,
    worker image tag and autoscaling bounds."""
    results = []
    for name, variant in (("before", _variant(base_configs["dev"], prefill_nodes=2, replicas=1, threshold=4096,
                                              image=None, max_replicas=2)),
                          ("after", _variant(base_configs["dev"], prefill_nodes=3, replicas=2, threshold=2048,
                                             image="lmcache/vllm-openai:v0.4.3", max_replicas=3))):
        config_dir = tmp_path_factory.mktemp(f"{name}-config")
        (config_dir / "dev.yaml").write_text(yaml.safe_dump(variant))
        results.append(_synth(config_dir, tmp_path_factory.mktemp(name), cdk_context))
    return results[0], results[1]


def test_the_routine_change_is_real(before_after: tuple[Synthesized, Synthesized]) -> None:
    before, after = before_after
    assert before.template("dev", "platform") != after.template("dev", "platform")
    assert before.template("dev", "endpoints") != after.template("dev", "endpoints")


def test_routine_changes_keep_every_stateful_logical_id(before_after: tuple[Synthesized, Synthesized]) -> None:
    before, after = before_after
    for key in before.templates:
        assert stateful_resources(before.templates[key]) == stateful_resources(after.templates[key]), key


def test_routine_changes_touch_no_create_only_property(before_after: tuple[Synthesized, Synthesized]) -> None:
    before, after = before_after
    changed = []
    for key, template in before.templates.items():
        for logical_id, type_ in stateful_resources(template).items():
            pointers = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-west-2", type_).schema.get("createOnlyProperties", [])
            old = create_only_values(template["Resources"][logical_id], pointers)
            new = create_only_values(after.templates[key]["Resources"][logical_id], pointers)
            if old != new:
                changed.append((key, logical_id, {p for p in pointers if old[p] != new[p]}))
    assert changed == []


def test_the_endpoint_keeps_its_name_across_routine_changes(before_after: tuple[Synthesized, Synthesized]) -> None:
    def iec_names(result: Synthesized) -> list[str]:
        manifests = [json.loads(r["Properties"]["Manifest"]) for r in result.template("dev", "endpoints")["Resources"].values()
                     if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"]
        return [o["metadata"]["name"] for m in manifests for o in m if o["kind"] == "InferenceEndpointConfig"]

    before, after = before_after
    assert iec_names(before) == iec_names(after) == ["llama-3-3-70b-9b9be6"]


def test_retained_environments_keep_their_data_on_delete(synthesized: Synthesized) -> None:
    for (env, part), template in synthesized.templates.items():
        if env != "prod":
            continue
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] in RETAINED_TYPES:
                assert resource.get("DeletionPolicy") == "Retain", (part, logical_id)
                assert resource.get("UpdateReplacePolicy") == "Retain", (part, logical_id)


def test_the_manifest_covers_every_stateful_type_we_create(synthesized: Synthesized) -> None:
    found = {t for template in synthesized.templates.values() for t in stateful_resources(template).values()}
    assert found == set(STATEFUL_TYPES)
