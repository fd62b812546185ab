"""Status: cluster, groups and nodes (moto), add-ons (Stubber), SageMaker endpoints (moto) and IEC state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.stub import Stubber
from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.ops.addons import expected_addons
from hyperpod_dpd.ops.kube import Kubectl
from hyperpod_dpd.ops.status import collect_status

NO_KUBE = Kubectl(kubeconfig=None, binary=None)


def stub_addons(stub: Stubber, env: EnvironmentConfig, overrides: dict[str, tuple[str, str]] | None = None) -> None:
    addons = expected_addons(env)
    stub.add_response("list_addons", {"addons": [a.name for a in addons]}, {"clusterName": env.eks.cluster_name})
    for addon in addons:
        version, status = (overrides or {}).get(addon.name, (addon.configured, "ACTIVE"))
        stub.add_response("describe_addon", {"addon": {"addonName": addon.name, "addonVersion": version,
                                                       "status": status}},
                          {"clusterName": env.eks.cluster_name, "addonName": addon.name})


def create_sagemaker_endpoint(sagemaker: Any, name: str) -> None:
    sagemaker.create_model(ModelName=name, ExecutionRoleArn="arn:aws:iam::123456789012:role/sm",
                           PrimaryContainer={"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:latest"})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "all", "ModelName": name, "InitialInstanceCount": 1, "InstanceType": "ml.g4dn.xlarge"}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


@pytest.fixture
def deployed(env: EnvironmentConfig, clients: ClientFactory, create_hyperpod: Callable[..., None]) -> EnvironmentConfig:
    create_hyperpod(clients.client("sagemaker"), env)
    return env


def test_a_healthy_environment(deployed: EnvironmentConfig, clients: ClientFactory,
                               make_endpoint: Callable[..., Any]) -> None:
    # GIVEN a running cluster, ACTIVE add-ons and an InService SageMaker endpoint, but no kubeconfig
    create_sagemaker_endpoint(clients.client("sagemaker"), "llama-sm")
    endpoint = make_endpoint(name="llama", resource_name="llama-1a2b3c", sagemaker_endpoint_name="llama-sm")
    with Stubber(clients.client("eks")) as eks:
        stub_addons(eks, deployed)
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=(endpoint,))
    data = report.to_json()
    # THEN it is healthy, with groups (current/target), nodes, add-ons and the endpoint in the documented shape
    assert report.healthy and data["healthy"] is True and data["warnings"] == []
    assert data["cluster"]["name"] == "hpdpd-dev" and data["cluster"]["status"] == "InService"
    assert data["cluster"]["instance_groups"] == [
        {"name": "system", "instance_type": "ml.m5.2xlarge", "current": 2, "target": 2},
        {"name": "prefill", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1},
        {"name": "decode", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1}]
    assert [n["status"] for n in data["cluster"]["nodes"]] == ["Running"] * 4
    assert {a["name"] for a in data["addons"]} == {a.name for a in expected_addons(deployed)}
    assert all(a["ok"] and a["status"] == "ACTIVE" for a in data["addons"])
    assert data["endpoints"] == [{
        "name": "llama", "namespace": "default", "resource_name": "llama-1a2b3c", "sagemaker_endpoint": "llama-sm",
        "sagemaker_status": "InService", "sagemaker_failure": None, "iec_state": "unknown (no kubeconfig)",
        "iec_message": ""}]


def test_an_addon_below_its_minimum_or_missing_is_not_ok(deployed: EnvironmentConfig, clients: ClientFactory) -> None:
    with Stubber(clients.client("eks")) as eks:
        eks.add_response("list_addons", {"addons": ["amazon-sagemaker-hyperpod-inference", "kube-proxy"]},
                         {"clusterName": "hpdpd-dev"})
        eks.add_response("describe_addon", {"addon": {"addonName": "amazon-sagemaker-hyperpod-inference",
                                                      "addonVersion": "v1.2.1-eksbuild.1", "status": "ACTIVE"}}, None)
        eks.add_response("describe_addon", {"addon": {"addonName": "kube-proxy", "addonVersion": "v1.35.0-eksbuild.2",
                                                      "status": "ACTIVE"}}, None)
        report = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=())
    rows = {a.name: a for a in report.addons}
    assert not rows["amazon-sagemaker-hyperpod-inference"].ok
    assert rows["amazon-sagemaker-hyperpod-inference"].minimum == "v1.3.0-eksbuild.1"
    assert rows["vpc-cni"].status == "NOT_INSTALLED" and rows["kube-proxy"].ok
    assert not report.healthy


def test_a_failed_cluster_shows_its_failure_message(env: EnvironmentConfig, clients: ClientFactory) -> None:
    with Stubber(clients.client("sagemaker")) as sagemaker, Stubber(clients.client("eks")) as eks:
        sagemaker.add_response("describe_cluster", {
            "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": "Failed", "FailureMessage": "Lifecycle script on_create.sh exited with 1.",
            "InstanceGroups": []}, {"ClusterName": "hpdpd-dev"})
        sagemaker.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []}, {"ClusterName": "hpdpd-dev"})
        stub_addons(eks, env)
        report = collect_status(env, clients, kubectl=NO_KUBE, endpoints=())
    cluster = report.to_json()["cluster"]
    assert cluster["status"] == "Failed" and cluster["failure_message"] == "Lifecycle script on_create.sh exited with 1."
    assert not report.healthy


def test_access_denied_on_addons_is_a_warning_and_the_rest_is_reported(deployed: EnvironmentConfig,
                                                                       clients: ClientFactory,
                                                                       make_endpoint: Callable[..., Any]) -> None:
    with Stubber(clients.client("eks")) as eks:
        eks.add_client_error("list_addons", "AccessDeniedException", "not authorized to perform eks:ListAddons")
        report = collect_status(deployed, clients, kubectl=NO_KUBE,
                                endpoints=(make_endpoint(sagemaker_endpoint_name="gone"),))
    assert report.cluster is not None and report.cluster.status == "InService" and len(report.nodes) == 4
    assert report.addons == ()
    assert report.warnings == ("add-ons: could not read (ListAddons: AccessDeniedException: not authorized to perform "
                               "eks:ListAddons (the caller lacks this permission); needs eks:ListAddons and "
                               "eks:DescribeAddon)",)
    assert report.endpoints[0].sagemaker_status == "NotFound"
    assert not report.healthy


def test_a_cluster_not_created_yet(env: EnvironmentConfig, clients: ClientFactory) -> None:
    with Stubber(clients.client("eks")) as eks:
        eks.add_client_error("list_addons", "ResourceNotFoundException", "No cluster found", http_status_code=404)
        report = collect_status(env, clients, kubectl=NO_KUBE, endpoints=())
    data = report.to_json()
    assert data["cluster"]["status"] == "NotFound" and data["cluster"]["instance_groups"] == []
    assert data["warnings"] == ["add-ons: EKS cluster hpdpd-dev not found"]
