"""The Inference Gateway's AWS side: the add-on at a gateway build with the controller's IRSA role created first and
passed in its configuration values, and internal load-balancer subnets in two AZs while the GPU subnet is in one.
One small stack per construct, synthesized once for the module, with the fixture environment's operator pins
(tests/fixtures/gateway/gateway.yaml), linted with cfn-lint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from hyperpod_dpd.catalogue.gateway import GATEWAY_MANAGED_POLICY, GATEWAY_SUBJECT
from hyperpod_dpd.config import CreateVpc, InstanceGroup
from hyperpod_dpd.config.eks_existing import ExistingEksCluster
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.efa_network import INTERNAL_ELB_TAG, EfaNetwork
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.inference_operator import InferenceOperator
from tests.validators import cfn_lint_findings

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gateway" / "gateway.yaml"
ENV = cdk.Environment(account="111111111111", region="us-west-2")
EXISTING = ExistingEksCluster(
    cluster_name="shared", version="1.34",
    oidc_provider_arn="arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
    kubectl_role_arn="arn:aws:iam::111111111111:role/eks-kubectl", cluster_security_group_id="sg-0123456789abcdef0")


def _parts(stack: cdk.Stack) -> tuple[HyperPodEksCluster, HyperPodCluster]:
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"],
                                      private_subnet_ids=["subnet-0123456789abcdef0"],
                                      private_subnet_route_table_ids=["rtb-0123456789abcdef0"])
    eks_cluster = HyperPodEksCluster(
        stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="shared", version="1.34",
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "Efa", "sg-0123456789abcdef9"), existing=EXISTING)
    hyperpod = HyperPodCluster(
        stack, "HyperPod", cluster_name="hp", region="us-west-2", eks_cluster_arn=eks_cluster.cluster_arn,
        subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=[eks_cluster.cluster.cluster_security_group_id],
        instance_groups=[InstanceGroup(name="system", role="system", instance_type="ml.m7i.2xlarge", count=1)],
        lifecycle_bucket_name="sagemaker-hp-111111111111-us-west-2", removal_policy=cdk.RemovalPolicy.RETAIN)
    return eks_cluster, hyperpod


@pytest.fixture(scope="module")
def fixture() -> dict[str, Any]:
    return yaml.safe_load(FIXTURE.read_text())


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any], fixture) -> dict[str, dict[str, Any]]:
    # GIVEN one app: the operator with the gateway at the fixture's pins, and the fixture's network
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("gateway")), context=cdk_context)
    stack = cdk.Stack(app, "Operator", env=ENV)
    eks_cluster, hyperpod = _parts(stack)
    operator = fixture["operator"]
    InferenceOperator(stack, "InferenceOperator", eks_cluster=eks_cluster, hyperpod_cluster=hyperpod,
                      operator_version=operator["version"], addon_version=operator["addon_version"],
                      execution_role_name="SageMakerHyperPodInference-hp",
                      tls_bucket_name="hyperpod-tls-111111111111-us-west-2", require_dpd=True, gateway=True)
    network = fixture["network"]
    net_stack = cdk.Stack(app, "Network", env=ENV)
    EfaNetwork(net_stack, "Network", gpu_availability_zone=network["gpu_availability_zone"],
               create=CreateVpc.model_validate(network["create"]))
    assembly = app.synth()  # WHEN it is synthesized once
    return {s.stack_name: s.template for s in assembly.stacks}


def _one(resources: dict[str, Any], kind: str, **properties: Any) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, v) for k, v in resources.items() if v["Type"] == kind
                and all(v["Properties"].get(p) == x for p, x in properties.items())]
    return found


def test_the_addon_is_the_gateway_build_and_depends_on_the_controller_role(templates, fixture) -> None:
    resources = templates["Operator"]["Resources"]
    addon_id, addon = _one(resources, "AWS::EKS::Addon", AddonName="amazon-sagemaker-hyperpod-inference")
    role_id = next(k for k in resources if k.startswith("InferenceOperatorGatewayControllerRole")
                   and resources[k]["Type"] == "AWS::IAM::Role")
    # THEN the add-on is v2.0.0-eksbuild.2 and waits for the role (DependsOn), which it names in its values
    assert addon["Properties"]["AddonVersion"] == fixture["operator"]["addon_version"] == "v2.0.0-eksbuild.2"
    assert role_id in addon["DependsOn"]
    values = json.dumps(addon["Properties"]["ConfigurationValues"])
    assert '\\"inferenceOperator\\":{\\"enabled\\":true}' in values
    assert '\\"inferenceGateway\\":{\\"enabled\\":true,\\"serviceAccount\\":{\\"roleArn\\":\\"' in values
    assert json.dumps({"Fn::GetAtt": [role_id, "Arn"]}) in values
    assert addon_id


def test_the_controller_role_trusts_exactly_its_service_account_with_the_managed_policy(templates) -> None:
    template = Template.from_json(templates["Operator"])
    resources = templates["Operator"]["Resources"]
    role_id, role = next((k, v) for k, v in resources.items() if k.startswith("InferenceOperatorGatewayControllerRole")
                         and v["Type"] == "AWS::IAM::Role")
    assert role["Properties"]["ManagedPolicyArns"] == [{"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{GATEWAY_MANAGED_POLICY}"]]}]
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    (operator, ref), = statement["Condition"].items()
    assert operator == "StringEquals"  # exact: no StringLike wildcard
    trust = resources[ref["Fn::GetAtt"][0]]["Properties"]["Value"]  # CfnJson: the issuer is a token
    text = json.dumps(trust)
    assert f':sub\\":\\"{GATEWAY_SUBJECT}\\"' in text
    assert ':aud\\":\\"sts.amazonaws.com\\"' in text
    template.resource_count_is("AWS::EKS::Addon", 5)  # four prerequisites and the inference add-on


def test_internal_load_balancer_subnets_span_two_zones_and_the_gpu_subnet_one(templates, fixture) -> None:
    resources = templates["Network"]["Resources"]
    subnets = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::Subnet"]
    tagged = [s for s in subnets if {"Key": INTERNAL_ELB_TAG, "Value": "1"} in s.get("Tags", [])]
    gpu = [s for s in subnets if s.get("CidrBlock") == fixture["network"]["create"]["gpu_subnet_cidr"]]
    eks = [s for s in tagged if s not in gpu]
    assert {s["AvailabilityZone"] for s in eks} == {"us-west-2a", "us-west-2b"}
    assert [s["AvailabilityZone"] for s in gpu] == [fixture["network"]["gpu_availability_zone"]]


def test_the_templates_pass_cfn_lint(templates) -> None:
    assert cfn_lint_findings({("gateway", name): t for name, t in templates.items()}, {"gateway": "us-west-2"}) == []


def test_the_gateway_on_an_addon_without_it_fails_in_one_line(cdk_context) -> None:
    stack = cdk.Stack(cdk.App(context=cdk_context), "Old", env=ENV)
    eks_cluster, hyperpod = _parts(stack)
    with pytest.raises(ConfigError) as raised:
        InferenceOperator(stack, "InferenceOperator", eks_cluster=eks_cluster, hyperpod_cluster=hyperpod,
                          operator_version="3.7", execution_role_name="SageMakerHyperPodInference-hp",
                          tls_bucket_name="hyperpod-tls-111111111111-us-west-2", gateway=True)
    assert str(raised.value) == ("InferenceOperator.addon_version: 'v1.8.0-eksbuild.1': has no Inference Gateway: the "
                                 "add-on bundles it from v2.0.0-eksbuild.2")
    assert stack.node.try_find_child("InferenceOperator") is None
