"""ChecksRunner: the CodeBuild project that runs the pipeline's cluster checks inside the environment's VPC, with the
cluster security group admitting it on 443, a role of exactly the check commands' calls, and a private source bucket."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2

from hyperpod_dpd.config import parse_environment
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails, availability_zone_context
from hyperpod_dpd.infra.checks_runner import ChecksRunner
from hyperpod_dpd.ops.remote_checks import CHECK_COMMANDS
from tests.iam_eval import Deployment, Request, conditions_hold, resolve, role_policies
from tests.paths import ROOT

ADOPTED_CONFIG = ROOT / "tests" / "fixtures" / "adopted" / "config" / "adopted.yaml"
TRUSTED = "arn:aws:iam::555555555555:role/hpdpd-pipeline-checks-adopted"


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """GIVEN the adopted environment (VPC and cluster adopted) with a SageMaker endpoint name and a checks trust, as
    one construct of a consumer's stack with the guardrails applied, synthesized once."""
    data = yaml.safe_load(ADOPTED_CONFIG.read_text())
    data["endpoints"][0]["sagemaker_endpoint_name"] = "Llama-70B"
    config = parse_environment(data, name="adopted", source="adopted.yaml", base_dir=ADOPTED_CONFIG.parent.parent)
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("runner")), context=availability_zone_context(config))
    stack = cdk.Stack(app, "Serving", env=cdk.Environment(account=config.account, region=config.region))
    dpd = HyperPodDpdPlatform(stack, "Dpd", config=config, checks_trusted_role_arn=TRUSTED)
    apply_guardrails(app)
    template = app.synth().get_stack_by_name("Serving").template
    runner = dpd.checks_runner
    assert runner is not None
    ids = {name: stack.get_logical_id(c.node.default_child)  # type: ignore[arg-type]
           for name, c in (("project", runner.project), ("role", runner.role), ("bucket", runner.bucket),
                           ("group", runner.security_group), ("logs", runner.log_group), ("key", runner.key))}
    return {"stack": stack, "dpd": dpd, "config": dpd.config, "template": template, "ids": ids,
            "assert": assertions.Template.from_json(template)}


def _project(adopted: dict[str, Any]) -> dict[str, Any]:
    return adopted["template"]["Resources"][adopted["ids"]["project"]]["Properties"]


def test_the_project_runs_in_the_vpcs_private_subnets_with_its_own_security_group(adopted) -> None:
    config, ids = adopted["config"], adopted["ids"]
    project = _project(adopted)
    # THEN it has its explicit name, runs in the adopted VPC's private (EKS) subnets, in its own security group
    assert project["Name"] == "hpdpd-adopted-checks" == config.checks_project_name
    network = config.network.existing
    assert project["VpcConfig"] == {
        "VpcId": network.vpc_id, "Subnets": sorted(s.subnet_id for s in network.private_subnets),
        "SecurityGroupIds": [{"Fn::GetAtt": [ids["group"], "GroupId"]}]}
    # AND on the pipeline's image, unprivileged, encrypted with its key, logging to its own group, for this env only
    assert project["Environment"] == {
        "ComputeType": "BUILD_GENERAL1_SMALL", "Image": "aws/codebuild/standard:7.0", "Type": "LINUX_CONTAINER",
        "ImagePullCredentialsType": "CODEBUILD", "PrivilegedMode": False,
        "EnvironmentVariables": [{"Name": "HPDPD_CHECKS_ENVIRONMENT", "Type": "PLAINTEXT", "Value": "adopted"}]}
    assert project["EncryptionKey"] == {"Fn::GetAtt": [ids["key"], "Arn"]}
    assert project["LogsConfig"] == {"CloudWatchLogs": {"GroupName": {"Ref": ids["logs"]}, "Status": "ENABLED"}}
    assert project["ServiceRole"] == {"Fn::GetAtt": [ids["role"], "Arn"]}
    assert project["Source"]["Type"] == "S3"
    assert project["Source"]["Location"] == {"Fn::Join": ["", [{"Ref": ids["bucket"]}, "/sources/checkout.zip"]]}


def test_the_adopted_clusters_security_group_admits_the_runner_on_443(adopted) -> None:
    # THEN one ingress rule on the adopted cluster's security group, from the runner's group, TCP 443 only
    adopted["assert"].resource_properties_count_is("AWS::EC2::SecurityGroupIngress", {
        "GroupId": adopted["config"].eks.existing.cluster_security_group_id}, 1)
    adopted["assert"].has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": adopted["config"].eks.existing.cluster_security_group_id, "IpProtocol": "tcp", "FromPort": 443,
        "ToPort": 443, "SourceSecurityGroupId": {"Fn::GetAtt": [adopted["ids"]["group"], "GroupId"]}})


