"""The whole preflight: moto for STS, EC2, S3 and SageMaker; Stubber for EKS add-ons and SageMaker quotas."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.ops.addons import expected_addons
from hyperpod_dpd.ops.preflight import alerts_check, run_preflight

CLUSTER_WIDE_QUOTAS = ("Maximum number instances allowed per SageMaker HyperPod cluster",
                       "Total number of instances allowed across SageMaker HyperPod clusters")


def stub_quotas(stub: Stubber, env: EnvironmentConfig, value: float = 8.0) -> None:
    """Every quota preflight reads, applied at ``value``: one per instance type, and the two cluster-wide ones."""
    stub.add_response("list_service_quotas", {"Quotas": [
        *({"QuotaName": f"{g.instance_type} for cluster usage", "QuotaCode": f"L-{i}", "Value": value}
          for i, g in enumerate(env.hyperpod.instance_groups)),
        *({"QuotaName": name, "QuotaCode": f"L-C{i}", "Value": value} for i, name in enumerate(CLUSTER_WIDE_QUOTAS))]},
        {"ServiceCode": "sagemaker"})


def stub_eks(stub: Stubber, env: EnvironmentConfig, *, mode: str = "API_AND_CONFIG_MAP") -> None:
    """An ACTIVE cluster at the configured version with every expected add-on ACTIVE at its pin, in call order."""
    addons = expected_addons(env)
    stub.add_response("describe_cluster", {"cluster": {
        "name": env.eks.cluster_name, "version": env.eks.version, "status": "ACTIVE",
        "accessConfig": {"authenticationMode": mode}}}, {"name": env.eks.cluster_name})
    stub.add_response("list_addons", {"addons": [a.name for a in addons]}, {"clusterName": env.eks.cluster_name})
    for addon in addons:
        stub.add_response("describe_addon", {"addon": {"addonName": addon.name, "addonVersion": addon.configured,
                                                       "status": "ACTIVE"}},
                          {"clusterName": env.eks.cluster_name, "addonName": addon.name})
    for addon in addons:
        stub.add_response("describe_addon_versions", {"addons": [{"addonName": addon.name, "addonVersions": [
            {"addonVersion": addon.configured}]}]}, {"addonName": addon.name, "kubernetesVersion": env.eks.version})


@pytest.fixture
def deployed(env: EnvironmentConfig, clients: ClientFactory, create_hyperpod: Callable[..., None]) -> EnvironmentConfig:
    create_hyperpod(clients.client("sagemaker"), env)
    return env


def test_a_healthy_deployed_environment_passes_every_check(deployed: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN a running HyperPod cluster (moto), its EKS cluster and add-ons and generous quotas (stubbed)
    with Stubber(clients.client("eks")) as eks, Stubber(clients.client("service-quotas")) as quotas:
        stub_eks(eks, deployed)
        stub_quotas(quotas, deployed)
        # WHEN preflight runs
        report = run_preflight(deployed, clients, endpoints=())
        eks.assert_no_pending_responses()
    # THEN every check passes, in the documented order
    names = [c.name for c in report.checks]
    assert report.ok and all(c.status == "pass" for c in report.checks), [c for c in report.checks if c.status != "pass"]
    assert names[:5] == ["credentials", "quota:ml.m7i.2xlarge", "quota:ml.p5.48xlarge", "quota:instances-per-cluster",
                         "quota:instances-all-clusters"]
    assert names[5:8] == ["offering:ml.m7i.2xlarge", "offering:ml.p5.48xlarge", "subnet-ips"]
    assert names[8:10] == ["eks-version", "eks-authentication-mode"]
    assert names[10:19] == [f"addon:{a.name}" for a in expected_addons(deployed)]
    assert names[-1] == "hyperpod-cluster"
    assert "123456789012" in report.checks[0].detail


def test_credentials_for_another_account_stop_the_checks(make_env: Callable[..., EnvironmentConfig],
                                                         clients: ClientFactory) -> None:
    env = make_env(lambda d: d.__setitem__("account", "999999999999"))
    report = run_preflight(env, clients, endpoints=())
    assert not report.ok and [c.name for c in report.checks] == ["credentials"]
    assert "credentials are for account 123456789012" in report.checks[0].detail
    assert "999999999999" in (report.checks[0].fix or "")


def test_clients_of_another_region_or_partition_stop_the_checks(env: EnvironmentConfig, moto: None) -> None:
    # GIVEN dev (us-west-2, partition aws) and clients of us-east-1, where nothing of dev exists
    report = run_preflight(env, ClientFactory(region="us-east-1"), endpoints=())
    # THEN only the credentials row runs, and it fails: "does not exist yet" there says nothing about us-west-2
    assert not report.ok and [(c.name, c.status) for c in report.checks] == [("credentials", "fail")]
    assert "would read Region us-east-1; environment dev is in us-west-2" in report.checks[0].detail
    # AND credentials of the account in another partition fail the same way
    clients = ClientFactory(region="us-west-2")
    with Stubber(clients.client("sts")) as sts:
        sts.add_response("get_caller_identity", {"Account": env.account, "UserId": "AIDA",
                                                 "Arn": f"arn:aws-cn:iam::{env.account}:user/ops"}, {})
        other = run_preflight(env, clients, endpoints=())
    assert [(c.name, c.status) for c in other.checks] == [("credentials", "fail")]
    assert "is not in partition aws" in other.checks[0].detail


def test_access_denied_on_one_call_warns_and_the_other_checks_run(env: EnvironmentConfig, clients: ClientFactory,
                                                                  make_endpoint: Callable[..., Any]) -> None:
    # GIVEN a caller that may not list Service Quotas, no EKS cluster yet, and an endpoint whose model is missing
    with Stubber(clients.client("service-quotas")) as quotas, Stubber(clients.client("eks")) as eks:
        quotas.add_client_error("list_service_quotas", "AccessDeniedException",
                                "User is not authorized to perform: servicequotas:ListServiceQuotas")
        eks.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found", http_status_code=404)
        for addon in expected_addons(env):
            eks.add_response("describe_addon_versions", {"addons": [{"addonName": addon.name, "addonVersions": [
                {"addonVersion": addon.configured}]}]}, {"addonName": addon.name, "kubernetesVersion": env.eks.version})
        # WHEN preflight runs
        report = run_preflight(env, clients, endpoints=(make_endpoint(bucket="models-missing", prefix="llama"),))
    rows = {c.name: c for c in report.checks}
    # THEN the quota rows warn with the permission, and every other check still ran
    assert rows["quota:ml.p5.48xlarge"].status == "warn"
    assert "servicequotas:ListServiceQuotas" in (rows["quota:ml.p5.48xlarge"].fix or "")
    assert rows["offering:ml.p5.48xlarge"].status == "pass"
    assert rows["eks-cluster"].status == "pass" and "does not exist yet" in rows["eks-cluster"].detail
    assert rows["hyperpod-cluster"].status == "pass" and "does not exist yet" in rows["hyperpod-cluster"].detail
    assert rows["model:llama"].status == "fail"
    assert not report.ok  # the missing model fails; the warnings alone would not


def test_a_failed_hyperpod_cluster_fails_with_the_aws_failure_message(env: EnvironmentConfig,
                                                                      clients: ClientFactory) -> None:
    # GIVEN a cluster that failed to create (moto cannot fail a cluster: Stubber), and nothing else readable
    with Stubber(clients.client("sagemaker")) as sagemaker, Stubber(clients.client("service-quotas")) as quotas, \
            Stubber(clients.client("eks")) as eks:
        sagemaker.add_response("describe_cluster", {
            "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc", "ClusterName": "hpdpd-dev",
            "ClusterStatus": "Failed", "FailureMessage": "Insufficient capacity for ml.p5.48xlarge in us-west-2a.",
            "InstanceGroups": [{"InstanceGroupName": "prefill", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 0,
                                "TargetCount": 1}]}, {"ClusterName": "hpdpd-dev"})
        quotas.add_client_error("list_service_quotas", "ThrottlingException", "Rate exceeded")
        eks.add_client_error("describe_cluster", "AccessDeniedException", "denied")
        for _ in expected_addons(env):
            eks.add_client_error("describe_addon_versions", "AccessDeniedException", "denied")
        report = run_preflight(env, clients, endpoints=())
    rows = {c.name: c for c in report.checks}
    # THEN the cluster row fails with AWS's message and the delete-and-redeploy fix; throttling warns
    cluster = rows["hyperpod-cluster"]
    assert cluster.status == "fail"
    assert cluster.detail == "hpdpd-dev is Failed: Insufficient capacity for ml.p5.48xlarge in us-west-2a."
    assert "aws sagemaker delete-cluster --cluster-name hpdpd-dev" in (cluster.fix or "")
    assert rows["quota:ml.p5.48xlarge"].status == "warn" and "throttled" in rows["quota:ml.p5.48xlarge"].detail
    assert rows["eks-cluster"].status == "warn" and "eks:DescribeCluster" in (rows["eks-cluster"].fix or "")
    assert not report.ok


def test_missing_credentials_stop_preflight(env: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch,
                                            aws_credentials: None) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(NoCredentialsError):
        run_preflight(env, ClientFactory(region="us-west-2"), endpoints=())


def test_preflight_reports_the_gpu_headroom_of_each_group(make_env: Callable[..., EnvironmentConfig],
                                                          base_configs: dict[str, Any], clients: ClientFactory,
                                                          create_hyperpod: Callable[..., None]) -> None:
    # GIVEN dev with its endpoint (1 prefill and 1 decode replica of 8 GPUs) and its HyperPod cluster running (moto)
    env = make_env(lambda d: d.__setitem__("endpoints", copy.deepcopy(base_configs["dev"]["endpoints"])))
    create_hyperpod(clients.client("sagemaker"), env)
    with Stubber(clients.client("eks")) as eks, Stubber(clients.client("service-quotas")) as quotas:
        stub_eks(eks, env)
        stub_quotas(quotas, env)
        # WHEN preflight runs for the configured endpoints
        report = run_preflight(env, clients)
    # THEN a headroom row per GPU group comes before the cluster row, with capacity, demand, free and running GPUs
    names = [c.name for c in report.checks]
    assert names[-3:] == ["capacity:prefill", "capacity:decode", "hyperpod-cluster"]
    rows = {c.name: c for c in report.checks}
    assert rows["capacity:prefill"].status == "pass"
    assert rows["capacity:prefill"].detail == (
        "ml.p5.48xlarge count 1: 8 GPUs (1 x 8) at most; the endpoints' maximum replicas need 8 (llama-3-3-70b prefill "
        "1 x 8); 0 free; 1 node(s) running now (8 GPUs)")
    assert rows["capacity:decode"].status == "pass" and "llama-3-3-70b decode 1 x 8" in rows["capacity:decode"].detail


def _with_endpoint(base_configs: dict[str, Any], *, production: bool = False, **alerts: Any) -> Callable[..., None]:
    """dev with its endpoint and these ``alerts``; production with the reasons it runs without the add-on's alerts."""
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"] = copy.deepcopy(base_configs["dev"]["endpoints"])
        data["alerts"] = dict(alerts)
        if production:
            data.update(production=True, removal_policy="retain", termination_protection=True)
            data["alerts"].update(no_slo_alerts_reason="the serving team's Prometheus alerts",
                                  no_log_alarm_reason="the central log platform alarms on the container logs")
    return mutate


