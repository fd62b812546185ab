"""The promotion pipeline as synthesized by ``make synth``: stages in config order, checks wired to their environment,
the approval before prod, the very stacks ``cdk deploy "<env>/*"`` deploys, zero cfn-lint and CDK validation findings.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import assertions, pipelines
from cfnlint.api import ManualArgs, lint

from hyperpod_dpd.config import load_environment, parse_environment
from hyperpod_dpd.config.pipeline import PipelineConfig, load_pipeline
from hyperpod_dpd.infra.checks_role import READ_CALLS
from hyperpod_dpd.stacks.application import build_app, cdk_json_context, pipeline_environments
from hyperpod_dpd.stacks.pipeline_stack import EnvironmentChecks, deploy_role_arn, pinned_cli_version
from tests.iam_eval import Deployment, resolve
from tests.paths import FIXTURE_CONFIG_DIR, ROOT

HPDPD = ".venv/bin/hpdpd"
TRIGGER = f"{HPDPD} checks run --env dev --profile hpdpd-checks --region us-west-2"  # dev's cluster steps start its runner
CFN_ACTIONS = ("Prepare", "Deploy")


@dataclass(frozen=True)
class Pipeline:
    """The synthesized pipeline stack: its template, its CodePipeline and the CodeBuild projects of its actions."""

    outdir: Path
    config: PipelineConfig
    artifact: dict[str, Any]
    template: dict[str, Any]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    @property
    def codepipeline(self) -> dict[str, Any]:
        (found,) = [r for r in self.resources.values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
        return found["Properties"]

    def stage(self, name: str) -> list[dict[str, Any]]:
        return next(s["Actions"] for s in self.codepipeline["Stages"] if s["Name"] == name)

    def action(self, stage: str, name: str) -> dict[str, Any]:
        return next(a for a in self.stage(stage) if a["Name"] == name)

    def project(self, action: dict[str, Any]) -> dict[str, Any]:
        return self.resources[action["Configuration"]["ProjectName"]["Ref"]]["Properties"]

    def buildspec(self, action: dict[str, Any]) -> dict[str, Any]:
        return json.loads(self.project(action)["Source"]["BuildSpec"])

    def commands(self, action: dict[str, Any]) -> list[str]:
        return self.buildspec(action)["phases"]["build"]["commands"]

    def variables(self, action: dict[str, Any]) -> dict[str, str]:
        return {v["Name"]: v["Value"] for v in self.project(action)["Environment"].get("EnvironmentVariables", [])}


@pytest.fixture(scope="module")
def pipeline(synthesized) -> Pipeline:
    """The pipeline is part of the app ``make synth`` synthesizes, so the session's one synth already holds it."""
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    artifact = next(a for a in manifest["artifacts"].values()
                    if a["type"] == "aws:cloudformation:stack" and a["displayName"] == "pipeline")
    template = json.loads((synthesized.outdir / artifact["properties"]["templateFile"]).read_text())
    return Pipeline(synthesized.outdir, load_pipeline(), artifact, template)


def _checks_role(env: str) -> str:
    config = load_environment(env)
    return f"arn:aws:iam::{config.account}:role/hpdpd-{env}-checks"


PROFILE = ['aws configure set profile.hpdpd-checks.role_arn "$HPDPD_CHECKS_ROLE_ARN"',
           "aws configure set profile.hpdpd-checks.credential_source EcsContainer",
           "aws configure set profile.hpdpd-checks.role_session_name hpdpd-pipeline-checks"]


def test_pipeline_stack_lives_in_its_own_account_with_a_stable_name(pipeline: Pipeline) -> None:
    assert pipeline.artifact["environment"] == "aws://444444444444/us-west-2"
    assert pipeline.artifact["properties"]["stackName"] == "hpdpd-pipeline"
    props = pipeline.codepipeline
    assert (props["Name"], props["PipelineType"], props["ExecutionMode"]) == ("hpdpd-pipeline", "V2", "SUPERSEDED")
    # cross-account artifacts need a customer-managed key, and the artifact audit trail's log files have one; both rotate
    keys = {k: r for k, r in pipeline.resources.items() if r["Type"] == "AWS::KMS::Key"}
    assert sorted(k.split("BucketEncryptionKey")[0].split("Key")[0] for k in keys) == ["ArtifactAudit", "PipelineArtifacts"]
    assert all(key["Properties"]["EnableKeyRotation"] is True for key in keys.values())


def test_stages_follow_the_config_order(pipeline: Pipeline) -> None:
    # WHEN the pipeline's stages are read from the template
    names = [s["Name"] for s in pipeline.codepipeline["Stages"]]
    # THEN source, synth, self-mutation and assets come first, then the environments exactly in config order
    assert names == ["Source", "Build", "UpdatePipeline", "Assets", *pipeline.config.order]
    assert pipeline.config.order == ("dev", "staging", "prod")


def test_source_is_the_configured_connection_repository_and_branch(pipeline: Pipeline) -> None:
    (source,) = pipeline.stage("Source")
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert {k: source["Configuration"][k] for k in ("ConnectionArn", "FullRepositoryId", "BranchName")} == {
        "ConnectionArn": pipeline.config.source.connection_arn, "FullRepositoryId": "acme/hyperpod-dpd",
        "BranchName": "main"}


def test_synth_runs_the_projects_own_make_targets_with_the_pinned_cli(pipeline: Pipeline) -> None:
    synth = pipeline.buildspec(pipeline.action("Build", "Synth"))
    assert synth["phases"]["install"]["commands"] == ["make setup"]
    assert synth["phases"]["build"]["commands"] == ["make test", "make synth"]
    assert synth["artifacts"]["base-directory"] == "cdk.out"
    # the self-mutation (and asset publishing) use the aws-cdk CLI version pinned in package.json
    version = pinned_cli_version(ROOT)
    assert version == json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    mutate = pipeline.buildspec(pipeline.action("UpdatePipeline", "SelfMutate"))
    assert f"npm install -g aws-cdk@{version}" in mutate["phases"]["install"]["commands"]


