"""ChecksRole: the role the pipeline's check steps assume, trusted by one role only, with exactly the read-only calls of
preflight, wait and status on this environment's resources and the calls that start and follow the checks runner, no
managed policy and no access inside the cluster; the runner's role holds the operations access."""

from __future__ import annotations

import copy
import json
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from hyperpod_dpd.config import parse_environment
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails, availability_zone_context
from hyperpod_dpd.infra.checks_role import GLOBAL_CALLS, READ_CALLS, ChecksRole, CheckTargets
from hyperpod_dpd.infra.operations_access import OPERATIONS_GROUP
from hyperpod_dpd.infra.platform import build_network
from tests.iam_eval import Deployment, Request, conditions_hold, resolve, role_policies
from tests.paths import ROOT

ADOPTED_CONFIG = ROOT / "tests" / "fixtures" / "adopted" / "config" / "adopted.yaml"
PIPELINE_ACCOUNT = "555555555555"
TRUSTED = f"arn:aws:iam::{PIPELINE_ACCOUNT}:role/hpdpd-pipeline-checks-adopted"
SAGEMAKER_NAME = "Llama-70B"  # upper case on purpose: SageMaker authorizes the lower-case ARN


def _config() -> Any:
    """The adopted environment (its own account 444444444444), with a SageMaker endpoint name on its endpoint and no
    eks.operations_principals: the checks runner's role alone gets the operations access."""
    data = yaml.safe_load(ADOPTED_CONFIG.read_text())
    data["endpoints"][0]["sagemaker_endpoint_name"] = SAGEMAKER_NAME
    assert "operations_principals" not in data["eks"]
    return parse_environment(data, name="adopted", source="adopted.yaml", base_dir=ADOPTED_CONFIG.parent.parent)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """GIVEN the environment as one construct of a consumer's stack, with a checks role trusted by a pipeline account's
    role, and the guardrails applied (a finding fails the synthesis), synthesized once."""
    config = _config()
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("checks")), context=availability_zone_context(config))
    stack = cdk.Stack(app, "Serving", env=cdk.Environment(account=config.account, region=config.region))
    dpd = HyperPodDpdPlatform(stack, "Dpd", config=config, checks_trusted_role_arn=TRUSTED)
    apply_guardrails(app)
    template = app.synth().get_stack_by_name("Serving").template
    assert dpd.checks_role is not None
    role_id = stack.get_logical_id(dpd.checks_role.role.node.default_child)  # type: ignore[arg-type]
    return {"stack": stack, "dpd": dpd, "template": template, "role_id": role_id, "config": dpd.config}


def _deployment(config: Any) -> Deployment:
    return Deployment(account=config.account, region=config.region, partition="aws")


def test_the_role_has_its_explicit_name_and_trusts_only_the_pipelines_checks_role(platform) -> None:
    role = platform["template"]["Resources"][platform["role_id"]]["Properties"]
    assert role["RoleName"] == "hpdpd-adopted-checks"
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    # THEN the pipeline account is the principal, partition-aware, with the one role as a condition
    resolved = resolve(statement, _deployment(platform["config"]))
    assert resolved == {"Action": "sts:AssumeRole", "Effect": "Allow",
                        "Principal": {"AWS": f"arn:aws:iam::{PIPELINE_ACCOUNT}:root"},
                        "Condition": {"ArnEquals": {"aws:PrincipalArn": TRUSTED}}}
    assert "AWS::Partition" in json.dumps(statement["Principal"]) and "AWS::Partition" in json.dumps(
        statement["Condition"])
    # AND the condition admits that role's sessions (aws:PrincipalArn holds the role's ARN) and no other role of the
    # pipeline account
    admits = [conditions_hold(resolved["Condition"], {"aws:PrincipalArn": arn}) for arn in (
        TRUSTED, f"arn:aws:iam::{PIPELINE_ACCOUNT}:role/hpdpd-pipeline-checks-prod",
        f"arn:aws:iam::{PIPELINE_ACCOUNT}:role/Admin")]
    assert admits == [True, False, False]


