"""HPDPD-IAM3 over every synthesized template: no statement admits an AWS service principal without binding it to
its source, except the documented exemptions; and the bindings admit this account's sources and no other's."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam

from hyperpod_dpd.infra import source_conditions
from hyperpod_dpd.infra.guardrails.rules.trust import METADATA_KEY, UNBOUND, bound
from hyperpod_dpd.infra.guardrails.templates import StageTemplates
from tests.iam_eval import Deployment, conditions_hold, resolve
from tests.infra.guardrails.conftest import first, run

RULE = "HPDPD-IAM3"


def every_template(outdir: Path) -> StageTemplates:
    """Every stack of the cloud assembly, nested stage assemblies included (the pipeline, its cross-Region support
    stacks and the environments' stacks), from the manifests, so that no stack is missed."""
    paths: list[str] = []

    def walk(directory: Path) -> None:
        manifest = json.loads((directory / "manifest.json").read_text())
        for artifact in manifest["artifacts"].values():
            if artifact["type"] == "aws:cloudformation:stack":
                paths.append(str(directory / artifact["properties"]["templateFile"]))
            elif artifact["type"] == "cdk:cloud-assembly":
                walk(directory / artifact["properties"]["directoryName"])

    walk(outdir)
    return StageTemplates.load(paths)


@pytest.fixture(scope="module")
def everything(synthesized: Any) -> StageTemplates:
    return every_template(synthesized.outdir)


def _service_statements(view: StageTemplates) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(template, logical id, principal, statement) of every Allow statement that admits a service principal."""
    found = []
    for resource in view.resources("AWS::IAM::Role", "AWS::KMS::Key", "AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy"):
        key = {"AWS::IAM::Role": "AssumeRolePolicyDocument", "AWS::KMS::Key": "KeyPolicy"}.get(resource.type, "PolicyDocument")
        for statement in resource.properties.get(key, {}).get("Statement", []):
            services = (statement.get("Principal") or {}).get("Service") if isinstance(statement.get("Principal"), dict) else None
            for service in [services] if isinstance(services, str) else services or []:
                if statement.get("Effect") == "Allow":
                    found.append((Path(resource.template_path).name, resource.logical_id, service, statement))
    return found


def test_no_template_admits_a_service_principal_without_its_source(everything: StageTemplates) -> None:
    # GIVEN every template of the session's synthesis: each environment's network, platform and endpoints stacks,
    # the pipeline stack and its cross-Region support stack
    names = {Path(p).name for p in everything.templates}
    assert {"pipeline.template.json"} <= names and any(n.startswith("cross-region-stack") for n in names)
    assert sum(n.startswith(("dev", "staging", "prod")) for n in names) == 9
    # WHEN the rule runs over all of them at once
    findings = run(RULE, everything)
    # THEN nothing is reported, although the templates admit many service principals
    assert findings == [], [(f.resource.logical_id, f.detail) for f in findings]
    admitted = {service for *_, service, _ in _service_statements(everything)}
    assert {"vpc-flow-logs.amazonaws.com", "eks.amazonaws.com", "sagemaker.amazonaws.com", "codebuild.amazonaws.com",
            "cloudwatch.amazonaws.com", "aps.amazonaws.com", "cloudtrail.amazonaws.com", "logging.s3.amazonaws.com",
            "pods.eks.amazonaws.com", "lambda.amazonaws.com", "codepipeline.amazonaws.com"} <= admitted


def test_every_unbound_statement_is_a_documented_exemption_of_its_principal(everything: StageTemplates) -> None:
    # GIVEN every statement that admits a service principal and binds it to no source
    unbound = [(template, logical_id, service) for template, logical_id, service, statement in
               _service_statements(everything) if not bound(statement.get("Condition"), service)]
    # THEN each is lambda.amazonaws.com (exempt everywhere) or carries the marker of an exemption of that principal
    for template, logical_id, service in unbound:
        path = next(p for p in everything.templates if Path(p).name == template)
        markers = everything.templates[path]["Resources"][logical_id].get("Metadata", {}).get(METADATA_KEY, [])
        exemptions = [UNBOUND[m] for m in markers]
        assert service == "lambda.amazonaws.com" or [e.principal for e in exemptions] == [service], (logical_id, service)
    # AND exactly these uses are unbound: aws-cdk-lib's handler roles, HyperPod's instance role, CodePipeline's role
    assert {s for *_, s in unbound} == {"lambda.amazonaws.com", "sagemaker.amazonaws.com", "codepipeline.amazonaws.com"}
    assert {lid for _, lid, s in unbound if s == "sagemaker.amazonaws.com"} == {"HyperPodExecutionRole32B4ED4D"}
    # AND every exemption says why, where that is documented, and what is not confirmed
    for exemption in UNBOUND.values():
        assert exemption.reason and exemption.source and exemption.principal.endswith(".amazonaws.com")


@pytest.mark.parametrize(("template", "prefix", "service", "own", "other"), [
    ("devNetwork", "NetworkAllIAMRole", "vpc-flow-logs.amazonaws.com",
     "arn:aws:ec2:us-west-2:111111111111:vpc-flow-log/fl-0a1b", "arn:aws:ec2:us-west-2:999999999999:vpc-flow-log/fl-0a1b"),
    ("devPlatform", "EksRole", "eks.amazonaws.com",
     "arn:aws:eks:us-west-2:111111111111:cluster/hpdpd-dev", "arn:aws:eks:us-west-2:111111111111:cluster/other"),
    ("devPlatform", "InferenceOperatorExecutionRole", "sagemaker.amazonaws.com",
     "arn:aws:sagemaker:us-west-2:111111111111:endpoint/e", "arn:aws:sagemaker:us-west-2:999999999999:endpoint/e"),
    ("devPlatform", "ChecksRunnerRole", "codebuild.amazonaws.com",
     "arn:aws:codebuild:us-west-2:111111111111:project/hpdpd-dev-checks",
     "arn:aws:codebuild:us-west-2:111111111111:project/other"),
    ("pipeline", "PipelineBuildSynthCdkBuildProjectRole", "codebuild.amazonaws.com",
     "arn:aws:codebuild:us-west-2:444444444444:project/PipelineBuildSynth", "arn:aws:codebuild:us-west-2:999999999999:project/x"),
])
def test_a_bound_trust_admits_this_accounts_source_and_no_other(everything: StageTemplates, template: str, prefix: str,
                                                               service: str, own: str, other: str) -> None:
    # GIVEN the trust statement of one role, resolved for its environment
    account = "444444444444" if template == "pipeline" else "111111111111"
    (statement,) = [s for t, lid, svc, s in _service_statements(everything)
                    if t.startswith(template) and lid.startswith(prefix) and svc == service]
    condition = resolve(statement["Condition"], Deployment(account=account, region="us-west-2"))
    # THEN a request from this account's source passes, one from another account's (or another resource's) does not
    own_account, other_account = own.split(":")[4], other.split(":")[4]
    assert conditions_hold(condition, {"aws:SourceArn": own, "aws:SourceAccount": own_account})
    assert not conditions_hold(condition, {"aws:SourceArn": other, "aws:SourceAccount": other_account})


def test_the_alert_key_admits_each_publisher_for_this_accounts_sources_only(everything: StageTemplates) -> None:
    # GIVEN the alert topic's key in dev (the observability add-on: CloudWatch alarms and AMP publish)
    statements = {svc: s for t, lid, svc, s in _service_statements(everything)
                  if t.startswith("devPlatform") and lid.startswith("MonitoringTopicKey")}
    assert set(statements) == {"cloudwatch.amazonaws.com", "aps.amazonaws.com"}
    deployment = Deployment(account="111111111111", region="us-west-2")
    alarm = resolve(statements["cloudwatch.amazonaws.com"]["Condition"], deployment)
    workspace = resolve(statements["aps.amazonaws.com"]["Condition"], deployment)
    # THEN each admits its own kind of source in this account, and neither the other's kind nor another account
    assert conditions_hold(alarm, {"aws:SourceArn": "arn:aws:cloudwatch:us-west-2:111111111111:alarm:dpd",
                                   "aws:SourceAccount": "111111111111"})
    assert not conditions_hold(alarm, {"aws:SourceArn": "arn:aws:aps:us-west-2:111111111111:workspace/ws-1",
                                       "aws:SourceAccount": "111111111111"})
    assert conditions_hold(workspace, {"aws:SourceArn": "arn:aws:aps:us-west-2:111111111111:workspace/ws-1",
                                       "aws:SourceAccount": "111111111111"})
    assert not conditions_hold(workspace, {"aws:SourceArn": "arn:aws:aps:us-west-2:999999999999:workspace/ws-1",
                                           "aws:SourceAccount": "999999999999"})


def test_removing_a_condition_is_a_finding(view) -> None:
    # GIVEN dev's stage with the flow-log role's condition removed
    stage = view("dev")
    role = first(stage, "AWS::IAM::Role", "NetworkAllIAMRole")
    role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0].pop("Condition")
    # THEN the rule names that role and the principal
    (finding,) = run(RULE, stage)
    assert finding.resource.logical_id.startswith("NetworkAllIAMRole")
    assert finding.detail == "admits vpc-flow-logs.amazonaws.com without aws:SourceArn or aws:SourceAccount"


def test_a_wildcard_or_foreign_binding_key_binds_nothing(view) -> None:
    # GIVEN dev's EKS role with a bare-wildcard source, and the flow-log key's logs statement with its context key
    # under another principal's name
    stage = view("dev")
    eks = first(stage, "AWS::IAM::Role", "EksRole")["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    eks["Condition"] = {"ArnLike": {"aws:SourceArn": "*"}, "StringEquals": {"aws:SourceAccount": ["*"]}}
    key = first(stage, "AWS::KMS::Key", "NetworkFlowLogsKey")["Properties"]["KeyPolicy"]["Statement"]
    logs = next(s for s in key if isinstance(s["Principal"], dict) and "Service" in s["Principal"])
    logs["Principal"]["Service"] = "delivery.logs.amazonaws.com"  # kms:EncryptionContext:aws:logs:arn is not its key
    # THEN both are findings
    assert sorted(f.resource.logical_id[:10] for f in run(RULE, stage)) == ["EksRoleDC2", "NetworkFlo"]


def test_a_marker_exempts_only_its_own_principal(view) -> None:
    # GIVEN dev's checks-runner role without its condition, marked with HyperPod's instance-role exemption
    stage = view("dev")
    runner = first(stage, "AWS::IAM::Role", "ChecksRunnerRole")
    runner["Properties"]["AssumeRolePolicyDocument"]["Statement"][0].pop("Condition")
    runner.setdefault("Metadata", {})[METADATA_KEY] = ["hyperpod-instance-role"]
    # THEN the marker does not cover codebuild.amazonaws.com
    (finding,) = run(RULE, stage)
    assert finding.detail == "admits codebuild.amazonaws.com without aws:SourceArn or aws:SourceAccount"


def test_a_lambda_permission_for_a_service_needs_its_source() -> None:
    # GIVEN a template with two Lambda permissions for S3, one without SourceArn/SourceAccount
    permission = {"Type": "AWS::Lambda::Permission", "Properties": {
        "Action": "lambda:InvokeFunction", "FunctionName": "f", "Principal": "s3.amazonaws.com"}}
    bound_permission = copy.deepcopy(permission)
    bound_permission["Properties"]["SourceAccount"] = "111111111111"
    view = StageTemplates.from_dicts({"t": {"Resources": {"Open": permission, "Bound": bound_permission}}})
    # THEN only the open one is a finding
    assert [f.resource.logical_id for f in run(RULE, view)] == ["Open"]


def test_the_helpers_refuse_what_they_cannot_do() -> None:
    # GIVEN a role that admits EC2 only
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="111111111111", region="us-west-2"))
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    # THEN binding another principal, or marking an undocumented exemption, raises before anything is written
    with pytest.raises(ValueError, match="no trust statement that admits eks.amazonaws.com alone"):
        source_conditions.bind_trust(role, "eks.amazonaws.com", source_conditions.eks_cluster(stack, "c"))
    with pytest.raises(KeyError, match="unknown exemption 'ec2-anything'"):
        source_conditions.mark_unbound(role, "ec2-anything")
    # AND binding its own principal keeps the statement and adds the conditions
    source_conditions.bind_trust(role, "ec2.amazonaws.com", {"StringEquals": {"aws:SourceAccount": "111111111111"}})
    template = assertions.Template.from_stack(stack).to_json()
    (statement,) = template["Resources"][stack.get_logical_id(role.node.default_child)]["Properties"][  # type: ignore[arg-type]
        "AssumeRolePolicyDocument"]["Statement"]
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": "111111111111"}}
    assert statement["Principal"] == {"Service": "ec2.amazonaws.com"}
