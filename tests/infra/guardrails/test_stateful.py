"""Nothing lost on update or delete: stateful logical ids match the committed manifest, routine changes neither
rename nor replace a stateful resource, and retained environments keep their data."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import assertions
from aws_cdk import aws_s3 as s3
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER, ResourceNotFoundError

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails, availability_zone_context
from hyperpod_dpd.infra.guardrails.stateful import (
    RETAINED_TYPES,
    STATEFUL_TYPES,
    create_only_values,
    missing_retention,
    replaced_resources,
    retain_stateful_resources,
    stateful_resources,
)
from hyperpod_dpd.stacks.application import build_app
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly
from tests.paths import ROOT

# The fixture environments' record; security/stateful-resources.json records the user's (tests/test_user_config.py).
MANIFEST = ROOT / "tests" / "fixtures" / "stateful-resources.json"


def test_stateful_logical_ids_match_the_committed_manifest(synthesized: Synthesized) -> None:
    # Stacks without stateful resources (an endpoints stack) carry nothing to guard, on either side.
    committed = {env: {part: ids for part, ids in parts.items() if ids}
                 for env, parts in json.loads(MANIFEST.read_text()).items()}
    current: dict[str, dict[str, dict[str, str]]] = {}
    for (env, part), template in synthesized.templates.items():
        if env in committed and stateful_resources(template):
            current.setdefault(env, {})[part] = stateful_resources(template)
    assert current == committed, (
        "stateful resources were renamed, added or removed; a rename replaces the resource. If the change is "
        "deliberate, run 'make stateful-manifest' and review the diff")


def _synth(config_dir: Path, outdir: Path, cdk_context: dict[str, Any]) -> Synthesized:
    app, _ = build_app(configs=[load_environment("dev", config_dir)], outdir=str(outdir), context=cdk_context)
    app.synth()
    return read_assembly(outdir)


def _variant(base: dict[str, Any], *, prefill_nodes: int, replicas: int, threshold: int, image: str | None,
             max_replicas: int, tags: dict[str, str] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["tags"] = {**data.get("tags", {}), **(tags or {})}
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
    worker image tag, autoscaling bounds and one more tag."""
    results = []
    for name, variant in (("before", _variant(base_configs["dev"], prefill_nodes=2, replicas=1, threshold=4096,
                                              image=None, max_replicas=2)),
                          ("after", _variant(base_configs["dev"], prefill_nodes=3, replicas=2, threshold=2048,
                                             image="lmcache/vllm-openai:v0.4.3", max_replicas=3,
                                             tags={"cost-center": "ml-serving"}))):
        config_dir = tmp_path_factory.mktemp(f"{name}-config")
        (config_dir / "dev.yaml").write_text(yaml.safe_dump(variant))
        results.append(_synth(config_dir, tmp_path_factory.mktemp(name), cdk_context))
    return results[0], results[1]