def test_manual_approval_comes_before_prod_only(pipeline: Pipeline) -> None:
    # WHEN the approval actions of each environment stage are collected
    approvals = {env: [a for a in pipeline.stage(env) if a["ActionTypeId"]["Category"] == "Approval"]
                 for env in pipeline.config.order}
    # THEN only prod has one
    assert {env: len(found) for env, found in approvals.items()} == {"dev": 0, "staging": 0, "prod": 1}
    # AND it runs first, then the network's deployment, the preflight, then the platform's
    (approve,) = approvals["prod"]
    preflight = pipeline.action("prod", "hpdpd-prod-platform.Preflight")
    deployments = [a["RunOrder"] for a in pipeline.stage("prod") if a["Name"].rsplit(".", 1)[-1] in CFN_ACTIONS]
    platform = pipeline.action("prod", "hpdpd-prod-platform.Prepare")
    assert approve["RunOrder"] < min(deployments) < preflight["RunOrder"] < platform["RunOrder"]
    assert "dev, staging deployed and checked by this execution" in approve["Configuration"]["CustomData"]


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_checks_are_wired_to_their_environment(pipeline: Pipeline, env: str) -> None:
    config = load_environment(env)
    target = f"--output json --profile hpdpd-checks --region {config.region}"
    actions = pipeline.stage(env)
    order = {a["Name"]: a["RunOrder"] for a in actions}
    deployments = [a["RunOrder"] for a in actions if a["Name"].rsplit(".", 1)[-1] in CFN_ACTIONS]
    preflight, verify = pipeline.action(env, f"hpdpd-{env}-platform.Preflight"), pipeline.action(env, "Verify")
    # THEN preflight runs once the network stack (which holds the checks role) is deployed and before the platform
    # stack (the HyperPod cluster) is prepared; wait and status after every deployment
    assert order[f"hpdpd-{env}-network.Deploy"] < preflight["RunOrder"] < order[f"hpdpd-{env}-platform.Prepare"]
    assert verify["RunOrder"] > max(deployments)
    # AND each targets this environment, through a profile that assumes this environment's checks role
    assert pipeline.commands(preflight) == [*PROFILE, f"{HPDPD} preflight --env {env} {target}"]
    wait = pipeline.config.promotion(env).wait_timeout_minutes * 60
    assert pipeline.commands(verify) == [
        *PROFILE,
        f"{HPDPD} wait --env {env} --for cluster --timeout {wait} {target}",
        f"{HPDPD} wait --env {env} --for addons --timeout {wait} {target}",
        f"{HPDPD} status --env {env} {target}",
    ]
    for action in (preflight, verify):
        assert pipeline.variables(action) == {"HPDPD_CHECKS_ROLE_ARN": _checks_role(env)}
        assert pipeline.buildspec(action)["phases"]["install"]["commands"] == ["make setup"]
    assert pipeline.project(verify)["TimeoutInMinutes"] == 2 * pipeline.config.promotion(env).wait_timeout_minutes + 30
    # AND their CodeBuild role is this environment's, bound to this account's CodeBuild projects, and may assume
    # this environment's checks role and nothing else
    role_id = pipeline.project(preflight)["ServiceRole"]["Fn::GetAtt"][0]
    assert pipeline.project(verify)["ServiceRole"]["Fn::GetAtt"][0] == role_id
    role = pipeline.resources[role_id]["Properties"]
    assert role["RoleName"] == f"hpdpd-pipeline-checks-{env}"
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": "444444444444"}
    assumed = [s["Resource"] for r in pipeline.resources.values() if r["Type"] == "AWS::IAM::Policy"
               and {"Ref": role_id} in r["Properties"]["Roles"]
               for s in r["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "sts:AssumeRole"]
    assert assumed == [_checks_role(env)]


def test_no_step_may_assume_the_cdk_lookup_role(pipeline: Pipeline) -> None:
    # The lookup role carries ReadOnlyAccess on the whole target account: no role of the pipeline names it
    assert "lookup-role" not in json.dumps(pipeline.template)
    assumed = {json.dumps(s["Resource"]) for r in pipeline.resources.values() if r["Type"] == "AWS::IAM::Policy"
               for s in r["Properties"]["PolicyDocument"]["Statement"] if "sts:AssumeRole" in json.dumps(s["Action"])}
    assert assumed and all("lookup" not in a and "ReadOnly" not in a for a in assumed)


def _checks_profiles(env: str) -> list[str]:
    return PROFILE


def test_the_fixture_pipeline_gates_every_environment_with_endpoints(pipeline: Pipeline) -> None:
    # GIVEN the fixture pipeline.yaml, which names no checks role and no smoke switch, and dev, the one environment
    # with an endpoint (no SageMaker endpoint name; the observability add-on)
    assert all(p.checks_role_arn is None and p.smoke is None for p in pipeline.config.environments)
    dev = load_environment("dev")
    (endpoint,) = dev.endpoints
    assert endpoint.sagemaker_endpoint_name is None and dev.operator.observability.enabled
    minutes = pipeline.config.promotion("dev").wait_timeout_minutes
    wait = minutes * 60
    target = "--output json --region us-west-2"
    order = {a["Name"]: a["RunOrder"] for a in pipeline.stage("dev")}
    # THEN dev's stage rolls out before its endpoints stack, after its platform stack (which creates the checks runner
    # and role), through the runner inside dev's VPC, bounded by the wait, the endpoint's drain and the runner's margin
    assert order["hpdpd-dev-platform.Deploy"] < order["hpdpd-dev-endpoints.Rollout"] < order[
        "hpdpd-dev-endpoints.Prepare"]
    rollout = pipeline.action("dev", "hpdpd-dev-endpoints.Rollout")
    drain = -(-endpoint.drain_seconds // 60)
    assert pipeline.commands(rollout) == [
        *_checks_profiles("dev"),
        f"{TRIGGER} --timeout {(minutes + drain + 60) * 60} -- rollout --env dev promote --endpoint {endpoint.name} "
        f"--timeout {wait} --probe {target}"]
    assert pipeline.project(rollout)["TimeoutInMinutes"] == minutes + drain + 60 + 30
    # AND after Verify it smokes the endpoint through the API server's service proxy, then verifies with the probe,
    # measuring from the workspace whose query URL the platform stack outputs (read here, passed to the runner)
    assert order["Verify"] < order["Smoke"] < order["KvFabric"]
    remote = (minutes + 60) * 60
    assert pipeline.commands(pipeline.action("dev", "Smoke")) == [
        *_checks_profiles("dev"),
        f"{TRIGGER} --timeout {remote} -- smoke --env dev --endpoint {endpoint.name} --service-proxy --wait-ready "
        f"{wait} {target}"]
    fabric = pipeline.commands(pipeline.action("dev", "KvFabric"))
    assert fabric[:3] == _checks_profiles("dev")
    assert fabric[3] == (
        'HPDPD_PROMETHEUS_URL="$(aws cloudformation describe-stacks --stack-name hpdpd-dev-platform --query '
        '"Stacks[0].Outputs[?OutputKey==\'PrometheusQueryUrl\'].OutputValue" --output text --profile hpdpd-checks '
        '--region us-west-2)"')
    assert fabric[4].startswith('test "${HPDPD_PROMETHEUS_URL:-None}" != None || {')
    assert fabric[5:] == [f'{TRIGGER} --timeout {remote} -- verify --env dev --endpoint {endpoint.name} --wait-ready '
                          f'{wait} --probe --prometheus "$HPDPD_PROMETHEUS_URL" {target}']
    assert drain > 0  # the default drain: the endpoint's longest request
    for step in ("hpdpd-dev-endpoints.Rollout", "Smoke", "KvFabric"):
        assert pipeline.variables(pipeline.action("dev", step)) == {
            "HPDPD_CHECKS_ROLE_ARN": "arn:aws:iam::111111111111:role/hpdpd-dev-checks"}
    # AND the environments without endpoints have no cluster step
    for env in ("staging", "prod"):
        names = {a["Name"] for a in pipeline.stage(env)}
        assert not {n for n in names if n.endswith(("Rollout", "Smoke", "KvFabric"))}


def test_the_first_run_finds_the_checks_role_and_runner_it_uses(pipeline: Pipeline, synthesized) -> None:
    # GIVEN dev's network template, which the stage deploys before Preflight, and its platform template, which it
    # deploys before the Rollout step
    network, platform = synthesized.template("dev", "network"), synthesized.template("dev", "platform")
    ((role_id, role),) = [(k, v) for k, v in network["Resources"].items() if v["Type"] == "AWS::IAM::Role"
                          and v["Properties"].get("RoleName") == "hpdpd-dev-checks"]
    order = {a["Name"]: a["RunOrder"] for a in pipeline.stage("dev")}
    assert order["hpdpd-dev-network.Deploy"] < order["hpdpd-dev-platform.Preflight"]
    # THEN the network creates the role every step assumes, trusting exactly dev's checks CodeBuild role of the pipeline
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    trusted = statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]["Fn::Join"][1]
    assert trusted[-1] == f":iam::{pipeline.config.account}:role/hpdpd-pipeline-checks-dev"
    assert pipeline.config.checks_role_name("dev") == "hpdpd-pipeline-checks-dev"
    # AND the platform grants that role, by name (no export between the stacks), the runner and its own outputs
    (grants,) = [v["Properties"] for k, v in platform["Resources"].items() if k.startswith("ChecksRoleGrantsPolicy")]
    assert grants["Roles"] == ["hpdpd-dev-checks"]
    assert {s["Sid"] for s in grants["PolicyDocument"]["Statement"]} == {
        "ReadPlatformStack", "StartRunner", "UploadSource", "ReadRunnerLog"}
    assert not [o for o in network.get("Outputs", {}).values() if "Export" in o]
    # AND the runner project the trigger starts, whose role (not the checks role) has the operations access entry
    projects = [v["Properties"]["Name"] for v in platform["Resources"].values() if v["Type"] == "AWS::CodeBuild::Project"]
    assert projects == ["hpdpd-dev-checks"]
    assert {"PrometheusQueryUrl", "ChecksRoleArn", "ChecksRunnerProject"} <= set(platform["Outputs"])
    # AND staging and prod (no endpoints) have no runner, and a checks role exactly where the configuration carries
    # its trust
    for env in ("staging", "prod"):
        resources = [*synthesized.template(env, "network")["Resources"].values(),
                     *synthesized.template(env, "platform")["Resources"].values()]
        trust = pipeline.config.trusted_environment(load_environment(env)).checks_role_trust
        roles = [v for v in resources if v.get("Properties", {}).get("RoleName") == f"hpdpd-{env}-checks"]
        assert len(roles) == (trust is not None)
        assert not [v for v in resources if v["Type"] == "AWS::CodeBuild::Project"]


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_pipeline_deploys_the_stacks_cdk_deploy_deploys(pipeline: Pipeline, env: str) -> None:
    # GIVEN the stacks that `cdk deploy "<env>/*"` selects: the <env>/* artifacts of the top-level assembly-<env>
    manifest = json.loads((pipeline.outdir / f"assembly-{env}" / "manifest.json").read_text())
    stacks = [a for a in manifest["artifacts"].values()
              if a["type"] == "aws:cloudformation:stack" and a["displayName"].startswith(f"{env}/")]
    (synth_output,) = [o["Name"] for o in pipeline.action("Build", "Synth")["OutputArtifacts"]]
    expected = {(s["properties"]["stackName"], f"{synth_output}::assembly-{env}/{s['properties']['templateFile']}")
                for s in stacks}
    # WHEN the pipeline's CloudFormation actions for the environment are read
    prepares = [a for a in pipeline.stage(env) if a["Name"].endswith(".Prepare")]
    # THEN they create change sets for exactly those stack names from exactly those template files: the pipeline's
    # stage is the app's own stage object, so there is no second copy of the stacks and nothing to normalize
    assert {(a["Configuration"]["StackName"], a["Configuration"]["TemplatePath"]) for a in prepares} == expected
    assert len(prepares) == len(stacks) >= 2
    assert not list(pipeline.outdir.glob("assembly-pipeline*"))
    # AND they deploy into the environment's account and Region with its bootstrap roles
    config = load_environment(env)
    for action in (a for a in pipeline.stage(env) if a["Name"].rsplit(".", 1)[-1] in CFN_ACTIONS):
        assert f":iam::{config.account}:role/cdk-hnb659fds-deploy-role-{config.account}-{config.region}" in \
            json.dumps(action["RoleArn"])
        assert action.get("Region", "us-west-2") == config.region
    exec_roles = {a["Configuration"]["RoleArn"]["Fn::Sub"] for a in prepares}
    assert exec_roles == {f"arn:${{AWS::Partition}}:iam::{config.account}:role/"
                          f"cdk-hnb659fds-cfn-exec-role-{config.account}-{config.region}"}
    # AND in dependency order: the network stack is deployed before the platform stack is prepared
    order = {a["Name"]: a["RunOrder"] for a in pipeline.stage(env)}
    assert order[f"hpdpd-{env}-network.Deploy"] < order[f"hpdpd-{env}-platform.Prepare"]


def _protected_stacks(pipeline: Pipeline, env: str) -> list[str]:
    """The stacks of assembly-<env> that `cdk deploy` creates with termination protection."""
    manifest = json.loads((pipeline.outdir / f"assembly-{env}" / "manifest.json").read_text())
    return [a["properties"]["stackName"] for a in manifest["artifacts"].values()
            if a["type"] == "aws:cloudformation:stack" and a["properties"].get("terminationProtection")]


def test_prod_turns_termination_protection_on_after_its_deployments(pipeline: Pipeline) -> None:
    # GIVEN prod, whose stacks `cdk deploy` creates with termination protection (termination_protection: true)
    protected = _protected_stacks(pipeline, "prod")
    assert protected == ["hpdpd-prod-network", "hpdpd-prod-platform", "hpdpd-prod-endpoints"]
    # WHEN prod's stage is read from the pipeline template
    step = pipeline.action("prod", "TerminationProtection")
    deployments = [a["RunOrder"] for a in pipeline.stage("prod") if a["Name"].rsplit(".", 1)[-1] in CFN_ACTIONS]
    # THEN the protection step runs after every deployment of the stage, next to Verify (not behind it)
    assert step["RunOrder"] > max(deployments)
    assert step["RunOrder"] == pipeline.action("prod", "Verify")["RunOrder"]
    # AND for each protected stack it enables protection in prod's Region through the deploy-role profile, then
    # fails unless describe-stacks reports it on
    target = "--profile hpdpd-protect --region us-east-1"
    expected = ['aws configure set profile.hpdpd-protect.role_arn "$HPDPD_PROTECT_ROLE_ARN"',
                "aws configure set profile.hpdpd-protect.credential_source EcsContainer",
                "aws configure set profile.hpdpd-protect.role_session_name hpdpd-pipeline-protect"]
    for name in protected:
        expected += [
            f"aws cloudformation update-termination-protection --enable-termination-protection --stack-name {name} "
            f"{target}",
            f"test \"$(aws cloudformation describe-stacks --query 'Stacks[0].EnableTerminationProtection' --output text "
            f"--stack-name {name} {target})\" = True || {{ echo \"termination protection is off on {name}\" >&2; false; }}",
        ]
    assert pipeline.commands(step) == expected
    config = load_environment("prod")
    deploy_role = f"arn:aws:iam::{config.account}:role/cdk-hnb659fds-deploy-role-{config.account}-{config.region}"
    assert pipeline.variables(step) == {"HPDPD_PROTECT_ROLE_ARN": deploy_role}


@pytest.mark.parametrize("env", ["dev", "staging"])
def test_a_stage_without_protected_stacks_has_no_protection_step(pipeline: Pipeline, env: str) -> None:
    # GIVEN an environment with termination_protection: false
    assert _protected_stacks(pipeline, env) == []
    # THEN its stage has no protection step, and no role exists for one
    assert all(a["Name"] != "TerminationProtection" for a in pipeline.stage(env))
    assert not [k for k in pipeline.resources if k.startswith(f"Protection{env}")]


def test_the_protection_role_may_assume_only_the_deploy_role_of_prods_account_and_region(pipeline: Pipeline) -> None:
    # GIVEN the CodeBuild role of prod's protection step
    step = pipeline.action("prod", "TerminationProtection")
    role_id = pipeline.project(step)["ServiceRole"]["Fn::GetAtt"][0]
    role = pipeline.resources[role_id]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert (trust["Action"], trust["Principal"]) == ("sts:AssumeRole", {"Service": "codebuild.amazonaws.com"})
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": "444444444444"}  # its projects only
    assert "Policies" not in role and "ManagedPolicyArns" not in role
    # WHEN every statement of every policy attached to it is collected
    statements = [s for r in pipeline.resources.values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role_id} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    # THEN it may assume exactly one role, prod's CDK bootstrap deploy role; it holds no CloudFormation permission
    # itself, and the rest is the CodeBuild plumbing every pipeline step gets (logs, reports, artifacts, key)
    config = load_environment("prod")
    assert [s["Resource"] for s in statements if "sts:AssumeRole" in json.dumps(s["Action"])] == [
        f"arn:{config.partition}:iam::{config.account}:role/cdk-hnb659fds-deploy-role-{config.account}-{config.region}"]
    assert {a.split(":")[0] for a in actions} == {"sts", "logs", "codebuild", "s3", "kms"}
    assert {a for a in actions if a.startswith("sts:")} == {"sts:AssumeRole"}


@pytest.mark.parametrize(("region", "partition"), [("us-east-1", "aws"), ("cn-north-1", "aws-cn"),
                                                   ("us-gov-west-1", "aws-us-gov")])
def test_the_deploy_role_arn_follows_the_environments_partition(region: str, partition: str) -> None:
    # GIVEN an environment (only account, Region and the partition they imply matter)
    config = load_environment("prod").model_copy(update={"region": region})
    # THEN the deploy role's ARN is in that partition, account and Region, with the bootstrap qualifier
    assert deploy_role_arn(config, "custom") == (
        f"arn:{partition}:iam::333333333333:role/cdk-custom-deploy-role-333333333333-{region}")


def test_pipeline_templates_pass_cfn_lint(pipeline: Pipeline) -> None:
    # The pipeline stack and the cross-Region support stack CodePipeline adds for prod's Region
    manifest = json.loads((pipeline.outdir / "manifest.json").read_text())
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    assert sorted(a["properties"]["stackName"] for a in stacks) == ["hpdpd-pipeline", "hpdpd-pipeline-support-us-east-1"]
    problems = []
    for artifact in stacks:
        region = artifact["environment"].rsplit("/", 1)[-1]
        text = (pipeline.outdir / artifact["properties"]["templateFile"]).read_text()
        for match in lint(text, config=ManualArgs(regions=[region], ignore_checks=["W3005"])):
            problems.append(f"{artifact['displayName']}: {match.rule.id} {match.message} ({'/'.join(map(str, match.path))})")
    assert problems == []


def test_cdk_validation_finds_nothing_in_the_pipeline_but_missing_checks_roles(pipeline: Pipeline) -> None:
    # The flag is on, so an error-level finding (CloudFormation validation, cdk-nag, the toolkit's own rules) fails
    # synthesis; the session synth succeeded. Any report written holds no finding on the pipeline's constructs but one
    # warning per environment whose stages create no checks role (its configuration carries no trust for one) and
    # whose pipeline entry names none: its steps have no role to assume, and there is no fallback.
    assert cdk_json_context()["@aws-cdk/core:validateAgainstDefaultRules"] is True
    report_path = pipeline.outdir / "validation-report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"pluginReports": []}
    findings = [(p["pluginName"], v["ruleName"], v.get("severity"), c.get("constructPath"))
                for p in report["pluginReports"] for v in p["violations"] for c in v["violatingConstructs"]
                if str(c.get("constructPath", "")).startswith(("pipeline/", "cross-region-stack"))]
    roleless = [p.name for p in pipeline.config.environments if p.checks_role_arn is None
                and pipeline.config.trusted_environment(load_environment(p.name)).checks_role_trust is None]
    assert sorted(findings) == sorted(("Construct Annotations", "Annotation::hpdpd:no-checks-role", "warning",
                                       f"pipeline/Checks-{name}") for name in roleless)


def test_the_artifact_buckets_are_audited_by_the_pipelines_own_trail(pipeline: Pipeline) -> None:
    # GIVEN the pipeline's artifact bucket, the replication bucket of prod's Region, and the trail
    (trail,) = [r["Properties"] for r in pipeline.resources.values() if r["Type"] == "AWS::CloudTrail::Trail"]
    artifact_id = next(k for k, r in pipeline.resources.items() if k.startswith("PipelineArtifactsBucket")
                       and r["Type"] == "AWS::S3::Bucket")
    support = json.loads(next(pipeline.outdir.glob("cross-region-stack-*.template.json")).read_text())
    (replication,) = [r["Properties"]["BucketName"] for r in support["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    # THEN the trail records every object read and write of both, in every Region, and no management event
    assert trail["TrailName"] == "hpdpd-pipeline-artifacts" and trail["IsMultiRegionTrail"] is True
    (selector,) = trail["EventSelectors"]
    assert (selector["IncludeManagementEvents"], selector["ReadWriteType"]) == (False, "All")
    (data,) = selector["DataResources"]
    deployment = Deployment(account="444444444444", region="us-west-2", refs={artifact_id: "artifacts"})
    assert data["Type"] == "AWS::S3::Object"
    assert resolve(data["Values"], deployment) == ["arn:aws:s3:::artifacts/", f"arn:aws:s3:::{replication}/"]
    # AND its log files are validated and encrypted, and only this trail may write them or use the key
    assert trail["EnableLogFileValidation"] is True and "KMSKeyId" in trail
    trail_arn = "arn:aws:cloudtrail:us-west-2:444444444444:trail/hpdpd-pipeline-artifacts"
    for resource in pipeline.resources.values():
        document = resource["Properties"].get("KeyPolicy") or resource["Properties"].get("PolicyDocument") or {}
        for statement in document.get("Statement", []):
            if statement.get("Principal") == {"Service": "cloudtrail.amazonaws.com"}:
                assert resolve(statement["Condition"]["StringEquals"]["aws:SourceArn"], deployment) == trail_arn
    # AND the artifact buckets' skip of server access logging says so
    skips = pipeline.resources[artifact_id]["Metadata"]["checkov"]["skip"]
    (logging,) = [s["comment"] for s in skips if s["id"] == "CKV_AWS_18"]
    assert "S3 data events" in logging and "CloudTrail trail" in logging


def test_smoke_goes_through_sagemaker_where_an_endpoint_has_a_name(base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN dev with two endpoints, one reachable through SageMaker and one not, and an explicit checks role
    data = copy.deepcopy(base_configs["dev"])
    second = copy.deepcopy(data["endpoints"][0])
    second.update(name="second", namespace="second")
    data["endpoints"][0]["sagemaker_endpoint_name"] = "llama-3-3-70b"
    data["endpoints"].append(second)
    data["hyperpod"]["instance_groups"] = [
        {**g, "count": 2} if g["name"] in ("prefill", "decode") else g for g in data["hyperpod"]["instance_groups"]]
    env = parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)
    pipeline_data = yaml.safe_load((FIXTURE_CONFIG_DIR / "pipeline.yaml").read_text())
    pipeline_data["environments"][0].update(checks_role_arn="arn:aws:iam::111111111111:role/smoke")
    config = PipelineConfig.model_validate(pipeline_data)
    stack = cdk.Stack(cdk.App(), "Checks", env=cdk.Environment(account="444444444444", region="us-west-2"))
    source = pipelines.CodePipelineSource.connection("acme/hyperpod-dpd", "main",
                                                     connection_arn=config.source.connection_arn)
    # WHEN the checks of dev are built
    checks = EnvironmentChecks(stack, "Checks", pipeline=config, promotion=config.promotion("dev"), env=env,
                               source=source)
    smoke = checks.smoke()
    # THEN the SageMaker endpoint is waited for here as the checks role, then both are smoked in the runner,
    # started as the checks role: the first through SageMaker, the second through the API server's service proxy,
    # each after its IEC is ready; the step's budget covers each wait and each remote run
    assert smoke is not None
    assert list(smoke.commands)[-3:] == [
        f"{HPDPD} wait --env dev --for endpoint --endpoint llama-3-3-70b --timeout 5400 --output json "
        "--profile hpdpd-checks --region us-west-2",
        f"{TRIGGER} --timeout 9000 -- smoke --env dev --endpoint llama-3-3-70b --wait-ready 5400 --output json "
        "--region us-west-2",
        f"{TRIGGER} --timeout 9000 -- smoke --env dev --endpoint second --service-proxy --wait-ready 5400 "
        "--output json --region us-west-2",
    ]
    assert smoke.timeout is not None and smoke.timeout.to_minutes() == 30 + 90 + 2 * (90 + 60)
    assert 'aws configure set profile.hpdpd-checks.role_arn "$HPDPD_CHECKS_ROLE_ARN"' in smoke.commands
    assert dict(smoke.env) == {"HPDPD_CHECKS_ROLE_ARN": "arn:aws:iam::111111111111:role/smoke"}
    # AND the role of dev's checks may assume exactly that role of dev's account
    assertions.Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {
        "PolicyDocument": {"Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow",
                                          "Resource": "arn:aws:iam::111111111111:role/smoke"}]}})
    # AND smoke: false opts out, and an environment without endpoints has nothing to smoke
    pipeline_data["environments"][0]["smoke"] = False
    off = PipelineConfig.model_validate(pipeline_data)
    assert EnvironmentChecks(stack, "Off", pipeline=off, promotion=off.promotion("dev"), env=env,
                             source=source).smoke() is None
    plain = EnvironmentChecks(stack, "Plain", pipeline=config, promotion=config.promotion("staging"),
                              env=load_environment("staging"), source=source)
    assert plain.smoke() is None


def test_a_selection_without_all_pipeline_environments_builds_no_pipeline() -> None:
    # WHEN only dev is selected (HPDPD_ENVIRONMENTS=dev)
    app, stages = build_app(environments=["dev"], context=cdk_json_context())
    # THEN dev is built and the pipeline is not: a pipeline without staging and prod would drop their stages
    assert list(stages) == ["dev"]
    assert app.node.try_find_child("pipeline") is None
    # AND dev still has the checks role the pipeline runs as: `cdk deploy "dev/*"` and the pipeline deploy one platform
    assert stages["dev"].config.checks_role_trust == "arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev"
    assert stages["dev"].checks_role is not None
    assert stages["dev"].checks_role.role.node.default_child.role_name == "hpdpd-dev-checks"  # type: ignore[union-attr]


def test_bad_pipeline_config_stops_the_app_with_one_line(tmp_path: Path) -> None:
    # GIVEN the committed config with staging listed twice in the pipeline's order
    config_dir = tmp_path / "config"
    shutil.copytree(FIXTURE_CONFIG_DIR, config_dir)
    data = yaml.safe_load((config_dir / "pipeline.yaml").read_text())
    data["environments"].append({"name": "staging"})
    (config_dir / "pipeline.yaml").write_text(yaml.safe_dump(data))
    # WHEN app.py runs as the CDK CLI runs it
    outdir = tmp_path / "cdk.out"
    result = subprocess.run([sys.executable, str(ROOT / "app.py")], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "HPDPD_CONFIG_DIR": str(config_dir), "CDK_OUTDIR": str(outdir)},
                            timeout=120, check=False)
    # THEN it exits 2 with one line naming file, field, value and rule, and writes nothing
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {config_dir / 'pipeline.yaml'}: environments[3].name: 'staging': listed twice (first at "
        "environments[1]); each environment is promoted once, in one place of the order"]
    assert not outdir.exists() or not any(outdir.iterdir())


