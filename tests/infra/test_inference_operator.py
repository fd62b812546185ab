"""InferenceOperator: the inference add-on with its prerequisites, roles, TLS bucket, order and version gate."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_dpd.catalogue.operator import OPERATOR_RELEASES, PREREQUISITE_ADDONS
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.operator import ModelBucket
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.inference_operator import InferenceOperator, ObservabilityOptions
from tests.iam_reference import resource_types


def _joined(value: Any) -> str:
    """Render an Fn::Join with its tokens as <LogicalId.Attr> / <Ref>, to read JSON built from tokens."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_joined(part) for part in value["Fn::Join"][1])
    if "Fn::GetAtt" in value:
        return f"<{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}>"
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::Select" in value:
        return "<issuer>"
    raise AssertionError(f"unexpected token {value}")


@pytest.fixture(scope="module")
def dev_platform_resources(synthesized) -> dict[str, dict[str, Any]]:
    return synthesized.template("dev", "platform")["Resources"]


def _addons(resources: dict[str, dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {v["Properties"]["AddonName"]: (k, v) for k, v in resources.items() if v["Type"] == "AWS::EKS::Addon"}


def _role(resources: dict[str, dict[str, Any]], prefix: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, v) for k, v in resources.items() if v["Type"] == "AWS::IAM::Role" and k.startswith(prefix)]
    return found


def _trust_subjects(resources: dict[str, dict[str, Any]], role: dict[str, Any]) -> dict[str, str]:
    """Operator -> rendered JSON of the web-identity conditions (they live in CfnJson resources)."""
    (web,) = [s for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
              if s["Action"] == "sts:AssumeRoleWithWebIdentity"]
    return {op: _joined(resources[ref["Fn::GetAtt"][0]]["Properties"]["Value"]) for op, ref in web["Condition"].items()}


def _policy_statements(resources: dict[str, dict[str, Any]], role_id: str) -> list[dict[str, Any]]:
    return [s for v in resources.values() if v["Type"] == "AWS::IAM::Policy"
            and {"Ref": role_id} in v["Properties"]["Roles"] for s in v["Properties"]["PolicyDocument"]["Statement"]]


def test_inference_addon_is_the_catalogue_version_of_the_configured_operator(dev_platform_resources) -> None:
    _, addon = _addons(dev_platform_resources)["amazon-sagemaker-hyperpod-inference"]
    assert addon["Properties"]["AddonVersion"] == OPERATOR_RELEASES["3.4"].addon_version == "v1.5.0-eksbuild.1"
    assert addon["Properties"]["ResolveConflicts"] == "OVERWRITE"


@pytest.mark.parametrize("prerequisite", PREREQUISITE_ADDONS, ids=lambda p: p.name)
def test_prerequisite_addon_is_installed_at_or_above_its_minimum(dev_platform_resources, prerequisite) -> None:
    _, addon = _addons(dev_platform_resources)[prerequisite.name]
    assert addon["Properties"]["AddonVersion"] == prerequisite.pinned
    if prerequisite.service_account:
        role_id = addon["Properties"]["ServiceAccountRoleArn"]["Fn::GetAtt"][0]
        subjects = _trust_subjects(dev_platform_resources, dev_platform_resources[role_id])
        assert f'"<issuer>:sub":"system:serviceaccount:{prerequisite.service_account}"' in subjects["StringEquals"]
        assert '"<issuer>:aud":"sts.amazonaws.com"' in subjects["StringEquals"]
    else:
        assert "ServiceAccountRoleArn" not in addon["Properties"]


def test_configuration_values_name_every_role_bucket_and_the_cluster(dev_platform_resources) -> None:
    _, addon = _addons(dev_platform_resources)["amazon-sagemaker-hyperpod-inference"]
    config = json.loads(_joined(addon["Properties"]["ConfigurationValues"]))
    execution = _role(dev_platform_resources, "InferenceOperatorExecutionRole")[0]
    alb = _role(dev_platform_resources, "InferenceOperatorLoadBalancerControllerRole")[0]
    keda = _role(dev_platform_resources, "InferenceOperatorKedaRole")[0]
    bucket = next(k for k, v in dev_platform_resources.items() if v["Type"] == "AWS::S3::Bucket" and k.startswith("InferenceOperatorTlsBucket"))
    hyperpod = next(k for k, v in dev_platform_resources.items() if v["Type"] == "AWS::SageMaker::Cluster")
    assert config == {
        "executionRoleArn": f"<{execution}.Arn>",
        "tlsCertificateS3Bucket": f"<{bucket}>",
        "hyperpodClusterArn": f"<{hyperpod}.ClusterArn>",
        "alb": {"enabled": True, "serviceAccount": {"create": True, "roleArn": f"<{alb}.Arn>"}},
        "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True, "roleArn": f"<{keda}.Arn>"}}}},
    }


def test_order_is_prerequisites_then_hyperpod_then_inference_addon(dev_platform_resources) -> None:
    addons = _addons(dev_platform_resources)
    hyperpod_id, hyperpod = next((k, v) for k, v in dev_platform_resources.items() if v["Type"] == "AWS::SageMaker::Cluster")
    prerequisite_ids = {addons[p.name][0] for p in PREREQUISITE_ADDONS}
    inference_id, inference = addons["amazon-sagemaker-hyperpod-inference"]
    assert prerequisite_ids <= set(hyperpod["DependsOn"])
    assert {hyperpod_id, *prerequisite_ids} <= set(inference["DependsOn"])
    core_ids = {addons[n][0] for n in ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")}
    for prerequisite in prerequisite_ids:
        assert core_ids <= set(dev_platform_resources[prerequisite]["DependsOn"])


def test_execution_role_has_the_required_name_prefix_and_dual_trust(dev_platform_resources) -> None:
    role_id, role = _role(dev_platform_resources, "InferenceOperatorExecutionRole")
    props = role["Properties"]
    assert props["RoleName"] == "SageMakerHyperPodInference-hpdpd-dev"
    statements = props["AssumeRolePolicyDocument"]["Statement"]
    (sagemaker,) = [s for s in statements if s["Principal"] == {"Service": "sagemaker.amazonaws.com"}]
    assert (sagemaker["Action"], sagemaker["Effect"]) == ("sts:AssumeRole", "Allow")
    # SageMaker may assume it for this account's and Region's resources only (the operator's published trust)
    assert sagemaker["Condition"] == {"ArnLike": {"aws:SourceArn": {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-west-2:111111111111:*"]]}}}
    subjects = _trust_subjects(dev_platform_resources, role)
    assert subjects["StringLike"] == ('{"<issuer>:sub":"system:serviceaccount:hyperpod-inference-system:'
                                      'hyperpod-inference-controller-manager"}')
    assert props["ManagedPolicyArns"] == [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                             ":iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess"]]}]
    inline = {s["Sid"]: s for s in _policy_statements(dev_platform_resources, role_id)}
    assert inline["ReadWriteTlsCertificates"]["Condition"] == {"StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}}


@pytest.mark.parametrize(("prefix", "subject"), [
    ("InferenceOperatorLoadBalancerControllerRole", "hyperpod-inference-system:aws-load-balancer-controller"),
    ("InferenceOperatorKedaRole", "hyperpod-inference-system:keda-operator"),
])
def test_controller_roles_trust_exactly_their_service_account(dev_platform_resources, prefix: str, subject: str) -> None:
    _, role = _role(dev_platform_resources, prefix)
    assert _trust_subjects(dev_platform_resources, role)["StringLike"] == f'{{"<issuer>:sub":"system:serviceaccount:{subject}"}}'


def test_keda_reads_metrics_and_the_alb_controller_only_touches_what_it_tagged(dev_platform_resources) -> None:
    keda = {s["Sid"]: s for s in _policy_statements(dev_platform_resources, _role(dev_platform_resources, "InferenceOperatorKedaRole")[0])}
    assert set(keda["ReadCloudWatchMetrics"]["Action"]) == {"cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics",
                                                            "cloudwatch:ListMetrics"}
    assert "workspace/*" in json.dumps(keda["QueryPrometheus"]["Resource"])
    alb = {s["Sid"]: s for s in _policy_statements(dev_platform_resources, _role(dev_platform_resources, "InferenceOperatorLoadBalancerControllerRole")[0])}
    assert alb["ManageOwnLoadBalancers"]["Condition"] == {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}
    assert alb["CreateTaggedLoadBalancers"]["Condition"] == {"Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}}
    # on "*" only reads, and the two writes IAM authorizes on "*" alone (they take no resource type)
    unscoped_writes = {"elasticloadbalancing:SetWebAcl", "shield:CreateProtection"}
    assert all(resource_types(a) == () for a in unscoped_writes)
    for statement in alb.values():
        if statement["Resource"] == "*":
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert all(":Describe" in a or ":List" in a or ":Get" in a or a in unscoped_writes for a in actions), \
                statement["Sid"]


def test_every_arn_the_toolkit_writes_is_partition_aware(synthesized) -> None:
    """Our roles and policies use ${AWS::Partition}; where CDK itself folds the partition into a literal (asset
    buckets, the KMS key's root principal) it does so from the Region, so it still matches the Region's partition."""
    import re

    for env in ("dev", "staging", "prod"):
        resources = synthesized.template(env, "platform")["Resources"]
        ours = {k: v for k, v in resources.items() if v["Type"] in ("AWS::IAM::Role", "AWS::IAM::Policy")
                and k.startswith(("InferenceOperator", "HyperPodExecutionRole", "HyperPodNodePolicy"))}
        assert ours and '"arn:aws:' not in json.dumps(ours), env
        assert set(re.findall(r'"arn:(aws[a-z-]*):', json.dumps(resources))) <= {"aws"}, env


def test_tls_bucket_is_named_for_the_managed_policy_encrypted_and_tls_only(dev_platform_resources, synthesized) -> None:
    (bucket_id,) = [k for k, v in dev_platform_resources.items() if v["Type"] == "AWS::S3::Bucket" and k.startswith("InferenceOperatorTlsBucket")]
    props = dev_platform_resources[bucket_id]["Properties"]
    assert props["BucketName"] == "hyperpod-tls-111111111111-us-west-2"
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert all(props["PublicAccessBlockConfiguration"].values())
    (policy,) = [v for v in dev_platform_resources.values() if v["Type"] == "AWS::S3::BucketPolicy" and v["Properties"]["Bucket"] == {"Ref": bucket_id}]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in policy["Properties"]["PolicyDocument"]["Statement"])
    prod_tls = [v for k, v in synthesized.template("prod", "platform")["Resources"].items()
                if v["Type"] == "AWS::S3::Bucket" and k.startswith("InferenceOperatorTlsBucket")]
    assert prod_tls[0]["DeletionPolicy"] == "Retain"


# -- construct-level validation (raised before anything joins the tree) ----------------------------------------------

@pytest.fixture(scope="module")
def platform_parts(cdk_context):
    """A platform stack of dev (EKS + HyperPod) to attach extra operators to."""
    from hyperpod_dpd.stacks.application import build_app

    app, stages = build_app(environments=["dev"], context=cdk_context)
    return stages["dev"].platform


BASE: dict[str, Any] = {"operator_version": "3.4", "execution_role_name": "SageMakerHyperPodInference-x",
                        "tls_bucket_name": "hyperpod-tls-111111111111-us-west-2"}


@pytest.mark.parametrize(("overrides", "message"), [
    ({"operator_version": "3.1.3", "require_dpd": True},
     r"addon_version: 'v1.2.1-eksbuild.1': DPD endpoints need inference operator 3.2 or newer \(this is 3.1.3\); "
     r"set the add-on to v1.3.0-eksbuild.1 or newer"),
    ({"prerequisite_versions": {"cert-manager": "v1.17.0-eksbuild.1"}},
     r"prerequisite_versions.cert-manager: 'v1.17.0-eksbuild.1': is below the minimum .* \(v1.18.2-eksbuild.2\)"),
    ({"tls_bucket_name": "my-certs"}, r"tls_bucket_name: 'my-certs': must start with 'hyperpod-tls-'"),
    ({"tls_bucket_name": "hyperpod-tls-" + "x" * 60}, r"must be a valid S3 bucket name"),
    ({"execution_role_name": "InferenceRole"}, r"execution_role_name: 'InferenceRole': must start with 'SageMakerHyperPodInference'"),
    ({"model_buckets": [ModelBucket(name="weights", region="eu-west-1")]},
     r"model_buckets\[0\].region: 'eu-west-1': must be the cluster's Region us-west-2"),
    ({"operator_version": "9.9"}, r"operator_version: '9.9': must be a known operator release"),
    ({"observability": ObservabilityOptions(addon_version="v1.0.5-eksbuild.1", prometheus_workspace_arn=(
        "arn:aws:aps:us-west-2:222222222222:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef"))},
     r"ObservabilityDestination.prometheus_workspace_arn: 'arn:aws:aps:us-west-2:222222222222:workspace/ws-0123abcd-"
     r".*: must be a workspace of the stack's account 111111111111"),
    ({"observability": ObservabilityOptions(addon_version="v1.0.5-eksbuild.1", prometheus_workspace_arn=(
        "arn:aws:aps:eu-west-1:111111111111:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef"))},
     r"must be a workspace of the stack's region us-west-2"),
])
def test_bad_input_fails_with_one_line_naming_the_field(platform_parts, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        InferenceOperator(platform_parts, "Extra", eks_cluster=platform_parts.eks, hyperpod_cluster=platform_parts.hyperpod,
                          **{**BASE, **overrides})
    assert len(str(raised.value).splitlines()) == 1
    assert platform_parts.node.try_find_child("Extra") is None


def test_operator_older_than_dpd_is_accepted_without_dpd_endpoints(platform_parts) -> None:
    operator = InferenceOperator(platform_parts, "Colocated", eks_cluster=platform_parts.eks,
                                 hyperpod_cluster=platform_parts.hyperpod, **{**BASE, "operator_version": "3.1.3",
                                 "tls_bucket_name": "hyperpod-tls-colocated"})
    assert operator.addon_version == "v1.2.1-eksbuild.1"


# -- optional parts, through the config ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def with_options(tmp_path_factory, base_configs, cdk_context) -> dict[str, dict[str, Any]]:
    import copy

    import yaml

    from hyperpod_dpd.stacks.application import build_app
    from hyperpod_dpd.stacks.assembly import read_assembly

    data = copy.deepcopy(base_configs["dev"])
    data["operator"] = {"observability": {"enabled": True}, "gated_model_access": True, "model_buckets": [
        {"name": "hpdpd-weights-111111111111-us-west-2", "create": True}, {"name": "shared-model-zoo"}]}
    config_dir = tmp_path_factory.mktemp("config")
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(data))
    outdir = tmp_path_factory.mktemp("out")
    app, _ = build_app(configs=[load_environment("dev", config_dir)], outdir=str(outdir), context=cdk_context)
    app.synth()
    return read_assembly(outdir).template("dev", "platform")["Resources"]


def test_observability_addon_gets_a_pod_identity_role(with_options) -> None:
    addons = _addons(with_options)
    assert addons["amazon-sagemaker-hyperpod-observability"][1]["Properties"]["AddonVersion"] == "v1.0.5-eksbuild.1"
    (association,) = [v["Properties"] for v in with_options.values() if v["Type"] == "AWS::EKS::PodIdentityAssociation"]
    assert (association["Namespace"], association["ServiceAccount"]) == (
        "hyperpod-observability", "hyperpod-observability-operator-otel-collector")
    role = with_options[association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert set(trust["Action"]) == {"sts:AssumeRole", "sts:TagSession"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnEquals"}


def test_observability_writes_to_a_workspace_the_environment_creates(with_options) -> None:
    # GIVEN observability on without an existing workspace WHEN the platform synthesizes
    (workspace_id,) = [k for k, v in with_options.items() if v["Type"] == "AWS::APS::Workspace"]
    _, addon = _addons(with_options)["amazon-sagemaker-hyperpod-observability"]
    config = json.loads(_joined(addon["Properties"]["ConfigurationValues"]))
    # THEN the add-on's endpoint and ARN name that workspace (by id), in the stack's Region
    assert config["ampWorkspace"] == {
        "prometheusEndpoint": f"https://aps-workspaces.us-west-2.<AWS::URLSuffix>/workspaces/<{workspace_id}.WorkspaceId>",
        "arn": f"arn:<AWS::Partition>:aps:us-west-2:111111111111:workspace/<{workspace_id}.WorkspaceId>"}
    assert "amgWorkspace" not in config and "logging" not in config  # both off by default
    assert not [v for v in with_options.values() if v["Type"] == "AWS::Grafana::Workspace"]


def test_gated_model_role_is_passed_to_the_addon(with_options) -> None:
    _, addon = _addons(with_options)["amazon-sagemaker-hyperpod-inference"]
    config = json.loads(_joined(addon["Properties"]["ConfigurationValues"]))
    gated = _role(with_options, "InferenceOperatorGatedModelRole")[0]
    assert config["jumpstartGatedModelDownloadRoleArn"] == f"<{gated}.Arn>"


def test_s3_csi_role_reads_only_the_model_buckets(with_options) -> None:
    role_id, _ = _role(with_options, "InferenceOperatorS3CsiRole")
    statements = {s["Sid"]: s for s in _policy_statements(with_options, role_id)}
    assert set(statements) == {"ListModelBuckets", "ReadModelObjects"}
    assert statements["ReadModelObjects"]["Action"] == "s3:GetObject"
    text = json.dumps(statements)
    assert "shared-model-zoo" in text and "InferenceOperatorModelBucket0" in text
    created = [v for k, v in with_options.items() if v["Type"] == "AWS::S3::Bucket" and k.startswith("InferenceOperatorModelBucket0")]
    assert created[0]["Properties"]["BucketName"] == "hpdpd-weights-111111111111-us-west-2"
