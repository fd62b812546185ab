"""The add-on roles do what their controllers do, and nothing else: each role's synthesized policy is evaluated
(tests/iam_eval.py) against the calls its controller makes in its normal life, and against calls outside its job.

The calls follow each controller's own IAM documentation: AWS's policies for the inference add-on
(aws/sagemaker-hyperpod-cluster-setup @ a9933ba, eks/cloudformation/inference-addon-iam-roles-template.yaml; for the
load balancer controller the same statements as its iam_policy.json: the cluster tag ``elbv2.k8s.aws/cluster`` is
put on everything it creates, in the creating call), the FSx CSI driver's install guide
(kubernetes-sigs/aws-fsx-csi-driver docs/install.md), and the observability template
(eks/cloudformation/observability-template.yaml). Roles are built by ``InferenceOperator`` in a small scratch stack,
synthesized with the project's guardrails (cdk-nag and its own rules) switched on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from hyperpod_dpd.config.operator import ModelBucket
from hyperpod_dpd.infra.guardrails.apply import apply_guardrails
from hyperpod_dpd.infra.inference_operator import InferenceOperator, ObservabilityOptions
from tests.iam_eval import Decision, Deployment, Request, RolePolicies, evaluate, resolve, role_policies
from tests.paths import ROOT
from tests.validators import report_violations, validation_report

ACCOUNT, REGION, CLUSTER = "111111111111", "us-west-2", "hpdpd-test"
TAG = "elbv2.k8s.aws/cluster"
MODEL_BUCKET, SHARED_BUCKET = "hpdpd-models-111111111111-us-west-2", "shared-model-zoo"
WORKSPACE_ID = "ws-11111111-2222-3333-4444-555555555555"  # what the created workspace resolves to in these tests


def _elb(resource: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:elasticloadbalancing:{REGION}:{account}:{resource}"


def _ec2(resource: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:ec2:{REGION}:{account}:{resource}"


ALB = _elb("loadbalancer/app/k8s-llmservi-llama3-0a1b2c3d4e/50dc6c495c0c9188")
NLB = _elb("loadbalancer/net/k8s-llmservi-router-0a1b2c3d4e/8e2d6bc24d8a0671")
TARGET_GROUP = _elb("targetgroup/k8s-llmservi-llama3-0a1b2c3d4e/73e2d6bc24d8a067")
LISTENER = _elb("listener/app/k8s-llmservi-llama3-0a1b2c3d4e/50dc6c495c0c9188/f2f7dc8efc522ab2")
RULE = _elb("listener-rule/app/k8s-llmservi-llama3-0a1b2c3d4e/50dc6c495c0c9188/f2f7dc8efc522ab2/9683b2d02a6cabee")
SECURITY_GROUP, NODE_SECURITY_GROUP = _ec2("security-group/sg-0123456789abcdef0"), _ec2("security-group/sg-0fedcba987654321f")
VPC = _ec2("vpc/vpc-0123456789abcdef0")
CREATING = {f"aws:RequestTag/{TAG}": CLUSTER, "aws:TagKeys": [TAG, "ingress.k8s.aws/stack", "ingress.k8s.aws/resource"]}
OWN = {f"aws:ResourceTag/{TAG}": CLUSTER}
RETAGGING_OWN = {**OWN, "aws:RequestTag/ingress.k8s.aws/stack": "llm-serving/llama3", "aws:TagKeys": ["ingress.k8s.aws/stack"]}


def _creating(action: str) -> dict[str, Any]:
    return {**CREATING, "elasticloadbalancing:CreateAction": action}


@dataclass(frozen=True)
class Calls:
    normal: tuple[Request, ...]
    outside: tuple[Request, ...]


CERTIFICATE = f"arn:aws:acm:{REGION}:{ACCOUNT}:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
USER_POOL = f"arn:aws:cognito-idp:{REGION}:{ACCOUNT}:userpool/{REGION}_aBcDeFgHi"
WEB_ACL = f"arn:aws:wafv2:{REGION}:{ACCOUNT}:regional/webacl/inference/0a1b2c3d"
OTHER = "222222222222"

LOAD_BALANCER_CONTROLLER = Calls(normal=(
    Request("ec2:DescribeSubnets"), Request("ec2:DescribeSecurityGroups"), Request("ec2:GetSecurityGroupsForVpc", VPC),
    Request("ec2:GetCoipPoolUsage", _ec2("coip-pool/ipv4pool-coip-0123456789abcdef0")),
    # what an Ingress names: its certificate, its Cognito client, its web ACL (each a resource IAM authorizes on)
    Request("acm:DescribeCertificate", CERTIFICATE),
    Request("iam:GetServerCertificate", f"arn:aws:iam::{ACCOUNT}:server-certificate/inference"),
    Request("cognito-idp:DescribeUserPoolClient", USER_POOL),
    Request("wafv2:GetWebACL", WEB_ACL), Request("wafv2:GetWebACLForResource", ALB),
    Request("waf-regional:GetWebACLForResource", ALB),
    Request("elasticloadbalancing:DescribeLoadBalancers"), Request("elasticloadbalancing:DescribeListenerAttributes"),
    Request("elasticloadbalancing:DescribeTags"), Request("acm:ListCertificates"),
    Request("shield:GetSubscriptionState"),
    Request("iam:CreateServiceLinkedRole",
            f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing",
            {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}),
    # the ALB's security group: created in the VPC with the cluster tag, then opened and retagged
    Request("ec2:CreateSecurityGroup", VPC),
    Request("ec2:CreateSecurityGroup", SECURITY_GROUP, CREATING),
    Request("ec2:CreateTags", SECURITY_GROUP, {**CREATING, "ec2:CreateAction": "CreateSecurityGroup"}),
    Request("ec2:AuthorizeSecurityGroupIngress", SECURITY_GROUP, OWN),
    Request("ec2:CreateTags", SECURITY_GROUP, RETAGGING_OWN),
    Request("ec2:DeleteTags", SECURITY_GROUP, {**OWN, "aws:TagKeys": ["ingress.k8s.aws/stack"]}),
    # the nodes' security group is opened to the load balancer (not the controller's, so untagged)
    Request("ec2:AuthorizeSecurityGroupIngress", NODE_SECURITY_GROUP),
    Request("ec2:RevokeSecurityGroupIngress", NODE_SECURITY_GROUP),
    # load balancer and target group, tagged in the creating call
    Request("elasticloadbalancing:CreateLoadBalancer", ALB, CREATING),
    Request("elasticloadbalancing:AddTags", ALB, _creating("CreateLoadBalancer")),
    Request("elasticloadbalancing:CreateLoadBalancer", NLB, CREATING),
    Request("elasticloadbalancing:AddTags", NLB, _creating("CreateLoadBalancer")),
    Request("elasticloadbalancing:CreateTargetGroup", TARGET_GROUP, CREATING),
    Request("elasticloadbalancing:AddTags", TARGET_GROUP, _creating("CreateTargetGroup")),
    # listener and rule, tagged in the creating call (the controller's default and cluster tags)
    Request("elasticloadbalancing:CreateListener", ALB, CREATING),
    Request("elasticloadbalancing:AddTags", LISTENER, _creating("CreateListener")),
    Request("elasticloadbalancing:CreateRule", LISTENER, CREATING),
    Request("elasticloadbalancing:AddTags", RULE, _creating("CreateRule")),
    # modifying what it owns
    Request("elasticloadbalancing:ModifyLoadBalancerAttributes", ALB, OWN),
    Request("elasticloadbalancing:SetSecurityGroups", ALB, OWN),
    Request("elasticloadbalancing:SetSubnets", ALB, OWN),
    Request("elasticloadbalancing:ModifyTargetGroupAttributes", TARGET_GROUP, OWN),
    Request("elasticloadbalancing:ModifyListenerAttributes", LISTENER, OWN),
    Request("elasticloadbalancing:ModifyListener", LISTENER, OWN),
    Request("elasticloadbalancing:AddListenerCertificates", LISTENER, OWN),
    Request("elasticloadbalancing:ModifyRule", RULE, OWN),
    Request("elasticloadbalancing:SetRulePriorities", RULE, OWN),
    Request("elasticloadbalancing:AddTags", ALB, RETAGGING_OWN),
    Request("elasticloadbalancing:RemoveTags", TARGET_GROUP, {**OWN, "aws:TagKeys": ["ingress.k8s.aws/stack"]}),
    Request("elasticloadbalancing:AddTags", LISTENER, RETAGGING_OWN),
    Request("elasticloadbalancing:RegisterTargets", TARGET_GROUP),
    Request("elasticloadbalancing:DeregisterTargets", TARGET_GROUP),
    # WAF and Shield Advanced on the ALB when an Ingress asks for them; SetWebAcl and CreateProtection take no
    # resource type (Service Authorization Reference), so IAM authorizes them on "*"
    Request("elasticloadbalancing:SetWebAcl"),
    Request("wafv2:AssociateWebACL", WEB_ACL),
    Request("wafv2:AssociateWebACL", ALB),
    Request("shield:CreateProtection"),
    Request("shield:DeleteProtection", f"arn:aws:shield::{ACCOUNT}:protection/0a1b2c3d-4e5f-6789-abcd-ef0123456789"),
    # deleting it all again
    Request("elasticloadbalancing:DeleteRule", RULE),
    Request("elasticloadbalancing:DeleteListener", LISTENER),
    Request("elasticloadbalancing:DeleteLoadBalancer", ALB, OWN),
    Request("elasticloadbalancing:DeleteTargetGroup", TARGET_GROUP, OWN),
    Request("ec2:RevokeSecurityGroupIngress", SECURITY_GROUP, OWN),
    Request("ec2:DeleteSecurityGroup", SECURITY_GROUP, OWN),
), outside=(
    # someone else's load balancer and security group (no cluster tag)
    Request("elasticloadbalancing:DeleteLoadBalancer", ALB),
    Request("elasticloadbalancing:ModifyLoadBalancerAttributes", ALB),
    Request("elasticloadbalancing:DeleteTargetGroup", TARGET_GROUP),
    Request("ec2:DeleteSecurityGroup", SECURITY_GROUP),
    # claiming a resource by stamping the cluster tag on it later, or moving it to another cluster
    Request("elasticloadbalancing:AddTags", ALB, {f"aws:RequestTag/{TAG}": CLUSTER, "aws:TagKeys": [TAG]}),
    Request("elasticloadbalancing:AddTags", ALB, {**OWN, f"aws:RequestTag/{TAG}": "other", "aws:TagKeys": [TAG]}),
    Request("ec2:CreateTags", SECURITY_GROUP, {**OWN, f"aws:RequestTag/{TAG}": "other", "aws:TagKeys": [TAG]}),
    Request("ec2:CreateTags", NODE_SECURITY_GROUP, {"aws:RequestTag/team": "ml", "aws:TagKeys": ["team"]}),
    # untagged creations, another account, other services' roles, other services
    Request("elasticloadbalancing:CreateLoadBalancer", ALB),
    Request("ec2:CreateSecurityGroup", _ec2("security-group/sg-0123456789abcdef0", account="222222222222"), CREATING),
    Request("elasticloadbalancing:DeleteLoadBalancer", _elb(ALB.split(":", 5)[5], account="222222222222"), OWN),
    Request("iam:CreateServiceLinkedRole", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/x",
            {"iam:AWSServiceName": "autoscaling.amazonaws.com"}),
    Request("ec2:RunInstances", _ec2("instance/*")),
    Request("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin"),
    Request("s3:GetObject", f"arn:aws:s3:::{MODEL_BUCKET}/weights.safetensors"),
    # another account's certificate, user pool, web ACL or VPC
    Request("acm:DescribeCertificate", CERTIFICATE.replace(ACCOUNT, OTHER)),
    Request("iam:GetServerCertificate", f"arn:aws:iam::{OTHER}:server-certificate/inference"),
    Request("cognito-idp:DescribeUserPoolClient", USER_POOL.replace(ACCOUNT, OTHER)),
    Request("wafv2:GetWebACL", WEB_ACL.replace(ACCOUNT, OTHER)),
    Request("ec2:GetSecurityGroupsForVpc", _ec2("vpc/vpc-0123456789abcdef0", account=OTHER)),
))

KEDA = Calls(normal=(
    Request("cloudwatch:GetMetricData"), Request("cloudwatch:GetMetricStatistics"), Request("cloudwatch:ListMetrics"),
    Request("aps:QueryMetrics", f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/{WORKSPACE_ID}"),
    Request("aps:GetSeries", f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/{WORKSPACE_ID}"),
), outside=(
    Request("aps:QueryMetrics", f"arn:aws:aps:{REGION}:222222222222:workspace/{WORKSPACE_ID}"),
    Request("aps:RemoteWrite", f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/{WORKSPACE_ID}"),
    Request("cloudwatch:PutMetricData"), Request("s3:GetObject", f"arn:aws:s3:::{MODEL_BUCKET}/x"),
))

S3_CSI = Calls(normal=(
    Request("s3:ListBucket", f"arn:aws:s3:::{MODEL_BUCKET}"),
    Request("s3:GetObject", f"arn:aws:s3:::{MODEL_BUCKET}/Llama-3.3-70B-Instruct/model-00001-of-00030.safetensors"),
    Request("s3:ListBucket", f"arn:aws:s3:::{SHARED_BUCKET}"),
    Request("s3:GetObject", f"arn:aws:s3:::{SHARED_BUCKET}/llama/config.json"),
), outside=(
    Request("s3:PutObject", f"arn:aws:s3:::{MODEL_BUCKET}/x"),  # mounts are read-only
    Request("s3:DeleteObject", f"arn:aws:s3:::{MODEL_BUCKET}/x"),
    Request("s3:GetObject", "arn:aws:s3:::hyperpod-tls-111111111111-us-west-2/cert.pem"),
    Request("s3:ListBucket", "arn:aws:s3:::someone-elses-bucket"),
    Request("s3:ListAllMyBuckets"),
))

FSX = f"arn:aws:fsx:{REGION}:{ACCOUNT}:file-system/fs-0123456789abcdef0"
FSX_CSI = Calls(normal=(
    Request("fsx:DescribeFileSystems"),
    Request("fsx:CreateFileSystem", FSX), Request("fsx:TagResource", FSX), Request("fsx:UpdateFileSystem", FSX),
    Request("fsx:DeleteFileSystem", FSX),
    Request("iam:CreateServiceLinkedRole", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/fsx.amazonaws.com/AWSServiceRoleForAmazonFSx",
            {"iam:AWSServiceName": "fsx.amazonaws.com"}),
    # a file system linked to the model bucket (the driver's s3ImportPath)
    Request("iam:CreateServiceLinkedRole", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/"
            "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0",
            {"iam:AWSServiceName": "s3.data-source.lustre.fsx.amazonaws.com"}),
    Request("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/"
            "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0"),
    Request("s3:ListBucket", f"arn:aws:s3:::{MODEL_BUCKET}"),
), outside=(
    Request("fsx:DeleteFileSystem", f"arn:aws:fsx:{REGION}:222222222222:file-system/fs-0123456789abcdef0"),
    Request("fsx:DeleteBackup", f"arn:aws:fsx:{REGION}:{ACCOUNT}:backup/backup-0123456789abcdef0"),
    Request("iam:CreateServiceLinkedRole", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/ec2.amazonaws.com/x",
            {"iam:AWSServiceName": "ec2.amazonaws.com"}),
    Request("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/admin"),
    Request("s3:GetObject", f"arn:aws:s3:::{MODEL_BUCKET}/x"),
    Request("s3:ListBucket", "arn:aws:s3:::someone-elses-bucket"),
))

TLS = "hyperpod-tls-111111111111-us-west-2"
EXECUTION_ROLE_INLINE = Calls(normal=(
    Request("s3:ListBucket", f"arn:aws:s3:::{TLS}"),
    Request("s3:PutObject", f"arn:aws:s3:::{TLS}/llm-serving/llama3/cert.pem", {"aws:ResourceAccount": ACCOUNT}),
    Request("s3:PutObjectTagging", f"arn:aws:s3:::{TLS}/llm-serving/llama3/cert.pem", {"aws:ResourceAccount": ACCOUNT}),
    Request("s3:GetObject", f"arn:aws:s3:::{TLS}/llm-serving/llama3/cert.pem", {"aws:ResourceAccount": ACCOUNT}),
    Request("s3:DeleteObject", f"arn:aws:s3:::{TLS}/llm-serving/llama3/cert.pem", {"aws:ResourceAccount": ACCOUNT}),
    Request("acm:DescribeCertificate", f"arn:aws:acm:{REGION}:{ACCOUNT}:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789"),
), outside=(
    # a bucket of the same name in another account (the TLS bucket name is predictable)
    Request("s3:PutObject", f"arn:aws:s3:::{TLS}/x", {"aws:ResourceAccount": "222222222222"}),
    Request("s3:GetObject", f"arn:aws:s3:::{MODEL_BUCKET}/x", {"aws:ResourceAccount": ACCOUNT}),
    Request("acm:DeleteCertificate", f"arn:aws:acm:{REGION}:{ACCOUNT}:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789"),
))

WORKSPACE = f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/{WORKSPACE_ID}"
OTHER_WORKSPACE = f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/ws-99999999-8888-7777-6666-555555555555"
LOG_GROUP = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Clusters/hpdpd-test/abc123"
OBSERVABILITY_COLLECTOR = Calls(normal=(
    Request("aps:RemoteWrite", WORKSPACE),
    Request("logs:CreateLogGroup", LOG_GROUP), Request("logs:DescribeLogGroups", LOG_GROUP),
    Request("logs:CreateLogStream", f"{LOG_GROUP}:log-stream:node-1"),
    Request("logs:PutLogEvents", f"{LOG_GROUP}:log-stream:node-1"),
), outside=(
    Request("aps:RemoteWrite", OTHER_WORKSPACE),
    Request("aps:RemoteWrite", f"arn:aws:aps:us-east-1:{ACCOUNT}:workspace/{WORKSPACE_ID}"),
    Request("aps:QueryMetrics", WORKSPACE), Request("aps:DeleteWorkspace", WORKSPACE),
    Request("logs:PutLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/x:log-stream:y"),
    Request("logs:DeleteLogGroup", LOG_GROUP),
))

GRAFANA = Calls(normal=(
    Request("aps:ListWorkspaces"), Request("aps:DescribeWorkspace", WORKSPACE), Request("aps:QueryMetrics", WORKSPACE),
    Request("aps:GetLabels", WORKSPACE), Request("aps:ListRules", WORKSPACE),
), outside=(
    Request("aps:QueryMetrics", OTHER_WORKSPACE), Request("aps:RemoteWrite", WORKSPACE),
    Request("aps:DeleteWorkspace", WORKSPACE), Request("cloudwatch:GetMetricData"),
))


# -- the scratch stacks --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Synth:
    outdir: Path
    templates: dict[str, dict[str, Any]]
    roles: dict[str, dict[str, str]]  # stack -> role name -> logical id
    ids: dict[str, dict[str, str]]  # stack -> other resources' logical ids

    def deployment(self, stack: str) -> Deployment:
        """Buckets resolve to their names and ARNs, the created workspace to WORKSPACE_ID."""
        refs, attributes = {}, {}
        for logical_id, resource in self.templates[stack]["Resources"].items():
            if resource["Type"] == "AWS::S3::Bucket" and "BucketName" in resource["Properties"]:
                name = resource["Properties"]["BucketName"]
                refs[logical_id] = name
                attributes[(logical_id, "Arn")] = f"arn:aws:s3:::{name}"
            if resource["Type"] == "AWS::APS::Workspace":
                attributes[(logical_id, "WorkspaceId")] = WORKSPACE_ID
            if resource["Type"] == "AWS::Grafana::Workspace":
                attributes[(logical_id, "Id")] = "g-0123456789"
        return Deployment(account=ACCOUNT, region=REGION, partition="aws", refs=refs, attributes=attributes)

    def policies(self, stack: str, role: str) -> RolePolicies:
        return role_policies(self.templates[stack], self.roles[stack][role], self.deployment(stack))


def _operator(app: cdk.App, name: str, observability: ObservabilityOptions) -> tuple[cdk.Stack, InferenceOperator]:
    stack = cdk.Stack(app, name, env=cdk.Environment(account=ACCOUNT, region=REGION))
    apply_guardrails(stack)
    oidc = iam.OpenIdConnectProvider.from_open_id_connect_provider_arn(
        stack, "Oidc", f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.{REGION}.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF")
    # Stand-ins with what InferenceOperator reads of HyperPodEksCluster and HyperPodCluster
    eks_cluster = SimpleNamespace(cluster=SimpleNamespace(cluster_name=CLUSTER), oidc_provider=oidc, addons={},
                                  cluster_arn=f"arn:{cdk.Aws.PARTITION}:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}")
    cluster = sagemaker.CfnCluster(stack, "HyperPod", cluster_name="hp", node_recovery="Automatic")
    hyperpod = SimpleNamespace(resource=cluster, cluster_arn=cluster.attr_cluster_arn)
    logs = s3.Bucket.from_bucket_name(stack, "AccessLogs", "hpdpd-access-logs-111111111111-us-west-2")
    operator = InferenceOperator(
        stack, "InferenceOperator", eks_cluster=eks_cluster, hyperpod_cluster=hyperpod,  # type: ignore[arg-type]
        operator_version="3.4", execution_role_name="SageMakerHyperPodInference-test", tls_bucket_name=TLS,
        model_buckets=[ModelBucket(name=MODEL_BUCKET, create=True), ModelBucket(name=SHARED_BUCKET)],
        gated_model_access=True, observability=observability, access_logs_bucket=logs)
    return stack, operator


def _logical_id(stack: cdk.Stack, construct: Any) -> str:
    child = construct.node.default_child if not isinstance(construct, cdk.CfnResource) else construct
    return stack.resolve(child.logical_id)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Two scratch stacks: one creating the Prometheus and Grafana workspaces, one using an existing workspace."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir))
    built = {
        "Created": _operator(app, "Created", ObservabilityOptions(addon_version="v1.0.5-eksbuild.1", grafana=True,
                                                                  logging=True)),
        "Imported": _operator(app, "Imported", ObservabilityOptions(addon_version="v1.0.5-eksbuild.1",
                                                                    prometheus_workspace_arn=WORKSPACE)),
    }
    roles: dict[str, dict[str, str]] = {}
    ids: dict[str, dict[str, str]] = {}
    for name, (stack, operator) in built.items():
        destination = operator.observability_destination
        assert destination is not None and operator.observability_addon is not None
        roles[name] = {
            "load balancer controller": _logical_id(stack, operator.alb_role), "KEDA": _logical_id(stack, operator.keda_role),
            "S3 CSI": _logical_id(stack, operator.s3_csi_role), "FSx CSI": _logical_id(stack, operator.fsx_csi_role),
            "execution role": _logical_id(stack, operator.execution_role),
            "observability collector": _logical_id(stack, operator.observability_role)}
        ids[name] = {"addon": _logical_id(stack, operator.observability_addon)}
        if destination.grafana_role is not None:
            roles[name]["Grafana"] = _logical_id(stack, destination.grafana_role)
        if destination.workspace is not None:
            ids[name]["workspace"] = _logical_id(stack, destination.workspace)
    app.synth()
    templates = {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in built}
    return Synth(outdir, templates, roles, ids)


# -- every normal call allowed, everything outside denied ----------------------------------------------------------

CONTROLLERS: dict[str, Calls] = {
    "load balancer controller": LOAD_BALANCER_CONTROLLER, "KEDA": KEDA, "S3 CSI": S3_CSI, "FSx CSI": FSX_CSI,
    "execution role": EXECUTION_ROLE_INLINE, "observability collector": OBSERVABILITY_COLLECTOR, "Grafana": GRAFANA,
}


@pytest.mark.parametrize("role", sorted(CONTROLLERS))
def test_every_call_of_the_controllers_normal_life_is_allowed(synth: Synth, role: str) -> None:
    # GIVEN the role as InferenceOperator synthesizes it, resolved for account/Region/partition
    policies = synth.policies("Created", role)
    # WHEN each normal call is evaluated THEN it is allowed
    denied = [str(r) for r in CONTROLLERS[role].normal if not policies.evaluate(r).allowed]
    assert denied == []


@pytest.mark.parametrize("role", sorted(CONTROLLERS))
def test_every_call_outside_the_controllers_job_is_denied(synth: Synth, role: str) -> None:
    policies = synth.policies("Created", role)
    allowed = [f"{r} (by {policies.evaluate(r).statements})" for r in CONTROLLERS[role].outside
               if policies.evaluate(r).allowed]
    assert allowed == []


def test_only_the_execution_role_depends_on_a_managed_policy_that_is_not_in_the_template(synth: Synth) -> None:
    unevaluated = {role: synth.policies("Created", role).unevaluated for role in CONTROLLERS}
    assert unevaluated == {**{role: () for role in CONTROLLERS},
                           "execution role": ("arn:aws:iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess",)}


# -- the load balancer controller policy before this change ---------------------------------------------------------

BEFORE = ROOT / "tests" / "fixtures" / "iam" / "load-balancer-controller-policy-before.json"


def _before() -> list[dict[str, Any]]:
    """The controller's policy document as the previous infra/policies.py synthesized it (kept as a fixture)."""
    return [resolve(json.loads(BEFORE.read_text()), Deployment(account=ACCOUNT, region=REGION))]