def test_verify_and_rollout_steps_need_no_hand_made_role(base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN dev with an endpoint and the observability add-on, promoted without a checks_role_arn
    env = parse_environment(copy.deepcopy(base_configs["dev"]), name="dev", source="dev.yaml", base_dir=ROOT)
    config = PipelineConfig.model_validate(yaml.safe_load((FIXTURE_CONFIG_DIR / "pipeline.yaml").read_text()))
    stack = cdk.Stack(cdk.App(), "Checks", env=cdk.Environment(account="444444444444", region="us-west-2"))
    source = pipelines.CodePipelineSource.connection("acme/hyperpod-dpd", "main",
                                                     connection_arn=config.source.connection_arn)
    checks = EnvironmentChecks(stack, "Checks", pipeline=config, promotion=config.promotion("dev"), env=env,
                               source=source)
    # WHEN the cluster steps are built
    fabric, rollout = checks.kv_fabric(), checks.rollout()
    # THEN both exist and start dev's checks runner as the toolkit's checks role of dev
    assert fabric is not None and rollout is not None
    drain = -(-env.endpoints[0].drain_seconds // 60)
    assert list(fabric.commands)[-1] == (
        f'{TRIGGER} --timeout {(90 + 60) * 60} -- verify --env dev --endpoint llama-3-3-70b --wait-ready 5400 --probe '
        f'--prometheus "$HPDPD_PROMETHEUS_URL" --output json --region us-west-2')
    assert list(rollout.commands)[-1] == (
        f"{TRIGGER} --timeout {(90 + drain + 60) * 60} -- rollout --env dev promote --endpoint llama-3-3-70b "
        "--timeout 5400 --probe --output json --region us-west-2")
    for step in (fabric, rollout):
        assert dict(step.env)["HPDPD_CHECKS_ROLE_ARN"] == "arn:aws:iam::111111111111:role/hpdpd-dev-checks"
    # AND without the add-on, verify measures from the logs: no workspace URL to look up
    bare = env.model_copy(update={"operator": env.operator.model_copy(update={
        "observability": env.operator.observability.model_copy(update={"enabled": False})})})
    plain = EnvironmentChecks(stack, "Bare", pipeline=config, promotion=config.promotion("dev"), env=bare,
                              source=source).kv_fabric()
    assert plain is not None and not [c for c in plain.commands if "PROMETHEUS" in c]
    # AND an environment without endpoints gets neither
    staging = load_environment("staging").model_copy(update={"endpoints": ()})
    none = EnvironmentChecks(stack, "None", pipeline=config, promotion=config.promotion("staging"), env=staging,
                             source=source)
    assert none.kv_fabric() is None and none.rollout() is None


def test_the_pipeline_docs_describe_the_checks_role() -> None:
    text = (ROOT / "docs" / "pipeline.md").read_text()
    section = text.split("## The checks role", 1)[1].split("\n## ", 1)[0]
    for needed in ("hpdpd-<env>-checks", "aws:PrincipalArn", "codebuild:StartBuild", "codebuild:BatchGetBuilds",
                   "codebuild:StopBuild", "s3:PutObject", "logs:GetLogEvents", "checks_role_arn", "network stack",
                   "fallback to the lookup role", "No managed policy", *(a for a in READ_CALLS.values() if a)):
        assert needed.split(":")[-1] in section, needed
    runner = text.split("## The checks runner", 1)[1].split("\n## ", 1)[0]
    for needed in ("hpdpd-<env>-checks-runner", "eks:DescribeCluster", "aps:QueryMetrics",
                   "sagemaker:InvokeEndpointWithResponseStream", "443", "NAT", "HPDPD_EXIT_CODE"):
        assert needed in runner, needed
    assert "## Network reach of the cluster checks" not in text


def test_the_rollout_runs_between_the_platform_and_the_endpoints_deploys(tmp_path: Path, base_configs: dict[str, Any],
                                                                        cdk_context: dict[str, Any]) -> None:
    # GIVEN a pipeline of dev alone, whose entry names a checks role of the user's own
    role = "arn:aws:iam::111111111111:role/checks"
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(copy.deepcopy(base_configs["dev"])))
    pipeline_data = yaml.safe_load((FIXTURE_CONFIG_DIR / "pipeline.yaml").read_text())
    pipeline_data["environments"] = [{"name": "dev", "checks_role_arn": role}]
    (config_dir / "pipeline.yaml").write_text(yaml.safe_dump(pipeline_data))
    # WHEN the app with its pipeline synthesizes
    app, stages = build_app(config_dir=config_dir, outdir=str(tmp_path / "out"), context=cdk_context)
    assembly = app.synth()
    template = assembly.get_stack_by_name(pipeline_data["name"]).template
    (stage,) = [s for s in template["Resources"][next(k for k, v in template["Resources"].items()
                                                     if v["Type"] == "AWS::CodePipeline::Pipeline")]
                ["Properties"]["Stages"] if s["Name"] == "dev"]
    order = {a["Name"]: a["RunOrder"] for a in stage["Actions"]}
    # THEN the rollout runs after the platform stack deployed (the runner it starts) and before the endpoints stack
    # deploys (whose pruning apply would replace the serving generation at once)
    assert order["hpdpd-dev-platform.Deploy"] < order["hpdpd-dev-endpoints.Rollout"] < order["hpdpd-dev-endpoints.Prepare"]
    # AND dev's platform has the runner but no checks role of the toolkit's: the user's role starts the runner
    platform = stages["dev"].platform
    assert platform.checks_runner is not None and platform.checks_role is None
    assert stages["dev"].config.operations_roles == ("arn:aws:iam::111111111111:role/hpdpd-dev-checks-runner",)


def test_a_private_cluster_is_checked_from_inside_its_vpc(tmp_path: Path, base_configs: dict[str, Any]) -> None:
    # GIVEN the fixture configuration with dev's API endpoint private (dev has an endpoint, so cluster checks run)
    config_dir = tmp_path / "config"
    shutil.copytree(FIXTURE_CONFIG_DIR, config_dir)
    dev = copy.deepcopy(base_configs["dev"])
    dev["eks"]["endpoint_access"] = "private"
    dev["eks"].pop("public_access_cidrs")
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(dev))
    # WHEN the application reads the environments as the pipeline deploys them
    configs = [load_environment(n, config_dir) for n in ("dev", "staging", "prod")]
    trusted, pipeline = pipeline_environments(config_dir, configs)
    # THEN nothing is refused and nothing warns: dev gets the checks runner inside its VPC, which reaches the private
    # endpoint, and its cluster steps only start it
    assert pipeline is not None
    (private,) = [c for c in trusted if c.name == "dev"]
    assert private.eks.endpoint_access == "private" and private.checks_runner
    assert not [w for w in private.warnings() if "pipeline" in w.message or "VPC" in w.message]


