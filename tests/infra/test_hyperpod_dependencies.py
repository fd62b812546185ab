"""HyperPodDependencies: the pinned dependencies chart with typed values and allow-lists from the declared groups."""

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

from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.hyperpod_dependencies import DependencyComponents, HyperPodDependencies

CHART_DIR = Path(__file__).resolve().parents[2] / "infra" / "charts" / "hyperpod-helm-chart"


def _chart(template: dict[str, Any]) -> dict[str, Any]:
    (chart,) = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"]
    return chart


@pytest.fixture(scope="module")
def dev_chart(synthesized) -> dict[str, Any]:
    return _chart(synthesized.template("dev", "platform"))


def test_chart_comes_from_the_oci_mirror_at_the_pinned_version(dev_chart: dict[str, Any]) -> None:
    assert dev_chart["Chart"] == "hyperpod-helm-chart"
    assert dev_chart["Repository"] == "oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/hyperpod-dpd"
    assert dev_chart["Version"] == yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["version"]
    assert (dev_chart["Release"], dev_chart["Namespace"]) == ("dependencies", "kube-system")


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


def test_local_chart_directory_is_shipped_as_an_asset(cluster: eks.Cluster, tmp_path: Path) -> None:
    # GIVEN a local chart checkout
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: hyperpod-helm-chart\nversion: 0.1.0\n")
    # WHEN the dependencies come from it
    deps = HyperPodDependencies(cluster, "LocalDeps", cluster=cluster, region="us-west-2",
                                gpu_instance_types=["ml.p5.48xlarge"], local_path=tmp_path)
    # THEN the chart is an S3 asset, not a repository
    assert deps.node.try_find_child("ChartAsset") is not None
    template = Template.from_stack(cdk.Stack.of(cluster))
    charts = template.find_resources("Custom::AWSCDK-EKS-HelmChart")
    local = [c for c in charts.values() if "ChartAssetURL" in c["Properties"]]
    assert len(local) == 1 and "Repository" not in local[0]["Properties"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, r"HyperPodDependencies: \[\]: pass exactly one of 'repository' or 'local_path'"),
    ({"repository": "https://example.com/charts"}, "repository: 'https://example.com/charts': must be an oci:// registry URL"),
    ({"local_path": Path("/nonexistent/chart")}, "local_path: '/nonexistent/chart': must be a chart directory"),
    ({"repository": "oci://r.example.com/x", "gpu_instance_types": ["ml.m5.large"]}, "must list at least one GPU instance type"),
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


def test_a_local_chart_passes_the_guardrails(tmp_path) -> None:
    from pathlib import Path

    import aws_cdk as cdk

    from hyperpod_dpd.config import CreateVpc
    from hyperpod_dpd.infra import EfaNetwork, HyperPodDependencies, HyperPodEksCluster, apply_guardrails
    from hyperpod_dpd.infra.feature_flags import FEATURE_FLAGS
    from tests.paths import ROOT

    # GIVEN the dependencies chart from a local directory (an asset the kubectl handler downloads)
    app = cdk.App(outdir=str(tmp_path), context={
        **FEATURE_FLAGS, "@aws-cdk/core:enablePartitionLiterals": True,
        "availability-zones:account=111111111111:region=us-west-2": ["us-west-2a", "us-west-2b"]})
    stack = cdk.Stack(app, "LocalChart", env=cdk.Environment(account="111111111111", region="us-west-2"))
    network = EfaNetwork(stack, "Network", gpu_availability_zone="us-west-2a",
                         create=CreateVpc(availability_zones=("us-west-2a", "us-west-2b")))
    eks_cluster = HyperPodEksCluster(stack, "Eks", vpc=network.vpc, subnets=network.eks_subnets, cluster_name="c",
                                     version="1.34", security_group=network.efa_security_group,
                                     public_access_cidrs=["198.51.100.0/24"])
    HyperPodDependencies(stack, "Deps", cluster=eks_cluster.cluster, region="us-west-2",
                         gpu_instance_types=["ml.p5.48xlarge"], local_path=Path(ROOT / "infra/charts/hyperpod-helm-chart"))
    apply_guardrails(app)
    # WHEN it synthesizes THEN the asset grant's findings are acknowledged with reasons, nothing else is found
    app.synth()