def test_the_previous_policy_denied_tagging_the_listener_the_controller_creates() -> None:
    # GIVEN the previous policy, whose AddTags on listeners required CreateAction CreateTargetGroup/CreateLoadBalancer
    tag_listener = Request("elasticloadbalancing:AddTags", LISTENER, _creating("CreateListener"))
    # WHEN the controller tags the listener it is creating THEN the request was denied: CreateListener fails
    assert evaluate(_before(), tag_listener).decision is Decision.IMPLICIT_DENY
    assert evaluate(_before(), Request("elasticloadbalancing:AddTags", RULE, _creating("CreateRule"))).decision \
        is Decision.IMPLICIT_DENY
    assert evaluate(_before(), Request("elasticloadbalancing:SetRulePriorities", RULE, OWN)).decision \
        is Decision.IMPLICIT_DENY


def test_the_call_list_finds_exactly_the_previous_policys_gaps(synth: Synth) -> None:
    """The call-list tests above, run on the previous policy, fail: it denied tagging listeners and rules (at creation
    and later), rule priorities, WAF association (SetWebAcl on ARNs, where it grants nothing) and Shield protections,
    and it let the controller rewrite the cluster tag of its load balancers and security groups."""
    before = _before()
    denied = [r for r in LOAD_BALANCER_CONTROLLER.normal if not evaluate(before, r).allowed]
    assert [(r.action, r.resource) for r in denied] == [
        ("elasticloadbalancing:AddTags", LISTENER), ("elasticloadbalancing:AddTags", RULE),
        ("elasticloadbalancing:SetRulePriorities", RULE), ("elasticloadbalancing:AddTags", LISTENER),
        ("elasticloadbalancing:SetWebAcl", "*"), ("wafv2:AssociateWebACL", WEB_ACL), ("wafv2:AssociateWebACL", ALB),
        ("shield:CreateProtection", "*"),
        ("shield:DeleteProtection", f"arn:aws:shield::{ACCOUNT}:protection/0a1b2c3d-4e5f-6789-abcd-ef0123456789")]
    allowed = [r for r in LOAD_BALANCER_CONTROLLER.outside if evaluate(before, r).allowed]
    assert [(r.action, r.resource, dict(r.context).get(f"aws:RequestTag/{TAG}")) for r in allowed] == [
        ("elasticloadbalancing:AddTags", ALB, "other"), ("ec2:CreateTags", SECURITY_GROUP, "other"),
        # and, on "*", another account's certificates, user pools, web ACLs and VPCs
        ("acm:DescribeCertificate", CERTIFICATE.replace(ACCOUNT, OTHER), None),
        ("iam:GetServerCertificate", f"arn:aws:iam::{OTHER}:server-certificate/inference", None),
        ("cognito-idp:DescribeUserPoolClient", USER_POOL.replace(ACCOUNT, OTHER), None),
        ("wafv2:GetWebACL", WEB_ACL.replace(ACCOUNT, OTHER), None),
        ("ec2:GetSecurityGroupsForVpc", _ec2("vpc/vpc-0123456789abcdef0", account=OTHER), None)]