def test_a_gitops_environment_is_checked_as_the_controller_applied_it(tmp_path: Path, base_configs: dict[str, Any],
                                                                     cdk_context: dict[str, Any]) -> None:
    # GIVEN a pipeline of dev alone, whose endpoints a GitOps controller delivers
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    dev = copy.deepcopy(base_configs["dev"])
    dev["delivery"] = {"endpoints": "gitops"}
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(dev))
    pipeline_data = yaml.safe_load((FIXTURE_CONFIG_DIR / "pipeline.yaml").read_text())
    pipeline_data["environments"] = [{"name": "dev"}]
    (config_dir / "pipeline.yaml").write_text(yaml.safe_dump(pipeline_data))
    # WHEN the app with its pipeline synthesizes
    app, _ = build_app(config_dir=config_dir, outdir=str(tmp_path / "out"), context=cdk_context)
    template = app.synth().get_stack_by_name(pipeline_data["name"]).template
    resources = template["Resources"]
    (stage,) = [s for s in next(v for v in resources.values() if v["Type"] == "AWS::CodePipeline::Pipeline")
                ["Properties"]["Stages"] if s["Name"] == "dev"]
    order = {a["Name"]: a["RunOrder"] for a in stage["Actions"]}
    # THEN the pipeline never promotes what the controller owns: no Rollout before the endpoints stack ...
    assert not [name for name in order if name.endswith(".Rollout") or name == "Rollout"]
    # ... and after the deploy it waits for the configured generation and checks it serves, before the smoke prompts
    assert order["Verify"] < order["Served"] < order["Smoke"]
    from tests.stacks.test_pipeline_pins import _buildspecs, _commands

    specs = [" ".join(_commands(spec)) for _, spec in _buildspecs(tmp_path / "out")]
    (served,) = [s for s in specs if "rollout --env dev status" in s]
    endpoint = dev["endpoints"][0]["name"]
    assert f"wait --env dev --for endpoint --endpoint {endpoint}" in served
    assert f"rollout --env dev status --endpoint {endpoint}" in served
    assert not [s for s in specs if "rollout --env dev promote" in s]


