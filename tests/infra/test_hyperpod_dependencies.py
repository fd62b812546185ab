"""HyperPodDependencies: the dependencies chart pinned by digest (checked at deploy for an ECR mirror, at synth for a
local directory), with typed values and allow-lists from the declared groups."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from hyperpod_dpd.catalogue.versions import HYPERPOD_CHART_COMMIT
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.dependencies_chart import directory_digest
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.chart_digest import ACTIONS, RESOURCE_TYPE, RUNTIME
from hyperpod_dpd.infra.handlers.chart_digest import index as digest_handler
from hyperpod_dpd.infra.hyperpod_dependencies import DependencyComponents, HyperPodDependencies
from tests.paths import FIXTURE_CONFIG_DIR

CHART_DIR = Path(__file__).resolve().parents[2] / "infra" / "charts" / "hyperpod-helm-chart"
MIRROR = "oci://222222222222.dkr.ecr.us-east-1.amazonaws.com/hyperpod-dpd"
DIGEST = "sha256:" + "3c" * 32


def _chart(template: dict[str, Any]) -> dict[str, Any]:
    (chart,) = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"]
    return chart


@pytest.fixture(scope="module")
def dev_chart(synthesized) -> dict[str, Any]:
    return _chart(synthesized.template("dev", "platform"))


def test_chart_comes_from_the_ecr_mirror_at_the_pinned_version_after_its_digest_check(synthesized) -> None:
    # GIVEN dev's chart, mirrored with 'helm push <tgz> <repository>' WHEN dev's platform synthesizes
    configured = load_environment("dev", FIXTURE_CONFIG_DIR).hyperpod.dependencies_chart
    template = synthesized.template("dev", "platform")
    chart_id, chart = next((k, v) for k, v in template["Resources"].items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart")
    # THEN Helm pulls the chart's own reference (where helm push put it) at the version of the pinned Chart.yaml ...
    properties = chart["Properties"]
    assert properties["Repository"] == f"{configured.repository}/hyperpod-helm-chart"
    assert properties["Version"] == yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["version"]
    assert (properties["Release"], properties["Namespace"]) == ("dependencies", "kube-system")
    # ... only once the check has found the recorded digest under that tag in that ECR repository
    (check_id, check), = [(k, v) for k, v in template["Resources"].items() if v["Type"] == RESOURCE_TYPE]
    assert check_id in chart["DependsOn"]
    assert {k: check["Properties"][k] for k in ("RegistryId", "Region", "RepositoryName", "Tag", "Digest")} == {
        "RegistryId": "111111111111", "Region": "us-west-2", "RepositoryName": "hyperpod-dpd/hyperpod-helm-chart",
        "Tag": properties["Version"], "Digest": configured.digest}
    assert check["Properties"]["SourceCommit"] == HYPERPOD_CHART_COMMIT


def test_region_is_set_explicitly_for_the_health_agent(dev_chart: dict[str, Any]) -> None:
    values = json.loads(dev_chart["Values"])
    assert values["global"]["region"] == "us-west-2"
    assert values["health-monitoring-agent"] == {"enabled": True, "region": "us-west-2"}
    assert values["deep-health-check"]["enabled"] is True


def test_device_plugin_allow_lists_are_the_declared_gpu_types(synthesized) -> None:
    # GIVEN staging (p5en prefill and decode) WHEN its chart values are read
    values = json.loads(_chart(synthesized.template("staging", "platform"))["Values"])
    nvidia = values["nvidia-device-plugin"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # THEN both device plugins target exactly the GPU types of the instance groups and tolerate the health taint
    assert nvidia["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["ml.p5en.48xlarge"]
    assert values["aws-efa-k8s-device-plugin"]["supportedInstanceLabels"]["values"] == ["ml.p5en.48xlarge"]
    for plugin in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
        assert {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal", "value": "Unschedulable",
                "effect": "NoSchedule"} in values[plugin]["tolerations"]


def test_every_value_key_exists_in_the_pinned_chart() -> None:
    """Helm ignores a misspelt key; check each key we set against the chart's own values.yaml."""
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    subcharts = {d["name"] for d in yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["dependencies"]}
    values = HyperPodDependencies.chart_values("us-west-2", ["ml.p5.48xlarge"], DependencyComponents())

    def walk(ours: dict[str, Any], theirs: dict[str, Any], path: str) -> None:
        for key, value in ours.items():
            here = f"{path}.{key}" if path else key
            if key not in theirs:
                top = here.split(".")[0]
                assert top in subcharts and here.count(".") >= 1, f"{here} is not a value of the chart"
                continue
            if isinstance(value, dict) and isinstance(theirs[key], dict):
                walk(value, theirs[key], here)

    walk(values, defaults, "")


def test_components_not_needed_for_inference_are_off_and_add_ons_are_not_duplicated(dev_chart: dict[str, Any]) -> None:
    values = json.loads(dev_chart["Values"])
    assert values["trainingOperators"]["enabled"] is False
    assert values["mpi-operator"]["enabled"] is False
    assert values["cert-manager"]["enabled"] is False  # installed as an EKS add-on
    assert values["inferenceOperators"]["enabled"] is False  # installed as an EKS add-on