def test_a_created_clusters_security_group_admits_the_runner_on_443(synthesized) -> None:
    # GIVEN dev's platform (a created cluster; dev has an endpoint and the pipeline promotes it)
    template = synthesized.template("dev", "platform")
    resources = template["Resources"]
    ((cluster_id, _),) = [(k, v) for k, v in resources.items() if v["Type"] == "AWS::EKS::Cluster"]
    ((group_id, _),) = [(k, v) for k, v in resources.items() if v["Type"] == "AWS::EC2::SecurityGroup"
                        and "checks runner" in v["Properties"]["GroupDescription"]]
    # THEN the EKS-made cluster security group admits the runner's group on 443
    rules = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroupIngress"
             and v["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [group_id, "GroupId"]}]
    assert rules == [{"GroupId": {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]}, "IpProtocol": "tcp",
                      "FromPort": 443, "ToPort": 443, "SourceSecurityGroupId": {"Fn::GetAtt": [group_id, "GroupId"]},
                      "Description": "Kubernetes API from the checks runner hpdpd-dev-checks"}]
    # AND the project runs in the created VPC's EKS subnets (private, with a route to NAT)
    ((project,),) = [[v["Properties"] for v in resources.values() if v["Type"] == "AWS::CodeBuild::Project"]]
    subnets = {json.dumps(s) for s in project["VpcConfig"]["Subnets"]}
    assert len(subnets) == 2 and all('"hpdpd-dev-network"' in s and "eksSubnet" in s for s in subnets)


def test_the_buildspec_sets_up_and_runs_the_entry_point_that_refuses(adopted) -> None:
    spec = json.loads(_project(adopted)["Source"]["BuildSpec"])
    # THEN it is the project's own (not the checkout's): make setup where the checkout has that target (this
    # repository), else .venv/ from the checkout's requirements.txt (an app using the library), then the Python entry
    # point; the exit code is exported for BatchGetBuilds, and the build succeeds whenever the command ran
    setup = ("if make -n setup >/dev/null 2>&1; then make setup; "
             "else python -m venv .venv && .venv/bin/pip install --require-hashes -r requirements.txt; fi")
    assert spec == {
        "version": "0.2", "env": {"exported-variables": ["HPDPD_EXIT_CODE"]},
        "phases": {"install": {"runtime-versions": {"python": "3.11", "nodejs": "20"}, "commands": [setup]},
                   "build": {"commands": ["export HPDPD_EXIT_CODE=0; .venv/bin/hpdpd checks exec || "
                                          "export HPDPD_EXIT_CODE=$?"]}}}
    # AND it names no check command itself: which commands run is decided in Python (hpdpd checks exec)
    text = json.dumps(spec)
    assert not [c for c in CHECK_COMMANDS if f" {c} " in text or f'"{c}' in text]


def _deployment(config: Any, logs_id: str) -> Deployment:
    """Where the template deploys; a log group's ``Arn`` attribute is its ARN with ``:*`` (CloudFormation,
    AWS::Logs::LogGroup return values)."""
    group = f"arn:aws:logs:{config.region}:{config.account}:log-group:/aws/codebuild/{config.checks_project_name}:*"
    return Deployment(account=config.account, region=config.region, partition="aws",
                      attributes={(logs_id, "Arn"): group})