def test_the_approval_in_a_production_wave_names_only_the_earlier_waves(tmp_path: Path, base_configs: dict[str, Any],
                                                                       cdk_context: dict[str, Any]) -> None:
    # GIVEN staging, then a wave of two production environments: prod and prod-b (a copy of prod with cluster and
    # bucket names of its own), each approved by default
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    for name in ("staging", "prod"):
        (config_dir / f"{name}.yaml").write_text(yaml.safe_dump(copy.deepcopy(base_configs[name])))
    prod_b = copy.deepcopy(base_configs["prod"])
    prod_b["eks"]["cluster_name"] = prod_b["hyperpod"]["cluster_name"] = "hpdpd-prod-b"
    prod_b.setdefault("operator", {})["tls_bucket_name"] = "hyperpod-tls-prod-b"
    (config_dir / "prod-b.yaml").write_text(yaml.safe_dump(prod_b))
    pipeline_data = yaml.safe_load((FIXTURE_CONFIG_DIR / "pipeline.yaml").read_text())
    pipeline_data["environments"] = [{"name": "staging"}, {"name": "prod", "wave": "production"},
                                     {"name": "prod-b", "wave": "production"}]
    (config_dir / "pipeline.yaml").write_text(yaml.safe_dump(pipeline_data))
    # WHEN the app with its pipeline synthesizes
    app, _ = build_app(config_dir=config_dir, outdir=str(tmp_path / "out"), context=cdk_context)
    template = app.synth().get_stack_by_name(pipeline_data["name"]).template
    stages = {s["Name"]: s["Actions"] for s in next(v for v in template["Resources"].values()
                                                    if v["Type"] == "AWS::CodePipeline::Pipeline")["Properties"]["Stages"]}
    assert list(stages)[-2:] == ["staging", "production"]
    approvals = {a["Name"]: a["Configuration"]["CustomData"] for a in stages["production"]
                 if a["ActionTypeId"]["Category"] == "Approval"}
    # THEN each production environment of the wave has its approval, and each names staging, the earlier wave, as
    # deployed and checked, never the other environment of its own wave, which deploys at the same time
    assert sorted(approvals) == ["prod-b.Approve", "prod.Approve"]
    assert approvals == {f"{env}.Approve": f"Promote to {env} (account 333333333333, us-east-1): staging deployed and "
                         "checked by this execution (same commit, same templates)." for env in ("prod", "prod-b")}