@pytest.fixture(scope="module")
def cluster() -> eks.Cluster:
    stack = cdk.Stack(cdk.App(), "Chart", env=cdk.Environment(account="111111111111", region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"], nat_gateways=1)
    return eks.Cluster(stack, "Eks", vpc=vpc, version=eks.KubernetesVersion.of("1.35"),
                       default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0,
                       kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "L")))


def _local_chart(directory: Path) -> Path:
    directory.mkdir()
    (directory / "Chart.yaml").write_text("apiVersion: v2\nname: hyperpod-helm-chart\nversion: 0.1.0\n")
    (directory / "charts").mkdir()
    (directory / "charts" / "nvidia-device-plugin-0.16.1.tgz").write_bytes(b"fetched by helm dependency update")
    return directory


def test_local_chart_directory_is_shipped_as_an_asset_when_it_is_the_recorded_one(cluster: eks.Cluster,
                                                                                   tmp_path: Path) -> None:
    # GIVEN a local chart checkout and the digest recorded when it was reviewed
    chart = _local_chart(tmp_path / "chart")
    # WHEN the dependencies come from it
    deps = HyperPodDependencies(cluster, "LocalDeps", cluster=cluster, region="us-west-2",
                                gpu_instance_types=["ml.p5.48xlarge"], local_path=chart, digest=directory_digest(chart))
    # THEN the chart is an S3 asset, not a repository, and nothing is checked at deploy (it was checked here)
    assert deps.node.try_find_child("ChartAsset") is not None and deps.digest_check is None
    template = Template.from_stack(cdk.Stack.of(cluster))
    charts = template.find_resources("Custom::AWSCDK-EKS-HelmChart")
    local = [c for c in charts.values() if "ChartAssetURL" in c["Properties"]]
    assert len(local) == 1 and "Repository" not in local[0]["Properties"]


def test_a_local_chart_that_changed_since_its_digest_was_recorded_is_refused(cluster: eks.Cluster,
                                                                              tmp_path: Path) -> None:
    # GIVEN a reviewed chart directory, then one byte of a fetched sub-chart changed
    chart = _local_chart(tmp_path / "chart")
    recorded = directory_digest(chart)
    (chart / "charts" / "nvidia-device-plugin-0.16.1.tgz").write_bytes(b"fetched by helm dependency update!")
    # WHEN it is used with the recorded digest THEN synthesis stops, naming both digests, before anything is made
    with pytest.raises(ConfigError, match=rf"HyperPodDependencies.digest: '{recorded}': .* hashes to "
                                          rf"{directory_digest(chart)}"):
        HyperPodDependencies(cluster, "Changed", cluster=cluster, region="us-west-2",
                             gpu_instance_types=["ml.p5.48xlarge"], local_path=chart, digest=recorded)
    assert cluster.node.try_find_child("Changed") is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, r"HyperPodDependencies: \[\]: pass exactly one of 'repository' or 'local_path'"),
    ({"repository": "https://example.com/charts", "digest": DIGEST},
     "repository: 'https://example.com/charts': must be an ECR private registry"),
    ({"repository": "oci://r.example.com/x", "digest": DIGEST}, "repository: 'oci://r.example.com/x': must be an ECR"),
    ({"repository": MIRROR}, "HyperPodDependencies.digest: null: must be the chart's sha256:<64 hex> digest"),
    ({"repository": MIRROR, "digest": "sha256:abc"}, "HyperPodDependencies.digest: 'sha256:abc': must be"),
    ({"local_path": Path("/nonexistent/chart"), "digest": DIGEST}, "local_path: '/nonexistent/chart': .*cannot be read"),
    ({"repository": MIRROR, "digest": DIGEST, "gpu_instance_types": ["ml.m5.large"]},
     "must list at least one GPU instance type"),
])
def test_bad_props_are_rejected_before_anything_is_made(cluster: eks.Cluster, kwargs: dict[str, Any], message: str) -> None:
    props = {"cluster": cluster, "region": "us-west-2", "gpu_instance_types": ["ml.p5.48xlarge"], **kwargs}
    with pytest.raises(ConfigError, match=message):
        HyperPodDependencies(cluster, "Bad", **props)
    assert cluster.node.try_find_child("Bad") is None


