"""checkov skips where they arise: aws-cdk-lib's own handlers get reasoned skips once per synthesis, and nothing else
does (the whole-project checkov scan is tests/test_checkov.py)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy

from hyperpod_dpd.infra.checkov import HANDLER_REASONS, skip, skip_generated_handlers


def _skips(resource: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["comment"] for s in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """A stage with aws-cdk-lib's handlers (bucket auto-delete, bucket deployment), the consumer's own Lambda, and a
    nested stage that is synthesized on its own; skips applied to the outer stage, synthesized twice."""
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
    stage = cdk.Stage(app, "Outer")
    stack = cdk.Stack(stage, "Stack")
    bucket = s3.Bucket(stack, "Bucket", removal_policy=cdk.RemovalPolicy.DESTROY, auto_delete_objects=True)
    s3deploy.BucketDeployment(stack, "Deploy", destination_bucket=bucket,
                              sources=[s3deploy.Source.data("a.txt", "a")])
    own = lambda_.Function(stack, "Own", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
                           code=lambda_.Code.from_inline("def handler(e, c): return e"))
    skip(own.node.default_child, "CKV_AWS_117", "the consumer's own reason for its own function")  # type: ignore[arg-type]
    inner = cdk.Stage(stage, "Inner")
    inner_stack = cdk.Stack(inner, "InnerStack")
    s3.Bucket(inner_stack, "Bucket", removal_policy=cdk.RemovalPolicy.DESTROY, auto_delete_objects=True)
    skip_generated_handlers(stage)
    stage.synth()
    assembly = stage.synth(force=True)  # a second synthesis must not repeat a skip
    return {
        "outer": assembly.get_stack_artifact(stack.artifact_id).template["Resources"],
        # synthesized again after the outer stage was: a skip the outer stage wrongly gave it would show now
        "inner": inner.synth(force=True).get_stack_artifact(inner_stack.artifact_id).template["Resources"],
    }


def test_every_generated_handler_function_is_skipped_with_the_reasons(synthesized: dict[str, dict[str, Any]]) -> None:
    # GIVEN the outer stage's Lambda functions
    functions = {k: r for k, r in synthesized["outer"].items() if r["Type"] == "AWS::Lambda::Function"}
    generated = {k: r for k, r in functions.items() if not k.startswith("Own")}
    # THEN both of aws-cdk-lib's handlers (auto-delete provider, bucket deployment) carry exactly the reasoned skips
    assert len(generated) == 2
    for resource in generated.values():
        assert _skips(resource) == dict(HANDLER_REASONS["AWS::Lambda::Function"])


def test_the_consumers_own_function_keeps_only_its_own_skip(synthesized: dict[str, dict[str, Any]]) -> None:
    # GIVEN the consumer's function, which skipped one check itself
    own = next(r for k, r in synthesized["outer"].items() if k.startswith("Own") and r["Type"] == "AWS::Lambda::Function")
    # THEN none of the handler skips were added to it, and its own skip is intact
    assert _skips(own) == {"CKV_AWS_117": "the consumer's own reason for its own function"}


def test_a_second_synthesis_repeats_no_skip(synthesized: dict[str, dict[str, Any]]) -> None:
    # GIVEN every skip list of the outer stage after two syntheses
    lists = [r["Metadata"]["checkov"]["skip"] for r in synthesized["outer"].values()
             if "checkov" in r.get("Metadata", {})]
    # THEN no check id appears twice on one resource
    assert lists and all(len({s["id"] for s in skips}) == len(skips) for skips in lists)


def test_a_nested_stage_is_left_to_its_own_guardrails(synthesized: dict[str, dict[str, Any]]) -> None:
    # GIVEN the nested stage, synthesized on its own before the outer one
    handlers = [r for r in synthesized["inner"].values() if r["Type"] == "AWS::Lambda::Function"]
    # THEN its handler was not changed by the outer stage's skips (the nested stage needs its own call)
    assert handlers and all(_skips(r) == {} for r in handlers)