def test_the_runner_role_may_call_exactly_what_the_checks_and_codebuild_need(adopted) -> None:
    config, ids, stack = adopted["config"], adopted["ids"], adopted["stack"]
    template = adopted["template"]
    role = template["Resources"][ids["role"]]["Properties"]
    assert role["RoleName"] == "hpdpd-adopted-checks-runner"
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert (trust["Action"], trust["Principal"]) == ("sts:AssumeRole", {"Service": "codebuild.amazonaws.com"})
    # CodeBuild may assume it for this account's runner project only (the confused-deputy condition)
    condition = resolve(trust["Condition"], Deployment(account=config.account, region=config.region))
    project = f"arn:aws:codebuild:{config.region}:{config.account}:project/{config.checks_project_name}"
    assert conditions_hold(condition, {"aws:SourceArn": project, "aws:SourceAccount": config.account})
    assert not conditions_hold(condition, {"aws:SourceArn": project.replace(config.account, "999999999999"),
                                           "aws:SourceAccount": "999999999999"})
    policies = role_policies(template, ids["role"], _deployment(config, ids["logs"]))
    assert policies.unevaluated == ()  # no managed policy
    workspace = stack.get_logical_id(adopted["dpd"].inference_operator.observability_destination.workspace)
    account, region = config.account, config.region
    logs_group, key = f"/aws/codebuild/{config.checks_project_name}", f"<{ids['key']}.Arn>"
    subnets = sorted(s.subnet_id for s in config.network.existing.private_subnets)

    def allowed(action: str, resource: str, context: dict[str, Any] | None = None) -> bool:
        return policies.evaluate(Request(action, resource, context or {})).allowed

    # THEN the check commands' calls: EKS authentication to this cluster, the Prometheus query of this workspace, the
    # streaming invoke of the endpoint and its generations (lower case)
    assert allowed("eks:DescribeCluster", f"arn:aws:eks:{region}:{account}:cluster/platform-shared")
    assert allowed("aps:QueryMetrics", f"arn:aws:aps:{region}:{account}:workspace/<{workspace}.WorkspaceId>")
    for name in ("llama-70b", "llama-70b-0a1b2c"):
        assert allowed("sagemaker:InvokeEndpointWithResponseStream", f"arn:aws:sagemaker:{region}:{account}:endpoint/{name}")
    # AND what CodeBuild does as it: read a run's zip, write the build's log, use the project's key, and the build's
    # network interface in the runner's subnets only
    assert allowed("s3:GetObject", f"<{ids['bucket']}.Arn>/sources/run.zip")
    assert allowed("logs:PutLogEvents", f"arn:aws:logs:{region}:{account}:log-group:{logs_group}:log-stream:build")
    assert allowed("kms:GenerateDataKey", key)
    ec2, group = f"arn:aws:ec2:{region}:{account}", f"<{ids['group']}.GroupId>"
    interface = f"{ec2}:network-interface/eni-1"
    # (CreateNetworkInterface is authorized on the new interface, its subnet and its security groups; the describe
    # calls take no resource: Service Authorization Reference, Amazon EC2)
    assert all(allowed("ec2:CreateNetworkInterface", r) for r in (
        f"{ec2}:network-interface/*", *(f"{ec2}:subnet/{s}" for s in subnets), f"{ec2}:security-group/{group}"))
    assert allowed("ec2:DeleteNetworkInterface", interface, {"ec2:Subnet": f"{ec2}:subnet/{subnets[0]}"})
    assert allowed("ec2:DescribeSubnets", "*") and allowed("ec2:DescribeSecurityGroups", "*")
    assert allowed("ec2:CreateNetworkInterfacePermission", interface, {
        "ec2:Subnet": f"arn:aws:ec2:{region}:{account}:subnet/{subnets[0]}",
        "ec2:AuthorizedService": "codebuild.amazonaws.com"})
    # AND nothing else: another cluster, another endpoint, writing the source, another subnet or service
    for action, resource, context in [
        ("eks:DescribeCluster", f"arn:aws:eks:{region}:{account}:cluster/other", {}),
        ("sagemaker:InvokeEndpointWithResponseStream", f"arn:aws:sagemaker:{region}:{account}:endpoint/other", {}),
        ("sagemaker:InvokeEndpoint", f"arn:aws:sagemaker:{region}:{account}:endpoint/llama-70b", {}),
        ("s3:PutObject", f"<{ids['bucket']}.Arn>/sources/run.zip", {}),
        ("s3:GetObject", f"<{ids['bucket']}.Arn>/other/run.zip", {}),
        ("ec2:CreateNetworkInterfacePermission", interface, {
            "ec2:Subnet": f"arn:aws:ec2:{region}:{account}:subnet/subnet-0ffffffffffffffff",
            "ec2:AuthorizedService": "codebuild.amazonaws.com"}),
        ("ec2:CreateNetworkInterfacePermission", interface, {
            "ec2:Subnet": f"arn:aws:ec2:{region}:{account}:subnet/{subnets[0]}", "ec2:AuthorizedService": "lambda"}),
        ("iam:PassRole", "*", {}), ("codebuild:StartBuild", "*", {}),
        # network interfaces in another subnet or security group, or in no particular one, or deleted elsewhere
        ("ec2:CreateNetworkInterface", f"{ec2}:subnet/subnet-0ffffffffffffffff", {}),
        ("ec2:CreateNetworkInterface", f"{ec2}:security-group/sg-0ffffffffffffffff", {}),
        ("ec2:CreateNetworkInterface", "*", {}),
        ("ec2:DeleteNetworkInterface", interface, {"ec2:Subnet": f"{ec2}:subnet/subnet-0ffffffffffffffff"}),
        ("ec2:DeleteNetworkInterface", interface.replace(account, "999999999999"),
         {"ec2:Subnet": f"{ec2}:subnet/{subnets[0]}"}),
    ]:
        assert not allowed(action, resource, context), (action, resource)
    actions = {a for d in policies.documents for s in d["Statement"] for a in
               ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {
        "eks:DescribeCluster", "aps:QueryMetrics", "sagemaker:InvokeEndpointWithResponseStream",
        "s3:GetObject", "s3:GetObjectVersion", "s3:GetBucketAcl", "s3:GetBucketLocation",
        "logs:CreateLogStream", "logs:PutLogEvents", "kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*",
        "kms:GenerateDataKey*", "ec2:CreateNetworkInterface", "ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs",
        "ec2:CreateNetworkInterfacePermission"}
    # AND on the bucket itself only its identity (no listing)
    assert allowed("s3:GetBucketLocation", f"<{ids['bucket']}.Arn>") and not allowed("s3:ListBucket", f"<{ids['bucket']}.Arn>")


def test_the_source_bucket_is_private_encrypted_tls_only_and_expires_runs(adopted) -> None:
    ids, template = adopted["ids"], adopted["template"]
    bucket = template["Resources"][ids["bucket"]]["Properties"]
    # THEN it is encrypted, blocks public access, logs access to the platform's log bucket, and runs expire
    assert bucket["BucketEncryption"] == {"ServerSideEncryptionConfiguration": [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
    assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
    logs_id = adopted["stack"].get_logical_id(adopted["dpd"].access_logs.node.default_child)
    assert bucket["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": logs_id}
    assert bucket["LifecycleConfiguration"]["Rules"] == [{
        "Id": "ExpireRuns", "Prefix": "sources/", "ExpirationInDays": 3, "Status": "Enabled",
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]
    # AND its policy denies every request without TLS
    (policy,) = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "AWS::S3::BucketPolicy"
                 and v["Properties"]["Bucket"] == {"Ref": ids["bucket"]}]
    deny = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny == [{"Action": "s3:*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}, "Effect": "Deny",
                     "Principal": {"AWS": "*"}, "Resource": [
                         {"Fn::GetAtt": [ids["bucket"], "Arn"]},
                         {"Fn::Join": ["", [{"Fn::GetAtt": [ids["bucket"], "Arn"]}, "/*"]]}]}]
    # AND the build log group is encrypted with the runner's key, which admits only that group's log service use
    group = template["Resources"][ids["logs"]]["Properties"]
    assert group["LogGroupName"] == "/aws/codebuild/hpdpd-adopted-checks"
    assert group["KmsKeyId"] == {"Fn::GetAtt": [ids["key"], "Arn"]} and group["RetentionInDays"] == 90
    key = template["Resources"][ids["key"]]["Properties"]
    assert key["EnableKeyRotation"] is True
    (logs_use,) = [s for s in key["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsUse"]
    assert logs_use["Principal"] == {"Service": "logs.us-west-2.amazonaws.com"}
    assert "log-group:/aws/codebuild/hpdpd-adopted-checks" in json.dumps(logs_use["Condition"])


@pytest.mark.parametrize(("props", "path"), [
    ({"project_name": "-bad"}, "ChecksRunner.project_name"),
    ({"role_name": "x" * 65}, "ChecksRunner.role_name"),
    ({"subnets": []}, "ChecksRunner.subnets"),
    ({"sagemaker_endpoint_names": ["bad_name"]}, "ChecksRunner.sagemaker_endpoint_names"),
], ids=["a bad project name", "a role name of 65 characters", "no subnets", "an invalid SageMaker name"])
def test_the_construct_refuses_bad_props_with_one_line(props: dict[str, Any], path: str) -> None:
    stack = cdk.Stack(cdk.App(), "Bad", env=cdk.Environment(account="444444444444", region="us-west-2"))
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"],
                                      private_subnet_ids=["subnet-0123456789abcdef0"])
    given = {"project_name": "hpdpd-x-checks", "role_name": "hpdpd-x-checks-runner", "environment_name": "x",
             "vpc": vpc, "subnets": vpc.private_subnets, "cluster_security_group_id": "sg-0123456789abcdef0",
             "eks_cluster_name": "c", "removal_policy": cdk.RemovalPolicy.DESTROY, **props}
    with pytest.raises(ConfigError) as caught:
        ChecksRunner(stack, "ChecksRunner", **given)
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{path}: ")
    assert stack.node.try_find_child("ChecksRunner") is None
