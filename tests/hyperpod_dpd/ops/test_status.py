"""Status: clusters, groups and nodes (moto), add-ons (Stubber), SageMaker endpoints (moto) and IEC state.

Every read is three-way: found, NotFound only on the service's own not-found answer, and Unknown with the reason
for anything else (denied, throttled, unreachable, timed out).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.addons import expected_addons
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.status import collect_status
from tests.hyperpod_dpd.aws_faults import denied_by_iam, timing_out, unreachable
from tests.hyperpod_dpd.moto_clusters import REGION

NO_KUBE = Kube(kubeconfig=None)
DENIED_CLUSTER = ("User: arn:aws:sts::123456789012:assumed-role/deployer/ci is not authorized to perform: "
                  "sagemaker:DescribeCluster on resource: arn:aws:sagemaker:us-west-2:123456789012:cluster/hpdpd-dev "
                  "because no identity-based policy allows the sagemaker:DescribeCluster action")


def stub_addons(stub: Stubber, env: EnvironmentConfig, overrides: dict[str, tuple[str, str]] | None = None) -> None:
    addons = expected_addons(env)
    stub.add_response("list_addons", {"addons": [a.name for a in addons]}, {"clusterName": env.eks.cluster_name})
    for addon in addons:
        version, status = (overrides or {}).get(addon.name, (addon.configured, "ACTIVE"))
        stub.add_response("describe_addon", {"addon": {"addonName": addon.name, "addonVersion": version,
                                                       "status": status}},
                          {"clusterName": env.eks.cluster_name, "addonName": addon.name})


def stub_eks(stub: Stubber, env: EnvironmentConfig, *, addons: bool = True) -> None:
    """An ACTIVE EKS cluster (DescribeCluster) and, with ``addons``, every expected add-on ACTIVE."""
    stub.add_response("describe_cluster", {"cluster": {"name": env.eks.cluster_name, "status": "ACTIVE",
                                                       "version": env.eks.version}},
                      {"name": env.eks.cluster_name})
    if addons:
        stub_addons(stub, env)


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
    # GIVEN a running cluster, an ACTIVE EKS cluster and add-ons, an InService SageMaker endpoint, but no kubeconfig
    create_sagemaker_endpoint(clients.client("sagemaker"), "llama-sm-1a2b3c")  # <base>-<generation>
    endpoint = make_endpoint(name="llama", resource_name="llama-1a2b3c", sagemaker_endpoint_name="llama-sm")
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed)
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=(endpoint,))
    data = report.to_json()
    # THEN it is healthy, with groups (current/target), nodes, add-ons and the endpoint in the documented shape
    assert report.healthy and data["healthy"] is True and data["warnings"] == []
    assert data["cluster"]["name"] == "hpdpd-dev" and data["cluster"]["status"] == "InService"
    assert data["cluster"]["reason"] is None and data["cluster"]["nodes_reason"] is None
    assert data["cluster"]["instance_groups"] == [
        {"name": "system", "instance_type": "ml.m5.2xlarge", "current": 2, "target": 2},
        {"name": "prefill", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1},
        {"name": "decode", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1}]
    assert [n["status"] for n in data["cluster"]["nodes"]] == ["Running"] * 4
    assert data["eks_cluster"] == {"name": "hpdpd-dev", "status": "ACTIVE", "version": "1.35", "reason": None}
    assert {a["name"] for a in data["addons"]} == {a.name for a in expected_addons(deployed)}
    assert all(a["ok"] and a["status"] == "ACTIVE" and a["reason"] is None for a in data["addons"])
    # AND the IEC, not read without a kubeconfig, is Unknown with that reason (not a warning: nothing failed)
    assert data["endpoints"] == [{
        "name": "llama", "namespace": "default", "resource_name": "llama-1a2b3c", "sagemaker_endpoint": "llama-sm-1a2b3c",
        "sagemaker_status": "InService", "sagemaker_failure": None, "iec_state": "Unknown", "iec_message": "",
        "sagemaker_reason": None, "iec_reason": "no kubeconfig"}]


def test_an_addon_below_its_minimum_or_missing_is_not_ok(deployed: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN the inference add-on below its minimum and only kube-proxy besides it
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed, addons=False)
        eks.add_response("list_addons", {"addons": ["amazon-sagemaker-hyperpod-inference", "kube-proxy"]},
                         {"clusterName": "hpdpd-dev"})
        eks.add_response("describe_addon", {"addon": {"addonName": "amazon-sagemaker-hyperpod-inference",
                                                      "addonVersion": "v1.2.1-eksbuild.1", "status": "ACTIVE"}}, None)
        eks.add_response("describe_addon", {"addon": {"addonName": "kube-proxy", "addonVersion": "v1.35.0-eksbuild.2",
                                                      "status": "ACTIVE"}}, None)
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=())
    rows = {a.name: a for a in report.addons}
    # THEN the old one is not ok, and the missing ones are NOT_INSTALLED (they were read: no reason)
    assert not rows["amazon-sagemaker-hyperpod-inference"].ok
    assert rows["amazon-sagemaker-hyperpod-inference"].minimum == "v1.3.0-eksbuild.1"
    assert rows["vpc-cni"].status == "NOT_INSTALLED" and rows["vpc-cni"].reason is None and rows["kube-proxy"].ok
    assert not report.healthy


def test_a_failed_cluster_shows_its_failure_message(env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN a Failed cluster with SageMaker's failure message
    with Stubber(clients.client("sagemaker")) as sagemaker, Stubber(clients.client("eks")) as eks:
        sagemaker.add_response("describe_cluster", {
            "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": "Failed", "FailureMessage": "Lifecycle script on_create.sh exited with 1.",
            "InstanceGroups": []}, {"ClusterName": "hpdpd-dev"})
        sagemaker.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []}, {"ClusterName": "hpdpd-dev"})
        stub_eks(eks, env)
        # WHEN the status is collected
        report = collect_status(env, clients, kubectl=NO_KUBE, endpoints=())
    cluster = report.to_json()["cluster"]
    # THEN it is Failed (read, so no reason) with the message
    assert cluster["status"] == "Failed" and cluster["failure_message"] == "Lifecycle script on_create.sh exited with 1."
    assert cluster["reason"] is None
    assert not report.healthy


def test_access_denied_on_addons_makes_them_unknown_and_the_rest_is_reported(
        deployed: EnvironmentConfig, clients: ClientFactory, make_endpoint: Callable[..., Any]) -> None:
    # GIVEN ListAddons is denied, and the endpoint's SageMaker endpoint does not exist
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed, addons=False)
        eks.add_client_error("list_addons", "AccessDeniedException", "not authorized to perform eks:ListAddons")
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=NO_KUBE,
                                endpoints=(make_endpoint(sagemaker_endpoint_name="gone"),))
    data = report.to_json()
    # THEN the cluster and nodes are still reported
    assert data["cluster"]["status"] == "InService" and len(data["cluster"]["nodes"]) == 4
    # AND every expected add-on is Unknown (never "not installed"), naming the permissions the listing needs
    reason = ("ListAddons: AccessDeniedException: not authorized to perform eks:ListAddons (the caller lacks this "
              "permission); needs eks:ListAddons and eks:DescribeAddon")
    assert [(a["status"], a["ok"], a["reason"]) for a in data["addons"]] == \
        [("Unknown", False, reason)] * len(expected_addons(deployed))
    assert data["warnings"] == [f"add-ons: could not read ({reason})"]
    # AND the SageMaker endpoint that SageMaker says does not exist is NotFound, with no reason
    assert data["endpoints"][0]["sagemaker_status"] == "NotFound" and data["endpoints"][0]["sagemaker_reason"] is None
    assert not report.healthy


def test_nothing_created_yet_is_not_found_everywhere(env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN an empty account (moto): no HyperPod cluster, no EKS cluster
    # WHEN the status is collected
    report = collect_status(env, clients, kubectl=NO_KUBE, endpoints=())
    data = report.to_json()
    # THEN both clusters are NotFound without a reason, and the expected add-ons are not installed
    assert data["cluster"]["status"] == "NotFound" and data["cluster"]["reason"] is None
    assert data["cluster"]["instance_groups"] == [] and data["cluster"]["nodes"] == []
    assert data["eks_cluster"] == {"name": "hpdpd-dev", "status": "NotFound", "version": None, "reason": None}
    assert {a["status"] for a in data["addons"]} == {"NOT_INSTALLED"}
    assert data["warnings"] == ["add-ons: EKS cluster hpdpd-dev not found"]
    assert not report.healthy


def _denied(stub: Stubber) -> None:
    stub.add_client_error("describe_cluster", "AccessDeniedException", DENIED_CLUSTER, http_status_code=400)


def _throttled(stub: Stubber) -> None:
    stub.add_client_error("describe_cluster", "ThrottlingException", "Rate exceeded", http_status_code=400)


def _validation_not_found(stub: Stubber) -> None:
    stub.add_client_error("describe_cluster", "ValidationException", "Cluster hpdpd-dev not found",
                          http_status_code=400)


def _unavailable(stub: Stubber) -> None:
    stub.add_client_error("describe_cluster", "ServiceUnavailable", "Service is unavailable", http_status_code=503)


@pytest.mark.parametrize(("answer", "status", "reason"), [
    (_denied, "Unknown", f"DescribeCluster: AccessDeniedException: {DENIED_CLUSTER} (the caller lacks this "
                         "permission); needs sagemaker:DescribeCluster"),
    (_throttled, "Unknown", "DescribeCluster: ThrottlingException: Rate exceeded (throttled; retry later or raise "
                            "AWS_MAX_ATTEMPTS)"),
    (_unavailable, "Unknown", "DescribeCluster: ServiceUnavailable: Service is unavailable"),
    (_validation_not_found, "NotFound", None),
], ids=["denied", "throttled", "5xx", "validation-not-found"])
def test_stubbed_hyperpod_answers(env: EnvironmentConfig, clients: ClientFactory, answer: Callable[[Stubber], None],
                                  status: str, reason: str | None) -> None:
    # GIVEN SageMaker answers DescribeCluster with a denial, throttling, a 5xx, or its own "not found"
    with Stubber(clients.client("sagemaker")) as sagemaker, Stubber(clients.client("eks")) as eks:
        answer(sagemaker)
        stub_eks(eks, env)
        # WHEN the status is collected
        report = collect_status(env, clients, kubectl=NO_KUBE, endpoints=())
    data = report.to_json()
    # THEN only the service's own not-found answer is NotFound; the rest are Unknown with the one-line reason
    assert data["cluster"]["status"] == status and data["cluster"]["reason"] == reason
    assert data["warnings"] == ([f"HyperPod cluster hpdpd-dev: could not read ({reason})"] if reason else [])
    assert data["cluster"]["nodes_reason"] == reason  # the nodes were not listed, for the same reason
    assert data["eks_cluster"]["status"] == "ACTIVE" and not report.healthy


def test_an_unreachable_sagemaker_is_unknown_not_absent(env: EnvironmentConfig, clients: ClientFactory,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the SageMaker endpoint URL refuses connections (botocore raises EndpointConnectionError)
    with unreachable(monkeypatch, "sagemaker") as url, Stubber(clients.client("eks")) as eks:
        stub_eks(eks, env)
        # WHEN the status is collected
        report = collect_status(env, clients, kubectl=NO_KUBE, endpoints=())
    cluster = report.to_json()["cluster"]
    # THEN the cluster is Unknown, with the connection problem as the reason
    assert cluster["status"] == "Unknown"
    assert cluster["reason"] == (f'cannot reach AWS: Could not connect to the endpoint URL: "{url}/" (check the '
                                 "network, AWS_ENDPOINT_URL and the Region)")
    assert report.warnings == (f"HyperPod cluster hpdpd-dev: could not read ({cluster['reason']})",)


def test_a_timed_out_read_is_unknown(deployed: EnvironmentConfig, clients: ClientFactory,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the cluster exists but DescribeCluster times out (one attempt)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    timed_out = ClientFactory(region=REGION)
    timing_out(timed_out.client("sagemaker"), "DescribeCluster")
    with Stubber(timed_out.client("eks")) as eks:
        stub_eks(eks, deployed)
        # WHEN the status is collected
        report = collect_status(deployed, timed_out, kubectl=NO_KUBE, endpoints=())
    # THEN it is Unknown with the timeout, not NotFound
    assert report.cluster_status == "Unknown"
    assert report.hyperpod.reason.startswith("cannot reach AWS: Read timeout on endpoint URL: ")


def test_moto_denying_describe_cluster_is_unknown(deployed: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch,
                                                  make_endpoint: Callable[..., Any]) -> None:
    # GIVEN (moto, IAM enforced) a caller allowed everything in SageMaker but DescribeCluster and DescribeEndpoint
    with denied_by_iam(monkeypatch, allow=["sagemaker:ListClusterNodes"]) as user:
        clients = ClientFactory(region=REGION)
        with Stubber(clients.client("eks")) as eks:
            stub_eks(eks, deployed)
            # WHEN the status is collected
            report = collect_status(deployed, clients, kubectl=NO_KUBE,
                                    endpoints=(make_endpoint(sagemaker_endpoint_name="llama-sm"),))
    data = report.to_json()
    # THEN the existing cluster is Unknown (not NotFound), and the reason names the permission and the caller
    assert data["cluster"]["status"] == "Unknown"
    assert data["cluster"]["reason"].endswith("; needs sagemaker:DescribeCluster") and user in data["cluster"]["reason"]
    assert data["endpoints"][0]["sagemaker_status"] == "Unknown"
    assert data["endpoints"][0]["sagemaker_reason"].endswith("; needs sagemaker:DescribeEndpoint")
    assert len(data["warnings"]) == 2 and not report.healthy


def test_nodes_that_cannot_be_listed_are_unknown(deployed: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN the cluster can be described (moto's answer, replayed) but ListClusterNodes is denied
    sagemaker = clients.client("sagemaker")
    found = sagemaker.describe_cluster(ClusterName="hpdpd-dev")
    with Stubber(sagemaker) as stub, Stubber(clients.client("eks")) as eks:
        stub.add_response("describe_cluster", {k: v for k, v in found.items() if k != "ResponseMetadata"}, None)
        stub.add_client_error("list_cluster_nodes", "AccessDeniedException", "no", http_status_code=400)
        stub_eks(eks, deployed)
        # WHEN the status is collected
        data = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=()).to_json()
    # THEN the cluster is InService, and its nodes are unknown (an empty list, with the reason beside it)
    assert data["cluster"]["status"] == "InService" and data["cluster"]["nodes"] == []
    assert data["cluster"]["nodes_reason"] == ("ListClusterNodes: AccessDeniedException: no (the caller lacks this "
                                               "permission); needs sagemaker:ListClusterNodes")
    assert data["healthy"] is False


def test_an_eks_cluster_that_cannot_be_described_is_unknown(deployed: EnvironmentConfig,
                                                            clients: ClientFactory) -> None:
    # GIVEN eks:DescribeCluster is denied, but the add-ons can be listed
    with Stubber(clients.client("eks")) as eks:
        eks.add_client_error("describe_cluster", "AccessDeniedException", "not authorized", http_status_code=403)
        stub_addons(eks, deployed)
        # WHEN the status is collected
        data = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=()).to_json()
    # THEN the EKS cluster is Unknown naming eks:DescribeCluster, and the add-ons are still reported
    assert data["eks_cluster"]["status"] == "Unknown"
    assert data["eks_cluster"]["reason"] == ("DescribeCluster: AccessDeniedException: not authorized (the caller lacks "
                                             "this permission); needs eks:DescribeCluster")
    assert all(a["status"] == "ACTIVE" for a in data["addons"]) and data["healthy"] is False


def test_an_unreachable_eks_makes_the_cluster_and_addons_unknown(deployed: EnvironmentConfig, clients: ClientFactory,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the EKS endpoint URL refuses connections, while SageMaker (moto) answers
    with unreachable(monkeypatch, "eks") as url:
        # WHEN the status is collected
        data = collect_status(deployed, clients, kubectl=NO_KUBE, endpoints=()).to_json()
    # THEN the HyperPod cluster is reported, and the EKS cluster and every add-on are Unknown with the URL they missed
    assert data["cluster"]["status"] == "InService"
    assert data["eks_cluster"]["status"] == "Unknown"
    assert data["eks_cluster"]["reason"] == (f'cannot reach AWS: Could not connect to the endpoint URL: '
                                             f'"{url}/clusters/hpdpd-dev" (check the network, AWS_ENDPOINT_URL and '
                                             "the Region)")
    assert {(a["status"], a["ok"]) for a in data["addons"]} == {("Unknown", False)}
    addons_url = data["eks_cluster"]["reason"].replace("/clusters/hpdpd-dev", "/clusters/hpdpd-dev/addons")
    assert {a["reason"] for a in data["addons"]} == {addons_url}


IEC_PATH = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs/llama"
FORBIDDEN = ('inferenceendpointconfigs.inference.sagemaker.aws.amazon.com "llama" is forbidden: User "ci" cannot get '
             'resource "inferenceendpointconfigs"')


@pytest.mark.parametrize(("setup", "state", "reason"), [
    ({"iec": {"status": {"state": "DeploymentComplete"}}}, "DeploymentComplete", None),
    ({}, "NotFound", None),
    ({"status": 403, "message": FORBIDDEN}, "Unknown",
     f"GET {IEC_PATH}: 403 Forbidden: {FORBIDDEN}; needs get on "
     "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com in namespace default"),
    ({"status": 503, "message": "etcd leader changed"}, "Unknown",
     f"GET {IEC_PATH}: 503 Service Unavailable: etcd leader changed"),
], ids=["present", "absent", "forbidden", "server-error"])
def test_the_iec_read_is_three_way(deployed: EnvironmentConfig, clients: ClientFactory, fake_kube: Any,
                                   make_endpoint: Callable[..., Any], setup: dict[str, Any], state: str,
                                   reason: str | None) -> None:
    # GIVEN the API server answers the IEC with its state, its own NotFound, or an error
    if "iec" in setup:
        fake_kube.iecs[("default", "llama")] = setup["iec"]
    if "status" in setup:
        fake_kube.fail(IEC_PATH, setup["status"], setup["message"])
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed)
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=fake_kube.client(),
                                endpoints=(make_endpoint(name="llama"),))
    row = report.to_json()["endpoints"][0]
    # THEN only the API server's NotFound is NotFound; errors are Unknown and warned
    assert (row["iec_state"], row["iec_reason"]) == (state, reason)
    warnings = [w for w in report.warnings if w.startswith("endpoint llama")]
    assert warnings == ([f"endpoint llama: could not read the InferenceEndpointConfig ({reason})"] if reason else [])


def test_credentials_the_api_server_rejects_end_the_status(deployed: EnvironmentConfig, clients: ClientFactory,
                                                           fake_kube: Any, make_endpoint: Callable[..., Any]) -> None:
    # GIVEN an API server that refuses the kubeconfig's credentials (401)
    fake_kube.fail(IEC_PATH, 401, "Unauthorized")
    with Stubber(clients.client("eks")) as eks, pytest.raises(HpdpdError) as raised:
        stub_eks(eks, deployed)
        # WHEN the status is collected
        collect_status(deployed, clients, kubectl=fake_kube.client(), endpoints=(make_endpoint(name="llama"),))
    # THEN no part is reported as merely Unknown: the command ends with one line naming the refusal
    assert str(raised.value) == (f"endpoint llama: cannot read the InferenceEndpointConfig: GET {IEC_PATH}: 401 "
                                 "Unauthorized: Unauthorized (the API server refused the credentials; on EKS the "
                                 "caller needs an access entry)")


def test_a_missing_iec_makes_the_endpoint_unhealthy(deployed: EnvironmentConfig, clients: ClientFactory,
                                                     fake_kube: Any, make_endpoint: Callable[..., Any]) -> None:
    # GIVEN an API server without the endpoint's IEC (its own NotFound)
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed)
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=fake_kube.client(), endpoints=(make_endpoint(name="llama"),))
    # THEN the endpoint is NotFound, which is not healthy, though everything else is
    (row,) = report.endpoints
    assert row.iec_state == "NotFound" and row.missing and not row.failed
    assert not report.healthy and report.warnings == ()


def test_an_unreachable_api_server_is_unknown(deployed: EnvironmentConfig, clients: ClientFactory, tmp_path: Path,
                                              make_endpoint: Callable[..., Any]) -> None:
    from tests.fakes.kube_api import FakeKube, serve

    with serve() as gone:
        url = gone.url  # nothing listens there once the block ends
    kube = Kube(kubeconfig=FakeKube(url=url).kubeconfig(tmp_path / "kubeconfig"), timeout_seconds=2)
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed)
        report = collect_status(deployed, clients, kubectl=kube, endpoints=(make_endpoint(name="llama"),))
    row = report.to_json()["endpoints"][0]
    assert row["iec_state"] == "Unknown" and "cannot reach the Kubernetes API server" in row["iec_reason"]


@pytest.mark.parametrize("state", ["DeploymentPending", "DeploymentInProgress", "DeletionInProgress"])
def test_an_endpoint_that_is_not_ready_is_not_healthy(deployed: EnvironmentConfig, clients: ClientFactory,
                                                      fake_kube: Any, make_endpoint: Callable[..., Any],
                                                      state: str) -> None:
    # GIVEN a healthy cluster and add-ons, and the endpoint's IEC still deploying (or being deleted)
    fake_kube.iecs[("default", "llama")] = {"status": {"state": state}}
    with Stubber(clients.client("eks")) as eks:
        stub_eks(eks, deployed)
        # WHEN the status is collected
        report = collect_status(deployed, clients, kubectl=fake_kube.client(), endpoints=(make_endpoint(name="llama"),))
    # THEN the environment is not healthy (hpdpd status exits 1: "something is not ready")
    assert report.endpoints[0].iec_state == state and not report.healthy