def test_the_role_may_read_the_checks_targets_and_start_only_its_environments_runner(platform) -> None:
    config, stack, dpd = platform["config"], platform["stack"], platform["dpd"]
    runner = dpd.checks_runner
    bucket = stack.get_logical_id(runner.bucket.node.default_child)
    account, region = config.account, config.region
    project = f"arn:aws:codebuild:{region}:{account}:project/hpdpd-adopted-checks"
    group = f"arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/hpdpd-adopted-checks"
    # the log group's Arn attribute is its ARN with ":*" (CloudFormation, AWS::Logs::LogGroup return values)
    deployment = Deployment(account=account, region=region, partition="aws", attributes={
        (stack.get_logical_id(runner.log_group.node.default_child), "Arn"): f"{group}:*"})
    policies = role_policies(platform["template"], platform["role_id"], deployment)
    assert policies.unevaluated == ()  # no managed policy: not ReadOnlyAccess, nor any other

    def allowed(action: str, resource: str) -> bool:
        return policies.evaluate(Request(action, resource)).allowed

    # THEN it may read the runner project, start, follow and stop its builds, upload a run's zip and read the log
    for action in ("codebuild:BatchGetProjects", "codebuild:StartBuild", "codebuild:BatchGetBuilds",
                   "codebuild:StopBuild"):
        assert allowed(action, project), action
    assert allowed("s3:PutObject", f"<{bucket}.Arn>/sources/0a1b.zip")
    assert allowed("logs:GetLogEvents", f"{group}:log-stream:0a1b")
    # AND read what preflight, wait and status read: this cluster, its add-ons, HyperPod, the model bucket, the
    # endpoint by its lower-case name
    model_bucket = config.endpoints[0].model.s3.bucket
    for action, resource in [
        ("eks:DescribeCluster", f"arn:aws:eks:{region}:{account}:cluster/platform-shared"),
        ("eks:DescribeAddon", f"arn:aws:eks:{region}:{account}:addon/platform-shared/vpc-cni/0a1b"),
        ("sagemaker:ListClusterNodes", f"arn:aws:sagemaker:{region}:{account}:cluster/0a1b2c"),
        ("s3:ListBucket", f"arn:aws:s3:::{model_bucket}"),
        ("sagemaker:DescribeEndpoint", f"arn:aws:sagemaker:{region}:{account}:endpoint/{SAGEMAKER_NAME.lower()}-1a2b3c"),
    ]:
        assert allowed(action, resource), (action, resource)
    # AND nothing else: another project, prefix, bucket, cluster or endpoint, and no metrics, invocation or IAM
    for action, resource in [
        ("codebuild:StartBuild", f"arn:aws:codebuild:{region}:{account}:project/other"),
        ("codebuild:UpdateProject", project), ("codebuild:DeleteProject", project),
        ("s3:PutObject", f"<{bucket}.Arn>/other/0a1b.zip"), ("s3:GetObject", f"<{bucket}.Arn>/sources/0a1b.zip"),
        ("s3:GetObject", f"arn:aws:s3:::{model_bucket}/weights"),
        ("logs:GetLogEvents", f"arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/other:log-stream:0a1b"),
        ("eks:DescribeCluster", f"arn:aws:eks:{region}:{account}:cluster/other"),
        ("sagemaker:DescribeEndpoint", f"arn:aws:sagemaker:{region}:{account}:endpoint/other"),
        ("aps:QueryMetrics", "*"), ("sagemaker:InvokeEndpointWithResponseStream", "*"), ("iam:PassRole", "*"),
        ("ec2:DescribeInstances", "*"), ("iam:ListRoles", "*"),
    ]:
        assert not allowed(action, resource), (action, resource)
    actions = {a for d in policies.documents for s in d["Statement"] for a in
               ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    read = {a for a in READ_CALLS.values() if a is not None} | set(GLOBAL_CALLS.values())
    if dpd.inference_operator.observability_destination is None:  # no Prometheus URL for the pipeline to read
        read.discard("cloudformation:DescribeStacks")
    assert actions == read | {"codebuild:BatchGetProjects", "codebuild:StartBuild", "codebuild:BatchGetBuilds",
                              "codebuild:StopBuild", "s3:PutObject", "logs:GetLogEvents"}


def test_the_runners_role_is_the_operations_role_without_being_listed(platform) -> None:
    template, stack, dpd = platform["template"], platform["stack"], platform["dpd"]
    runner_role = stack.get_logical_id(dpd.checks_runner.role.node.default_child)
    # THEN the one operations entry (eks.operations_principals is empty) takes the runner role's ARN, so
    # CloudFormation creates it after the role, in the operations group and with no EKS access policy; the checks
    # role has no entry
    entries = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "AWS::EKS::AccessEntry"
               and v["Properties"].get("KubernetesGroups") == [OPERATIONS_GROUP]]
    assert entries == [{"ClusterName": "platform-shared", "PrincipalArn": {"Fn::GetAtt": [runner_role, "Arn"]},
                        "Type": "STANDARD", "KubernetesGroups": [OPERATIONS_GROUP]}]
    assert dpd.config.operations_roles == ("arn:aws:iam::444444444444:role/hpdpd-adopted-checks-runner",)
    assert not [v for v in template["Resources"].values() if v["Type"] == "AWS::EKS::AccessEntry"
                and v["Properties"].get("PrincipalArn") == {"Fn::GetAtt": [platform["role_id"], "Arn"]}]
    # AND the RBAC and the endpoint namespace's RoleBinding exist for it
    assert dpd.operations is not None
    binding = dpd.node.find_child("Operations-llama-3-3-70b")
    found = template["Resources"][stack.get_logical_id(binding.node.default_child)]  # type: ignore[arg-type]
    assert json.loads(found["Properties"]["Manifest"])[0]["metadata"]["namespace"] == "llm-serving"


