"""HyperPod rules: recovery, GPU health checks, the closed EFA group, a non-admin execution role."""

from __future__ import annotations

import pytest

from tests.infra.guardrails.conftest import first, run

HP_RULES = ("HPDPD-HP1", "HPDPD-HP2", "HPDPD-HP3", "HPDPD-HP4")


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_environment_is_compliant(view, env: str) -> None:
    stage = view(env)
    assert [f for rule in HP_RULES for f in run(rule, stage)] == []


def test_manual_node_recovery_fires_hp1(view) -> None:
    stage = view("dev")
    first(stage, "AWS::SageMaker::Cluster")["Properties"]["NodeRecovery"] = "None"
    (finding,) = run("HPDPD-HP1", stage)
    assert finding.detail == "is 'None'"


def test_gpu_group_without_connectivity_check_fires_hp2_but_cpu_groups_do_not(view) -> None:
    stage = view("dev")
    groups = first(stage, "AWS::SageMaker::Cluster")["Properties"]["InstanceGroups"]
    groups[1]["OnStartDeepHealthChecks"] = ["InstanceStress"]
    (finding,) = run("HPDPD-HP2", stage)
    assert finding.location == "Properties.InstanceGroups[1].OnStartDeepHealthChecks"
    assert "['InstanceConnectivity']" in finding.detail and groups[0]["InstanceType"].startswith("ml.m")


def test_ingress_from_a_cidr_into_the_efa_group_fires_hp3(view) -> None:
    # GIVEN an extra ingress rule from the VPC CIDR into the EFA group (in the network stack, across stacks)
    stage = view("dev")
    network = stage.templates["dev/network"]
    group_id = next(k for k, v in network["Resources"].items() if k.startswith("NetworkEfaSecurityGroup")
                    and v["Type"] == "AWS::EC2::SecurityGroup")
    network["Resources"]["Leak"] = {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {
        "GroupId": {"Fn::GetAtt": [group_id, "GroupId"]}, "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
        "CidrIp": "10.0.0.0/8"}}
    # THEN the rule resolves HyperPod's cross-stack reference to that group and reports the leak
    (finding,) = run("HPDPD-HP3", stage)
    assert finding.resource.logical_id == "Leak"


def test_ingress_from_another_group_fires_hp3(view) -> None:
    stage = view("dev")
    network = stage.templates["dev/network"]
    group_id = next(k for k, v in network["Resources"].items() if k.startswith("NetworkEfaSecurityGroup")
                    and v["Type"] == "AWS::EC2::SecurityGroup")
    network["Resources"]["Other"] = {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "x"}}
    network["Resources"]["FromOther"] = {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {
        "GroupId": {"Fn::GetAtt": [group_id, "GroupId"]}, "IpProtocol": "-1",
        "SourceSecurityGroupId": {"Fn::GetAtt": ["Other", "GroupId"]}}}
    assert [f.resource.logical_id for f in run("HPDPD-HP3", stage)] == ["FromOther"]


@pytest.mark.parametrize("mutation", ["managed", "inline"])
def test_admin_execution_role_fires_hp4(view, mutation: str) -> None:
    stage = view("dev")
    platform = stage.templates["dev/platform"]["Resources"]
    role_id = next(k for k in platform if k.startswith("HyperPodExecutionRole") and platform[k]["Type"] == "AWS::IAM::Role")
    if mutation == "managed":
        platform[role_id]["Properties"]["ManagedPolicyArns"].append(
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AdministratorAccess"]]})
    else:
        policy = next(v for k, v in platform.items() if k.startswith("HyperPodNodePolicy"))
        policy["Properties"]["PolicyDocument"]["Statement"].append({"Effect": "Allow", "Action": "iam:*", "Resource": "*"})
    findings = run("HPDPD-HP4", stage)
    assert findings and findings[0].resource.logical_id == role_id