def test_preflight_refuses_a_production_environment_whose_alerts_reach_nobody(
        make_env: Callable[..., EnvironmentConfig], base_configs: dict[str, Any], clients: ClientFactory,
        create_hyperpod: Callable[..., None]) -> None:
    # GIVEN production with an endpoint whose only alert subscriber is the shipped placeholder, its cluster running
    env = make_env(_with_endpoint(base_configs, production=True, emails=["oncall@example.com"]))
    create_hyperpod(clients.client("sagemaker"), env)
    with Stubber(clients.client("eks")) as eks, Stubber(clients.client("service-quotas")) as quotas:
        stub_eks(eks, env)
        stub_quotas(quotas, env)
        # WHEN preflight runs (for no endpoint double: the model rows need weights in S3; the alerts row reads the file)
        report = run_preflight(env, clients, endpoints=())
    rows = {c.name: c for c in report.checks}
    # THEN the alerts row fails, naming the address and the file to fix, and the report is not ok
    alerts = rows["alerts"]
    assert (alerts.status, alerts.detail) == ("fail", (
        "every subscriber of the alert topic is on a domain reserved for documentation (RFC 2606): oncall@example.com; "
        "nobody would receive the alerts"))
    assert alerts.fix == "list your on-call address in alerts.emails (or an endpoint in alerts.https_endpoints) of dev.yaml"
    assert not report.ok and [c.name for c in report.checks if c.status == "fail"] == ["alerts"]
    # AND it comes after the model rows, before the headroom rows and the cluster row
    names = [c.name for c in report.checks]
    assert names.index("alerts") < names.index("capacity:prefill") < names.index("hyperpod-cluster")