def _create_only(type_: str) -> list[str]:
    """The registry schema's createOnlyProperties of a type (cfn-lint's copy); none for a type it lacks."""
    try:
        return list(PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-west-2", type_).schema.get("createOnlyProperties", []))
    except ResourceNotFoundError:
        return []


def _hyperpod(result: Synthesized) -> dict[str, Any]:
    (cluster,) = [r for r in result.template("dev", "platform")["Resources"].values()
                  if r["Type"] == "AWS::SageMaker::Cluster"]
    return cluster["Properties"]


def test_the_routine_change_is_real(before_after: tuple[Synthesized, Synthesized]) -> None:
    before, after = before_after
    assert before.template("dev", "platform") != after.template("dev", "platform")
    assert before.template("dev", "endpoints") != after.template("dev", "endpoints")
    # AND it reaches the HyperPod cluster itself: its prefill count and its tags differ
    counts = [{g["InstanceGroupName"]: g["InstanceCount"] for g in _hyperpod(r)["InstanceGroups"]} for r in before_after]
    assert (counts[0]["prefill"], counts[1]["prefill"]) == (2, 3)
    tags = [{t["Key"]: t["Value"] for t in _hyperpod(r)["Tags"]} for r in before_after]
    assert "cost-center" not in tags[0] and tags[1]["cost-center"] == "ml-serving"


def test_routine_changes_keep_every_stateful_logical_id(before_after: tuple[Synthesized, Synthesized]) -> None:
    before, after = before_after
    for key in before.templates:
        assert stateful_resources(before.templates[key]) == stateful_resources(after.templates[key]), key


def test_routine_changes_touch_no_create_only_property(before_after: tuple[Synthesized, Synthesized]) -> None:
    before, after = before_after
    changed = []
    for key, template in before.templates.items():
        for logical_id, type_ in stateful_resources(template).items():
            pointers = _create_only(type_)
            old = create_only_values(template["Resources"][logical_id], pointers)
            new = create_only_values(after.templates[key]["Resources"][logical_id], pointers)
            if old != new:
                changed.append((key, logical_id, {p for p in pointers if old[p] != new[p]}))
    assert changed == []


def test_routine_changes_replace_no_resource_of_any_type(before_after: tuple[Synthesized, Synthesized]) -> None:
    # GIVEN the routine change above, WHEN every resource of every stack is compared with the registry schemas
    before, after = before_after
    replaced = {key: replaced_resources(template, after.templates[key], _create_only)
                for key, template in before.templates.items()}
    # THEN nothing is replaced: no stateful resource, and no role, function or rule whose new physical id would reach
    # a stateful resource's create-only property (the EKS cluster's RoleArn, the HyperPod cluster's VpcConfig)
    assert {key: why for key, why in replaced.items() if why} == {}


def test_a_replaced_role_replaces_the_cluster_that_points_at_it() -> None:
    # GIVEN an EKS cluster whose create-only RoleArn is its role's Arn, and a change that renames the role
    def template(role_name: str) -> dict[str, Any]:
        return {"Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": role_name}},
            "Cluster": {"Type": "AWS::EKS::Cluster", "Properties": {"RoleArn": {"Fn::GetAtt": ["Role", "Arn"]}}},
            "HyperPod": {"Type": "AWS::SageMaker::Cluster", "Properties": {
                "Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": "Cluster.Arn"}}}}},
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"Tags": [{"Key": "k", "Value": role_name}]}}}}

    before, after = template("eks-a"), template("eks-b")
    # WHEN the replacements are computed
    replaced = replaced_resources(before, after, _create_only)
    # THEN the role (RoleName is create-only), and through it the EKS cluster and the HyperPod cluster, are replaced,
    # although neither cluster's own template text changed; the queue's tag update replaces nothing
    assert replaced == {"Role": "create-only /properties/RoleName changed",
                        "Cluster": "a create-only property points at replaced Role",
                        "HyperPod": "a create-only property points at replaced Cluster"}
    assert create_only_values(before["Resources"]["Cluster"], _create_only("AWS::EKS::Cluster")) == \
        create_only_values(after["Resources"]["Cluster"], _create_only("AWS::EKS::Cluster"))
    # AND a resource that is gone from the template is reported as such
    del after["Resources"]["Queue"]
    assert replaced_resources(before, after, _create_only)["Queue"] == "removed or renamed"