def test_device_plugins_tolerate_the_taints_of_the_gpu_groups() -> None:
    from hyperpod_dpd.infra.hyperpod_dependencies import DependencyComponents, HyperPodDependencies

    # GIVEN GPU groups tainted so that only GPU work lands on them
    values = HyperPodDependencies.chart_values("us-west-2", ["ml.p5.48xlarge"], DependencyComponents(),
                                               [("hyperpod-dpd/gpu", "NoSchedule"), ("soft", "PreferNoSchedule")])
    expected = {"key": "hyperpod-dpd/gpu", "operator": "Exists", "effect": "NoSchedule"}
    # THEN both device plugins still schedule there (else no nvidia.com/gpu or EFA device is advertised)
    assert expected in values["nvidia-device-plugin"]["tolerations"]
    assert expected in values["aws-efa-k8s-device-plugin"]["tolerations"]
    # AND a soft taint needs no toleration
    assert all(t["key"] != "soft" for t in values["nvidia-device-plugin"]["tolerations"])


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Both sources on an EKS cluster as the platform makes it, synthesized once with every guardrail applied."""
    from hyperpod_dpd.config import CreateVpc
    from hyperpod_dpd.infra import EfaNetwork, HyperPodEksCluster, apply_guardrails
    from hyperpod_dpd.infra.feature_flags import FEATURE_FLAGS

    outdir = tmp_path_factory.mktemp("guarded")
    app = cdk.App(outdir=str(outdir), context={
        **FEATURE_FLAGS, "@aws-cdk/core:enablePartitionLiterals": True,
        "availability-zones:account=111111111111:region=us-west-2": ["us-west-2a", "us-west-2b"]})
    sources = {"LocalChart": {"local_path": CHART_DIR, "digest": directory_digest(CHART_DIR)},
               "MirroredChart": {"repository": MIRROR, "digest": DIGEST}}
    for name, source in sources.items():
        stack = cdk.Stack(app, name, env=cdk.Environment(account="111111111111", region="us-west-2"))
        network = EfaNetwork(stack, "Network", gpu_availability_zone="us-west-2a",
                             create=CreateVpc(availability_zones=("us-west-2a", "us-west-2b")))
        eks_cluster = HyperPodEksCluster(stack, "Eks", vpc=network.vpc, subnets=network.eks_subnets, cluster_name="c",
                                         version="1.34", security_group=network.efa_security_group,
                                         public_access_cidrs=["198.51.100.0/24"])
        HyperPodDependencies(stack, "Deps", cluster=eks_cluster.cluster, region="us-west-2",
                             gpu_instance_types=["ml.p5.48xlarge"], **source)
    apply_guardrails(app)
    # WHEN they synthesize THEN the only findings (the asset grant's) are acknowledged with reasons (else synth raises)
    app.synth()
    return {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in sources}


def test_both_sources_pass_the_guardrails(guarded: dict[str, dict[str, Any]]) -> None:
    # THEN both templates were written, the local one without a deploy-time check
    assert not [r for r in guarded["LocalChart"]["Resources"].values() if r["Type"] == RESOURCE_TYPE]
    assert len([r for r in guarded["MirroredChart"]["Resources"].values() if r["Type"] == RESOURCE_TYPE]) == 1


def test_the_digest_check_may_only_describe_the_chart_repository(guarded: dict[str, dict[str, Any]]) -> None:
    resources = guarded["MirroredChart"]["Resources"]
    (check,) = [r for r in resources.values() if r["Type"] == RESOURCE_TYPE]
    function_id = check["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    function = resources[function_id]["Properties"]
    role_id = function["Role"]["Fn::GetAtt"][0]
    statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in
                  r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    # THEN the check's role may describe the chart's repository in the mirror's account and Region, and write its logs
    ecr = [s for s in statements if any(a.startswith("ecr:") for a in s["Action"])]
    assert ecr == [{"Sid": "DescribeTheChartRepository", "Effect": "Allow", "Action": sorted(ACTIONS),
                    "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                   ":ecr:us-east-1:222222222222:repository/hyperpod-dpd/"
                                                   "hyperpod-helm-chart"]]}}]
    assert all(a.startswith(("ecr:Describe", "logs:")) for s in statements for a in s["Action"])
    # AND the function is the handler whose properties the resource carries
    assert function["Runtime"] == RUNTIME.name and function["Handler"] == "index.handler"
    assert set(digest_handler.PROPERTIES) <= set(check["Properties"])


def test_any_change_to_the_chart_checks_the_digest_again(cluster: eks.Cluster) -> None:
    # GIVEN the same mirror with values for other GPU types (an update of the Helm release)
    first = HyperPodDependencies(cluster, "First", cluster=cluster, region="us-west-2",
                                 gpu_instance_types=["ml.p5.48xlarge"], repository=MIRROR, digest=DIGEST)
    second = HyperPodDependencies(cluster, "Second", cluster=cluster, region="us-west-2",
                                  gpu_instance_types=["ml.p5en.48xlarge"], repository=MIRROR, digest=DIGEST)
    # THEN the checks' properties differ too, so CloudFormation updates the check (which runs it) before Helm runs
    assert first.digest_check is not None and second.digest_check is not None
    assert first.digest_check.properties["ChartFingerprint"] != second.digest_check.properties["ChartFingerprint"]
    assert {k: v for k, v in first.digest_check.properties.items() if k != "ChartFingerprint"} == \
        {k: v for k, v in second.digest_check.properties.items() if k != "ChartFingerprint"}