@pytest.mark.parametrize(("production", "alerts", "status", "detail"), [
    # every subscriber a placeholder on a documentation domain: nobody receives; only production is refused
    (False, {"emails": ["oncall@example.com"], "https_endpoints": ["https://hooks.Example.NET./dpd"]}, "warn",
     "every subscriber of the alert topic is on a domain reserved for documentation (RFC 2606): oncall@example.com, "
     "https://hooks.Example.NET./dpd; nobody would receive the alerts"),
    (True, {"https_endpoints": ["https://pager.test:8443/in"]}, "fail",
     "every subscriber of the alert topic is on a domain reserved for documentation (RFC 2606): "
     "https://pager.test:8443/in; nobody would receive the alerts"),
    # a placeholder beside a real subscriber: someone receives, the placeholder is reported
    (True, {"emails": ["oncall@acme.internal", "me@alerts.example.org"]}, "warn",
     "me@alerts.example.org: on a domain reserved for documentation (RFC 2606), receive nothing; 1 other "
     "subscriber(s) do"),
    # names that merely contain a reserved one are real domains
    (True, {"emails": ["oncall@notexample.com"], "https_endpoints": ["https://example.com.acme.internal/x"]}, "pass",
     "2 subscriber(s) of the alert topic (each confirms its subscription once)"),
    # nobody subscribed: the configuration warns outside production; a reason makes it deliberate
    (False, {}, "warn", "nobody is subscribed to the alert topic: the alerts reach nobody"),
    (True, {"no_subscribers_reason": "the central alerting system subscribes"}, "pass",
     "nobody is subscribed to the alert topic, on purpose: the central alerting system subscribes"),
])
def test_the_alerts_row_says_whether_anyone_receives_the_alerts(
        make_env: Callable[..., EnvironmentConfig], base_configs: dict[str, Any], production: bool,
        alerts: dict[str, Any], status: str, detail: str) -> None:
    # GIVEN an environment with an endpoint and these subscribers WHEN its alerts row is computed (no AWS call)
    check = alerts_check(make_env(_with_endpoint(base_configs, production=production, **alerts)))
    # THEN it says who receives the alerts
    assert check is not None and (check.status, check.detail) == (status, detail)


def test_without_endpoints_or_alerts_there_is_no_alerts_row(make_env: Callable[..., EnvironmentConfig],
                                                            base_configs: dict[str, Any]) -> None:
    # GIVEN no endpoint (no topic), or endpoints with alerts.enabled: false  THEN preflight has no alerts row
    assert alerts_check(make_env()) is None
    assert alerts_check(make_env(_with_endpoint(base_configs, enabled=False, no_slo_alerts_reason="x",
                                                no_log_alarm_reason="x"))) is None