@pytest.mark.parametrize(("trusted", "expected"), [
    ("arn:aws-cn:iam::555555555555:role/checks",
     "checks role trust: 'arn:aws-cn:iam::555555555555:role/checks': must be in partition 'aws' (the partition of "
     "us-west-2): a role cannot be assumed across partitions"),
    ("555555555555", "checks role trust: '555555555555': must be an IAM role ARN such as "
                     "'arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev'"),
], ids=["another partition", "not a role ARN"])
def test_a_bad_trust_is_one_line_before_anything_is_built(trusted: str, expected: str) -> None:
    stack = cdk.Stack(cdk.App(), "Bad", env=cdk.Environment(account="444444444444", region="us-west-2"))
    with pytest.raises(ConfigError) as caught:
        HyperPodDpdPlatform(stack, "Dpd", config=_config(), checks_trusted_role_arn=trusted)
    assert str(caught.value).splitlines() == [f"adopted.yaml: {expected}"]
    assert stack.node.try_find_child("Dpd") is None


@pytest.mark.parametrize(("props", "path"), [
    ({"role_name": "x" * 65}, "ChecksRole.role_name"),
    ({"trusted_role_arn": "arn:aws:iam::555555555555:user/someone"}, "ChecksRole.trusted_role_arn"),
], ids=["a role name of 65 characters", "a user instead of a role"])
def test_the_construct_refuses_bad_props_with_one_line(platform, props: dict[str, Any], path: str) -> None:
    stack = cdk.Stack(cdk.App(), "Bad", env=cdk.Environment(account="444444444444", region="us-west-2"))
    given = {"role_name": "hpdpd-x-checks", "trusted_role_arn": TRUSTED,
             "targets": CheckTargets(eks_cluster_name="platform-shared"), **props}
    with pytest.raises(ConfigError) as caught:
        ChecksRole(stack, "ChecksRole", **given)
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{path}: ")
    assert stack.node.try_find_child("ChecksRole") is None


def test_the_network_has_the_checks_role_exactly_when_the_configuration_carries_its_trust() -> None:
    # GIVEN the environment with and without endpoints, each with a trust
    data = yaml.safe_load(ADOPTED_CONFIG.read_text())
    bare = copy.deepcopy(data)
    bare["endpoints"] = []
    for source in (data, bare):
        config = parse_environment(source, name="adopted", source="adopted.yaml",
                                   base_dir=ADOPTED_CONFIG.parent.parent).with_checks_role(TRUSTED)
        stack = cdk.Stack(cdk.App(), "Network", env=cdk.Environment(account=config.account, region=config.region))
        # WHEN its network is built (the network stack holds the role: it deploys before the pipeline's preflight)
        network = build_network(stack, config=config)
        # THEN the role is there exactly when the configuration carries the trust, and then under its explicit name
        assert (network.checks_role is None) == (config.checks_role_trust is None)
        if network.checks_role is not None:
            assert network.checks_role.role_name == "hpdpd-adopted-checks"
        # AND the runner (and the operations role it brings) only with endpoints
        assert config.checks_runner == bool(config.endpoints)


def test_a_long_environment_name_is_refused_when_the_runners_role_name_would_not_fit() -> None:
    # GIVEN an environment whose name fits the checks role (64 characters) but not the runner's role (7 more)
    data = yaml.safe_load(ADOPTED_CONFIG.read_text())
    name = "e" * 46  # hpdpd-<46>-checks: 59 characters; hpdpd-<46>-checks-runner: 66
    config = parse_environment(data, name=name, source=f"{name}.yaml", base_dir=ADOPTED_CONFIG.parent.parent)
    # WHEN it gets a checks trust
    with pytest.raises(ConfigError) as caught:
        config.with_checks_role(TRUSTED)
    # THEN one line says why and what to do
    assert str(caught.value) == (
        f"{name}.yaml: checks role trust: {TRUSTED!r}: the checks runner's role name 'hpdpd-{name}-checks-runner' is "
        "not an IAM role name (1-64 of letters, digits and +=,.@_-): shorten the environment's name")


def test_a_gitops_environment_may_read_the_deployed_templates_of_its_own_manifest_stacks() -> None:
    from aws_cdk.assertions import Match, Template

    from hyperpod_dpd.config import load_environment

    # GIVEN the gitops fixture environment and its check targets
    config = load_environment("dev", ROOT / "tests" / "fixtures" / "gitops" / "config")
    targets = CheckTargets.of(config)
    assert targets.handover_stacks == ("hpdpd-dev-platform", "hpdpd-dev-endpoints")
    # WHEN its checks role is built
    stack = cdk.Stack(cdk.App(), "Network", env=cdk.Environment(account=config.account, region=config.region))
    ChecksRole(stack, "ChecksRole", role_name="hpdpd-dev-checks", trusted_role_arn=TRUSTED, targets=targets)
    # THEN preflight's handover row may call GetTemplate on exactly those two stacks (and a cdk environment may not)
    Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Sid": "ReadDeployedTemplates", "Action": "cloudformation:GetTemplate",
                           "Resource": [Match.object_like({"Fn::Join": Match.array_with([Match.array_with([
                               Match.string_like_regexp(f":stack/{name}/\\*")])])}) for name in targets.handover_stacks]})])}})
    assert CheckTargets.of(load_environment("dev", ROOT / "tests" / "fixtures" / "config")).handover_stacks == ()