def test_the_endpoint_keeps_its_name_across_routine_changes(before_after: tuple[Synthesized, Synthesized]) -> None:
    def iec_names(result: Synthesized) -> list[str]:
        manifests = [json.loads(r["Properties"]["Manifest"]) for r in result.template("dev", "endpoints")["Resources"].values()
                     if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"]
        return [o["metadata"]["name"] for m in manifests for o in m if o["kind"] == "InferenceEndpointConfig"]

    before, after = before_after
    assert iec_names(before) == iec_names(after) == ["llama-3-3-70b-9b9be6"]


def test_retained_environments_keep_their_data_on_delete_and_replacement(synthesized: Synthesized) -> None:
    # GIVEN prod (removal_policy: retain) and dev (destroy), as `make synth` builds them
    retained: dict[str, set[str]] = {"prod": set(), "dev": set()}
    for (env, part), template in synthesized.templates.items():
        if env not in retained:
            continue
        for logical_id, type_ in stateful_resources(template).items():
            resource = template["Resources"][logical_id]
            if env == "prod":
                # THEN every stateful resource of prod survives a stack deletion and a replacement
                assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == ("Retain", "Retain"), \
                    (part, logical_id)
                retained["prod"].add(type_)
            elif resource.get("DeletionPolicy") == "Retain":
                retained["dev"].add(type_)
    # AND that covers every stateful type, the HyperPod cluster (the GPU capacity) included
    assert retained["prod"] == set(RETAINED_TYPES) == set(STATEFUL_TYPES)
    # AND dev keeps its destroy behaviour: only aws-cdk-lib's bucket-deployment handler log group, which aws-cdk-lib
    # always retains, survives it
    assert retained["dev"] == {"AWS::Logs::LogGroup"}


def test_the_retention_aspect_retains_stateful_types_only_and_only_for_retain() -> None:
    # GIVEN two stacks with an L1 HyperPod cluster, an L2 bucket destroyed by its construct, and a stateless queue
    stacks = {}
    for policy in (cdk.RemovalPolicy.RETAIN, cdk.RemovalPolicy.DESTROY):
        stack = cdk.Stack(cdk.App(), "Stack")
        cdk.CfnResource(stack, "HyperPod", type="AWS::SageMaker::Cluster")
        s3.Bucket(stack, "Bucket", removal_policy=cdk.RemovalPolicy.DESTROY)
        cdk.CfnResource(stack, "Queue", type="AWS::SQS::Queue")
        # WHEN the stack's policy is applied
        retain_stateful_resources(stack, policy)
        stacks[policy.name] = assertions.Template.from_stack(stack).to_json()["Resources"]
    policies = {name: {r["Type"]: (r.get("DeletionPolicy"), r.get("UpdateReplacePolicy")) for r in resources.values()}
                for name, resources in stacks.items()}
    # THEN RETAIN retains both stateful resources on deletion and replacement, and leaves the queue alone
    assert policies["RETAIN"] == {"AWS::SageMaker::Cluster": ("Retain", "Retain"), "AWS::S3::Bucket": ("Retain", "Retain"),
                                  "AWS::SQS::Queue": (None, None)}
    # AND DESTROY changes nothing: each construct keeps its own choice
    assert policies["DESTROY"] == {"AWS::SageMaker::Cluster": (None, None), "AWS::S3::Bucket": ("Delete", "Delete"),
                                   "AWS::SQS::Queue": (None, None)}


def test_a_consumers_production_platform_retains_every_stateful_resource(tmp_path: Path) -> None:
    # GIVEN HyperPodDpdPlatform with prod's configuration in a consumer's own stack, guarded as production
    prod = load_environment("prod")
    app = cdk.App(outdir=str(tmp_path), context=availability_zone_context(prod))
    stack = cdk.Stack(app, "Serving", env=cdk.Environment(account=prod.account, region=prod.region))
    HyperPodDpdPlatform(stack, "Dpd", config=prod)
    apply_guardrails(app, production=True)
    # WHEN it synthesizes (HPDPD-DATA1 would fail it)
    app.synth()
    template = assertions.Template.from_stack(stack).to_json()
    # THEN the construct retained every stateful resource it created, the HyperPod cluster included
    resources = {k: template["Resources"][k] for k in stateful_resources(template)}
    assert {r["Type"] for r in resources.values()} == set(STATEFUL_TYPES)
    assert {k: missing_retention(r) for k, r in resources.items() if missing_retention(r)} == {}


def test_the_manifest_covers_every_stateful_type_we_create(synthesized: Synthesized) -> None:
    found = {t for template in synthesized.templates.values() for t in stateful_resources(template).values()}
    assert found == set(STATEFUL_TYPES)