# -- observability: where the metrics land ---------------------------------------------------------------------------

def _addon_configuration(synth: Synth, stack: str) -> dict[str, Any]:
    addon = synth.templates[stack]["Resources"][synth.ids[stack]["addon"]]["Properties"]
    return json.loads(resolve(addon["ConfigurationValues"], synth.deployment(stack)))


def test_a_created_workspace_is_encrypted_tagged_and_passed_to_the_addon(synth: Synth) -> None:
    # GIVEN observability without an existing workspace
    resources = synth.templates["Created"]["Resources"]
    # WHEN synthesized THEN one AMP workspace, encrypted with a rotated key of the stack, tagged as AWS tags it
    workspace = resources[synth.ids["Created"]["workspace"]]
    key_id = workspace["Properties"]["KmsKeyArn"]["Fn::GetAtt"][0]
    assert resources[key_id]["Type"] == "AWS::KMS::Key" and resources[key_id]["Properties"]["EnableKeyRotation"] is True
    assert workspace["Properties"]["Tags"] == [{"Key": "SageMaker", "Value": "true"}]
    assert workspace["Properties"]["Alias"] == f"{CLUSTER}-hyperpod-dpd"
    # AND the add-on gets its endpoint and ARN, the template's metric levels, Grafana and logging
    config = _addon_configuration(synth, "Created")
    assert config["ampWorkspace"] == {
        "prometheusEndpoint": f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/{WORKSPACE_ID}", "arn": WORKSPACE}
    assert config["metricsProvider"]["inferenceMetrics"] == {"level": "BASIC", "scrapeInterval": 30}
    assert config["amgWorkspace"] == {"workspaceName": f"{CLUSTER}-hyperpod-dpd",
                                      "arn": f"arn:aws:grafana:{REGION}:{ACCOUNT}:/workspaces/g-0123456789"}
    assert config["logging"] == {"enabled": True}
    addon = resources[synth.ids["Created"]["addon"]]["Properties"]
    assert (addon["AddonName"], addon["Tags"]) == ("amazon-sagemaker-hyperpod-observability",
                                                   [{"Key": "SageMaker", "Value": "true"}])


def test_an_existing_workspace_is_used_as_is(synth: Synth) -> None:
    resources = synth.templates["Imported"]["Resources"]
    assert not [r for r in resources.values() if r["Type"] in ("AWS::APS::Workspace", "AWS::Grafana::Workspace")]
    config = _addon_configuration(synth, "Imported")
    assert config == {
        "ampWorkspace": {"prometheusEndpoint": f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/{WORKSPACE_ID}",
                         "arn": WORKSPACE},
        "metricsProvider": {name: {"level": level, "scrapeInterval": 30} for name, level in (
            ("trainingMetrics", "BASIC"), ("inferenceMetrics", "BASIC"), ("taskGovernanceMetrics", "DISABLED"),
            ("scalingMetrics", "DISABLED"), ("nodeMetrics", "BASIC"), ("acceleratedComputeMetrics", "BASIC"),
            ("networkMetrics", "DISABLED"))}}


@pytest.mark.parametrize("stack", ["Created", "Imported"])
def test_the_collector_may_remote_write_to_its_workspace_only(synth: Synth, stack: str) -> None:
    # GIVEN the collector's Pod Identity role WHEN it remote-writes THEN only its own workspace accepts
    policies = synth.policies(stack, "observability collector")
    assert policies.evaluate(Request("aps:RemoteWrite", WORKSPACE)).allowed
    assert policies.evaluate(Request("aps:RemoteWrite", OTHER_WORKSPACE)).decision is Decision.IMPLICIT_DENY


@pytest.mark.parametrize("stack", ["Created", "Imported"])
def test_the_addon_configuration_matches_the_schema_derived_from_aws_template(synth: Synth, stack: str) -> None:
    import jsonschema

    from hyperpod_dpd.catalogue.operator import OBSERVABILITY_CONFIGURATION_SCHEMA

    jsonschema.validate(_addon_configuration(synth, stack), OBSERVABILITY_CONFIGURATION_SCHEMA)


def test_grafana_reads_through_a_role_of_its_own(synth: Synth) -> None:
    resources = synth.templates["Created"]["Resources"]
    (workspace,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Grafana::Workspace"]
    assert {k: workspace[k] for k in ("AccountAccessType", "AuthenticationProviders", "PermissionType", "DataSources")} == {
        "AccountAccessType": "CURRENT_ACCOUNT", "AuthenticationProviders": ["AWS_SSO"],
        "PermissionType": "CUSTOMER_MANAGED", "DataSources": ["PROMETHEUS"]}
    role = resources[workspace["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "grafana.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}


# -- the guardrails stay at zero -----------------------------------------------------------------------------------

def test_cdk_nag_and_the_project_rules_report_nothing_unacknowledged(synth: Synth) -> None:
    report = validation_report(synth.outdir)
    # (a plugin with neither findings nor acknowledgments, here the project's own, is left out of the report)
    assert "AwsSolutions" in {p["pluginName"] for p in report["pluginReports"]}
    assert report_violations(report) == []


def test_cfn_lint_knows_and_passes_the_new_resource_types(synth: Synth) -> None:
    from tests.validators import cfn_lint_findings

    templates = {(name, "scratch"): template for name, template in synth.templates.items()}
    assert cfn_lint_findings(templates, {name: REGION for name in synth.templates}) == []


def test_checkov_fails_no_check(synth: Synth) -> None:
    from tests.validators import CHECKOV, checkov

    if not CHECKOV.exists():
        pytest.fail("checkov is not installed; run 'make setup-checkov' (it installs .venv-checkov)")
    result = checkov(synth.outdir)  # kept by content in .cache/ (tests/validators.py)
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    resources = sum(len(t["Resources"]) for t in synth.templates.values())
    assert sum(r["summary"]["resource_count"] for r in reports) == resources  # every resource was scanned
    failed = [(f["check_id"], f["resource"]) for r in reports for f in r["results"].get("failed_checks", [])]
    assert failed == []



def test_every_role_scopes_each_action_to_what_iam_authorizes_it_on(synth: Synth) -> None:
    from tests.iam_reference import scoping_problems

    # GIVEN both scratch stacks (every add-on role, Grafana's, the gated-model role) WHEN each Allow statement's actions
    # are compared with the resource types the Service Authorization Reference lists for them
    problems = scoping_problems(synth.templates)
    # THEN none is on "*" that takes a resource, none is on an ARN that takes none (elasticloadbalancing:SetWebAcl and
    # shield:CreateProtection were, so WAF and Shield on the controller's ALBs were denied), nothing else is off
    assert problems == []
