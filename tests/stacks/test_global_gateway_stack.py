"""The global inference gateway of tests/fixtures/global (two environments in two Regions, one wave, global.yaml):
its stage and stack in the home account and Region, the custom resource and its least-privilege IAM, the pipeline's
order (the gateway's stage after the members' wave), cfn-lint over the new template.

The gateway tier refuses DPD endpoints for now (hyperpod_dpd/config/endpoint_gateway_checks.py), so the fixture's
endpoints are refused as members; the synthesis tests stand in for ``gateway_reference`` (the other tier's function)
to build the rest, and one test holds the refusal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint

from hyperpod_dpd.catalogue.gateway import DPD_GATEWAY_REASON
from hyperpod_dpd.config import global_gateway
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.global_gateway import ADD_TAGS, CLUSTER_ACTIONS, GATEWAY_ACTIONS, RESOURCE_TYPE
from tests.paths import ROOT

CONFIG = ROOT / "tests" / "fixtures" / "global"


def _reference(endpoint: Any) -> tuple[str, str]:
    return endpoint.namespace, f"{endpoint.name}-gateway"


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Iterator[Path]:
    from hyperpod_dpd.stacks.application import build_app

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(global_gateway, "_gateway_reference", _reference)
        outdir = tmp_path_factory.mktemp("global.out")
        app, _ = build_app(config_dir=CONFIG, outdir=str(outdir), context=cdk_context, project_root=ROOT)
        app.synth()
        yield outdir


def _artifacts(outdir: Path) -> dict[str, Any]:
    return json.loads((outdir / "manifest.json").read_text())["artifacts"]


def _stack(outdir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    nested = outdir / _artifacts(outdir)["assembly-global-llama-global"]["properties"]["directoryName"]
    (artifact,) = [a for a in json.loads((nested / "manifest.json").read_text())["artifacts"].values()
                   if a["type"] == "aws:cloudformation:stack"]
    return artifact, json.loads((nested / artifact["properties"]["templateFile"]).read_text())


def _resources(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == type_]


def test_the_fixture_endpoints_are_refused_as_members_with_the_reason() -> None:
    # GIVEN DPD endpoints on the operator's router (the gateway tier refuses DPD) WHEN global.yaml is loaded
    with pytest.raises(ConfigError) as refused:
        global_gateway.load_global(CONFIG)
    # THEN each member is one line naming the file, the field and what to set
    lines = str(refused.value).splitlines()
    assert lines == [f"tests/fixtures/global/global.yaml: gateways[0].members[{i}].endpoint: 'llama-3-3-70b': does "
                     "not use the gateway tier (routing.tier: gateway), which a DPD endpoint cannot use yet: "
                     f"{DPD_GATEWAY_REASON}" for i in (0, 1)]


def test_the_gateway_stack_lives_in_the_home_account_and_region(assembly: Path) -> None:
    artifact, template = _stack(assembly)
    assert artifact["environment"] == "aws://111111111111/us-west-2"
    assert artifact["properties"]["stackName"] == "hpdpd-global-llama-global"
    (resource,) = _resources(template, RESOURCE_TYPE)
    props = resource["Properties"]
    # THEN the members are both environments' clusters with their in-cluster gateways, the weights the API's names
    assert props["Name"] == "llama-global" and props["Region"] == "us-west-2"
    assert props["Members"] == [
        {"Environment": "west", "Region": "us-west-2", "ClusterName": "hpdpd-west", "Namespace": "llm-serving",
         "Name": "llama-3-3-70b-gateway"},
        {"Environment": "east", "Region": "us-east-1", "ClusterName": "hpdpd-east", "Namespace": "llm-serving",
         "Name": "llama-3-3-70b-gateway"}]
    assert props["Routing"] == {"Weights": {"KVHeadroom": "0.4", "QueueDepth": "0.3", "RegionProximity": "0.2",
                                            "ErrorRate": "0.1"}}
    assert props["ExecutionRoleArn"] == {"Fn::GetAtt": [next(k for k, r in template["Resources"].items()
                                                             if r["Type"] == "AWS::IAM::Role"
                                                             and "ExecutionRole" in k), "Arn"]}
    # AND the stage's tag, which CloudFormation would not give a custom resource, is the gateway's, for its create;
    # the owner tag, meant for IAM roles only, is not
    assert props["Tags"] == [{"Key": "project", "Value": "hyperpod-dpd"}]


def _policy(template: dict[str, Any], fragment: str) -> list[dict[str, Any]]:
    (policy,) = [r for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Policy" and fragment in k]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def _sub(value: Any) -> str:
    """An ARN of ``Fn::Join`` parts as text, ``${AWS::Partition}`` kept."""
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(p if isinstance(p, str) else "${" + p["Ref"] + "}" for p in value["Fn::Join"][1])
    return json.dumps(value)


def test_the_handler_holds_the_exact_actions_on_partition_aware_arns(assembly: Path) -> None:
    _, template = _stack(assembly)
    statements = {s["Sid"]: s for s in _policy(template, "HandlerPolicy")}
    assert sorted(statements) == ["ManageTheGateway", "NameMemberClusters", "PassTheExecutionRole"]
    manage = statements["ManageTheGateway"]
    assert sorted(manage["Action"]) == sorted([*GATEWAY_ACTIONS, ADD_TAGS])  # AddTags: a create with Tags
    assert _sub(manage["Resource"]) == ("arn:${AWS::Partition}:sagemaker:us-west-2:111111111111:"
                                        "global-inference-gateway/*")
    clusters = statements["NameMemberClusters"]
    assert sorted(clusters["Action"]) == sorted({"sagemaker:DescribeCluster", *CLUSTER_ACTIONS})
    assert sorted(_sub(r) for r in clusters["Resource"]) == [
        f"arn:${{AWS::Partition}}:sagemaker:{r}:111111111111:cluster/*" for r in ("us-east-1", "us-west-2")]
    passing = statements["PassTheExecutionRole"]
    assert passing["Action"] == "iam:PassRole" and "Fn::GetAtt" in passing["Resource"]
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    # AND nothing in the stack allows an action on "*" but the framework's own log delivery
    for key, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::Policy" and "waiter" not in key.lower():
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                assert statement.get("Resource") != "*", key


def test_the_execution_role_trusts_sagemaker_for_this_account_only(assembly: Path) -> None:
    _, template = _stack(assembly)
    (role,) = [r for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role" and "ExecutionRole" in k]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert _sub(trust["Condition"]["ArnLike"]["aws:SourceArn"]) == "arn:${AWS::Partition}:sagemaker:us-west-2:111111111111:*"
    assert [s["Action"] for s in _policy(template, "ExecutionPolicy")] == ["sagemaker:DescribeCluster"]


def test_the_pipeline_deploys_the_members_in_one_wave_then_the_gateway(assembly: Path) -> None:
    pipeline = next(a for a in _artifacts(assembly).values()
                    if a["type"] == "aws:cloudformation:stack" and a["displayName"] == "pipeline")
    template = json.loads((assembly / pipeline["properties"]["templateFile"]).read_text())
    (codepipeline,) = _resources(template, "AWS::CodePipeline::Pipeline")
    stages = {s["Name"]: s["Actions"] for s in codepipeline["Properties"]["Stages"]}
    # THEN one stage for the wave, the gateway's stage right after it
    assert list(stages)[-2:] == ["members", "global-llama-global"]
    wave = stages["members"]
    # AND both environments deploy in that stage, each with its own checks, in parallel (one run order per step)
    for env in ("west", "east"):
        names = [a["Name"] for a in wave if a["Name"].startswith(f"{env}.")]
        assert f"{env}.hpdpd-{env}-platform.Preflight" in names and f"{env}.Verify" in names, names
    run_orders = {a["Name"]: a["RunOrder"] for a in wave}
    assert run_orders["west.Verify"] == run_orders["east.Verify"]
    gateway = [a for a in stages["global-llama-global"] if a["ActionTypeId"]["Provider"] == "CloudFormation"]
    assert {a["Configuration"].get("StackName") for a in gateway} == {"hpdpd-global-llama-global"}


def test_the_gateway_template_passes_cfn_lint(assembly: Path) -> None:
    _, template = _stack(assembly)
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-west-2"], ignore_checks=["W3005"]))
    # W3005 (a DependsOn a GetAtt already implies) is ignored as for every CDK template (test_pipeline_stack.py).
    # cfn-lint 1.58's list of IAM actions predates the Global Inference Gateway's (W3037 on exactly those, nothing
    # else): the actions are botocore 1.44.8's operation names; docs/global.md says they are unconfirmed in the
    # Service Authorization Reference.
    new_actions = {a.split(":")[1].lower() for a in (*GATEWAY_ACTIONS, *CLUSTER_ACTIONS)}
    unknown = {m.message.split("'")[1] for m in matches if m.rule.id == "W3037"}
    assert unknown == new_actions - {"describecluster"}
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id != "W3037"] == []


def test_the_handler_brings_the_sagemaker_model_its_runtime_may_lack(assembly: Path) -> None:
    from botocore.loaders import Loader

    from hyperpod_dpd.infra.global_gateway import DATA_PATH, MODEL_FILE, MODELS_DIR

    artifact, template = _stack(assembly)
    nested = assembly / _artifacts(assembly)["assembly-global-llama-global"]["properties"]["directoryName"]
    handlers = [r for r in _resources(template, "AWS::Lambda::Function")
                if r["Properties"].get("Handler") in ("index.on_event", "index.is_complete")]
    # THEN both handler functions point the runtime's botocore at the asset's models
    assert len(handlers) == 2
    assert all(h["Properties"]["Environment"]["Variables"]["AWS_DATA_PATH"] == DATA_PATH for h in handlers)
    # AND their asset holds the pinned botocore's SageMaker model, byte for byte
    (key,) = {h["Properties"]["Code"]["S3Key"] for h in handlers}
    (manifest,) = nested.glob(f"{artifact['properties']['templateFile'].removesuffix('.template.json')}.assets.json")
    asset = json.loads(manifest.read_text())["files"][key.removesuffix(".zip")]["source"]["path"]
    bundled = nested / asset / MODELS_DIR / MODEL_FILE
    installed = Path(__import__("botocore").__file__).parent / "data" / MODEL_FILE
    assert bundled.read_bytes() == installed.read_bytes()
    # AND a botocore loader searching that path first (as AWS_DATA_PATH makes it) loads it, with the gateway's calls
    model, path = Loader(extra_search_paths=[str(nested / asset / MODELS_DIR)]).load_data_with_path(
        "sagemaker/2017-07-24/service-2")
    assert Path(path).resolve().is_relative_to((nested / asset).resolve())
    assert {"CreateGlobalInferenceGateway", "AddInferenceGateway", "DeleteGlobalInferenceGateway"} <= set(
        model["operations"])


def test_a_role_of_ones_own_is_passed_by_a_partition_aware_arn(cdk_context: dict[str, Any]) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Match, Template

    from hyperpod_dpd.infra.global_gateway import GlobalInferenceGateway, Member

    # GIVEN execution_role_arn, written as the docs show it (a literal arn:aws:)
    stack = cdk.Stack(cdk.App(context=cdk_context), "Own", env=cdk.Environment(account="111111111111",
                                                                               region="us-west-2"))
    GlobalInferenceGateway(stack, "Gateway", name="llama-global", execution_role_arn=(
        "arn:aws:iam::111111111111:role/team/my-gateway-role"), members=[Member(
            environment="west", region="us-west-2", cluster_name="hpdpd-west", namespace="llm-serving", name="g")])
    template = Template.from_stack(stack)
    # THEN the gateway is given the role as written, and iam:PassRole names it with ${AWS::Partition} (HPDPD-IAM1)
    template.has_resource_properties(RESOURCE_TYPE, {
        "ExecutionRoleArn": "arn:aws:iam::111111111111:role/team/my-gateway-role"})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Sid": "PassTheExecutionRole", "Resource": {"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"}, ":iam::111111111111:role/team/my-gateway-role"]]}})])}})
    assert "arn:aws:" not in json.dumps(template.find_resources("AWS::IAM::Policy"))


def _gateway_stack(cdk_context: dict[str, Any], **stack: Any) -> Any:
    import aws_cdk as cdk

    from hyperpod_dpd.infra.global_gateway import GlobalInferenceGateway, Member

    app = cdk.App(context=cdk_context)
    scope = cdk.Stack(app, "Tagged", env=cdk.Environment(account="111111111111", region="us-west-2"), **stack)
    GlobalInferenceGateway(scope, "Gateway", name="llama-global", members=[Member(
        environment="west", region="us-west-2", cluster_name="hpdpd-west", namespace="llm-serving", name="g")])
    return app, scope


def test_the_gateway_carries_its_stacks_tags_and_the_cdk_tags_that_reach_it(cdk_context: dict[str, Any]) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    # GIVEN a stack with tags of its own, a CDK tag on the app, one overriding a stack tag, one for IAM roles only
    app, stack = _gateway_stack(cdk_context, tags={"cost-center": "ml", "team": "stack"})
    cdk.Tags.of(app).add("team", "serving")
    cdk.Tags.of(app).add("owner-of-roles", "x", include_resource_types=["AWS::IAM::Role"])
    (resource,) = Template.from_stack(stack).find_resources(RESOURCE_TYPE).values()
    # THEN the gateway's Tags hold the stack's and the CDK tags by key, the construct's winning, not the roles' tag
    assert resource["Properties"]["Tags"] == [{"Key": "cost-center", "Value": "ml"},
                                              {"Key": "team", "Value": "serving"}]


def test_an_untagged_gateway_sends_no_tags(cdk_context: dict[str, Any]) -> None:
    from aws_cdk.assertions import Template

    _, stack = _gateway_stack(cdk_context)
    (resource,) = Template.from_stack(stack).find_resources(RESOURCE_TYPE).values()
    assert "Tags" not in resource["Properties"]


def test_the_stack_modules_docstring_names_code_that_exists() -> None:
    import importlib
    import re

    from hyperpod_dpd.stacks import global_gateway_stack

    # GIVEN the Sphinx references and the files the module's docstring names THEN each one exists
    doc = global_gateway_stack.__doc__ or ""
    for target in re.findall(r":(?:func|class|mod):`~?([\w.]+)`", doc):
        if "." not in target:
            target = f"{global_gateway_stack.__name__}.{target}"
        module, _, name = target.rpartition(".")
        assert hasattr(importlib.import_module(module), name), target
    for path in re.findall(r"``([\w/]+\.py)``", doc):
        assert (ROOT / path).is_file(), path
