"""CloudFormation's per-template limits on a real synthesized assembly (hyperpod_dpd.config.template_limits): the
1 MB template body CloudFormation reads from S3 (how the CDK deploys every template), 500 resources, 200 outputs,
200 parameters and 200 mappings. One small app holds a stack at each limit and one past it; it is synthesized once."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from hyperpod_dpd.catalogue.limits import MAX_MAPPINGS, MAX_OUTPUTS, MAX_RESOURCES, TEMPLATE_BODY_S3_BYTES
from hyperpod_dpd.config.template_limits import template_limit_issues

HANDLE = "AWS::CloudFormation::WaitConditionHandle"  # a resource with no properties and no cost


def _stack(app: cdk.App, name: str, *, resources: int = 1, outputs: int = 0, mappings: int = 0,
           metadata_bytes: int = 0) -> cdk.Stack:
    stack = cdk.Stack(app, name, stack_name=f"limits-{name.lower()}", synthesizer=cdk.DefaultStackSynthesizer())
    for i in range(resources):
        handle = cdk.CfnResource(stack, f"Handle{i}", type=HANDLE)
        if i == 0 and metadata_bytes:
            handle.add_metadata("Padding", "x" * metadata_bytes)
    for i in range(outputs):
        cdk.CfnOutput(stack, f"Output{i}", value=str(i))
    for i in range(mappings):
        cdk.CfnMapping(stack, f"Mapping{i}", mapping={"Key": {"Value": str(i)}}, lazy=False)
    return stack


@pytest.fixture(scope="module")
def issues(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    # The CDK refuses more than 500 resources itself unless this context turns its check off; off here, so that the
    # backstop below is what reports the stack with 501.
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")), context={"@aws-cdk/core:stackResourceLimit": 0})
    _stack(app, "AtLimits", resources=MAX_RESOURCES, outputs=MAX_OUTPUTS, mappings=MAX_MAPPINGS)
    _stack(app, "Large", metadata_bytes=TEMPLATE_BODY_S3_BYTES)
    _stack(app, "Many", resources=MAX_RESOURCES + 1, outputs=MAX_OUTPUTS + 1)
    stage = cdk.Stage(app, "dev")
    _stack(stage, "Nested", mappings=MAX_MAPPINGS + 1)  # in a nested stage assembly, as the toolkit's stages are
    assembly = app.synth()
    return template_limit_issues(assembly), Path(assembly.directory)


def test_a_template_over_1_mb_is_one_line_with_its_size_and_the_limit(issues: tuple[list[str], Path]) -> None:
    # GIVEN a stack whose template carries a million bytes of metadata
    # THEN its line names the stack, the template's bytes and CloudFormation's limit
    lines, outdir = issues
    size = (outdir / "Large.template.json").stat().st_size
    [line] = [line for line in lines if line.startswith("Large ")]
    assert size > TEMPLATE_BODY_S3_BYTES
    assert line.startswith(f"Large (limits-large): the template has {size:,} bytes; CloudFormation reads at most "
                           "1,000,000 bytes of template from S3, which is how the CDK deploys it"), line


def test_counted_limits_are_reported_per_section(issues: tuple[list[str], Path]) -> None:
    lines, _ = issues
    assert [line for line in lines if line.startswith("Many ")] == [
        "Many (limits-many): the template declares 501 resources; CloudFormation allows at most 500 per template: "
        "split the stack",
        "Many (limits-many): the template declares 201 outputs; CloudFormation allows at most 200 per template: "
        "split the stack"]


def test_stacks_of_a_stage_are_read_from_its_nested_assembly(issues: tuple[list[str], Path]) -> None:
    lines, _ = issues
    assert [line for line in lines if line.startswith("dev/")] == [
        "dev/Nested (limits-nested): the template declares 201 mappings; CloudFormation allows at most 200 per "
        "template: split the stack"]


def test_a_template_at_every_limit_passes(issues: tuple[list[str], Path]) -> None:
    lines, _ = issues
    assert [line for line in lines if line.startswith("AtLimits")] == []
    assert len(lines) == 4


def test_the_toolkits_own_environments_fit(synthesized) -> None:  # noqa: ANN001 - the session's assembly
    # GIVEN every fixture environment synthesized as make synth does (the session's assembly)
    # THEN none of their templates is near a limit
    import aws_cdk.cx_api as cx_api

    assert template_limit_issues(cx_api.CloudAssembly(str(synthesized.outdir))) == []
