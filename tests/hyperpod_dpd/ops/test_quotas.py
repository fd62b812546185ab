"""The HyperPod quotas: found by name across pages (moto has no SageMaker quotas: botocore Stubber), compared with
the configured instances plus what the account's other HyperPod clusters hold (moto's SageMaker clusters; Stubber
for pages, flexible groups and denials)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.ops.capacity import quota_checks
from hyperpod_dpd.ops.checks import attempt
from hyperpod_dpd.ops.quotas import cluster_quotas, other_clusters_usage, quota_name
from tests.hyperpod_dpd.moto_clusters import create_hyperpod_cluster


def _quota(name: str, value: float, code: str) -> dict[str, Any]:
    return {"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaName": name, "QuotaCode": code,
            "Value": value}


def test_the_applied_quota_is_found_across_pages_by_name(aws_credentials: None) -> None:
    client = boto3.client("service-quotas", region_name="us-west-2")
    with Stubber(client) as stub:
        # GIVEN the quota on the second page, spelled with other case and spacing
        stub.add_response("list_service_quotas",
                          {"Quotas": [_quota("ml.p5.48xlarge for training job usage", 4, "L-T1")], "NextToken": "t"},
                          {"ServiceCode": "sagemaker"})
        stub.add_response("list_service_quotas",
                          {"Quotas": [_quota("ML.P5.48xlarge  for cluster usage", 2, "L-C1")]},
                          {"ServiceCode": "sagemaker", "NextToken": "t"})
        # WHEN the cluster quota of ml.p5.48xlarge is looked up
        found = cluster_quotas(client, ["ml.p5.48xlarge"])
        stub.assert_no_pending_responses()
    # THEN the cluster-usage quota matched, not the training-job one
    quota = found["ml.p5.48xlarge"]
    assert quota is not None and (quota.code, quota.value, quota.applied) == ("L-C1", 2.0, True)
    assert quota_name("ml.p5.48xlarge") == "ml.p5.48xlarge for cluster usage"


def test_a_quota_never_adjusted_falls_back_to_its_default(aws_credentials: None) -> None:
    client = boto3.client("service-quotas", region_name="us-west-2")
    with Stubber(client) as stub:
        stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        stub.add_response("list_aws_default_service_quotas",
                          {"Quotas": [_quota("ml.m7i.2xlarge for cluster usage", 10, "L-D1")]},
                          {"ServiceCode": "sagemaker"})
        found = cluster_quotas(client, ["ml.m7i.2xlarge", "ml.p6-b200.48xlarge"])
    default = found["ml.m7i.2xlarge"]
    assert default is not None and default.value == 10 and not default.applied
    assert found["ml.p6-b200.48xlarge"] is None


# -- what the account's other clusters hold, and the cluster-wide quotas (moto's SageMaker clusters) -----------------

PER_CLUSTER = "Maximum number instances allowed per SageMaker HyperPod cluster"
ALL_CLUSTERS = "Total number of instances allowed across SageMaker HyperPod clusters"


def _applied(stub: Stubber, quotas: dict[str, float | None]) -> None:
    """ListServiceQuotas answers ``quotas`` (name -> value; None: listed without a value); no default is read."""
    stub.add_response("list_service_quotas", {"Quotas": [
        {"QuotaName": name, "QuotaCode": f"L-{i:08X}", **({} if value is None else {"Value": value})}
        for i, (name, value) in enumerate(quotas.items())]}, {"ServiceCode": "sagemaker"})


def _generous(**overrides: float | None) -> dict[str, float | None]:
    """dev's quotas (2 x ml.m7i.2xlarge, 2 x ml.p5.48xlarge), all 100, but ``overrides`` (p5=..., per_cluster=...)."""
    names = {"m7i": "ml.m7i.2xlarge for cluster usage", "p5": "ml.p5.48xlarge for cluster usage",
             "per_cluster": PER_CLUSTER, "all_clusters": ALL_CLUSTERS}
    return {names[k]: overrides.get(k, 100.0) for k in names}


def _quota_rows(env: EnvironmentConfig, clients: ClientFactory, quotas: dict[str, float | None]) -> dict[str, Any]:
    """The quota rows as preflight builds them: the other clusters read from moto's SageMaker (attempt), the quotas
    from a Stubber."""
    usage = attempt(lambda: other_clusters_usage(clients.client("sagemaker"), env.hyperpod.cluster_name))
    client = clients.client("service-quotas")
    with Stubber(client) as stub:
        _applied(stub, quotas)
        rows = {r.name: r for r in quota_checks(env, client, usage)}
        stub.assert_no_pending_responses()
    return rows


def test_instances_other_clusters_hold_count_against_the_type_quota(env: EnvironmentConfig, clients: ClientFactory,
                                                                     create_hyperpod: Callable[..., None]) -> None:
    # GIVEN dev's own cluster (2 x ml.p5.48xlarge, already running) and another team's cluster with 2 more p5 nodes,
    # and a p5 quota of 3: enough for dev alone, not for the account
    sagemaker = clients.client("sagemaker")
    create_hyperpod(sagemaker, env)
    create_hyperpod_cluster(sagemaker, [("train", "ml.p5.48xlarge", 2)], name="team-a", eks_cluster="team-a")
    # WHEN the quota rows run
    rows = _quota_rows(env, clients, _generous(p5=3.0))
    # THEN the p5 row fails on the account's total (dev's own running nodes are not counted twice), with the increase
    # to the value the account needs
    p5 = rows["quota:ml.p5.48xlarge"]
    assert p5.status == "fail", p5
    assert p5.detail == ("quota 3 (applied) is below the 4 instance(s) needed: 2 configured and the 2 that other "
                         "clusters of the account hold (team-a)")
    assert p5.fix is not None and p5.fix.endswith("--desired-value 4")
    # AND the types the other cluster does not use still pass, saying who holds nothing
    assert rows["quota:ml.m7i.2xlarge"].status == "pass"
    assert "no other HyperPod cluster of the account holds any" in rows["quota:ml.m7i.2xlarge"].detail


def test_other_clusters_that_cannot_be_listed_leave_a_covering_quota_unconfirmed(
        env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN a caller that may not list the account's HyperPod clusters, and quotas that cover dev by far
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_client_error("list_clusters", "AccessDeniedException",
                              "User is not authorized to perform: sagemaker:ListClusters", http_status_code=400)
        # WHEN the quota rows run
        rows = _quota_rows(env, clients, _generous())
    # THEN the account-wide rows warn (never pass) and name the permissions; the per-cluster quota needs no listing
    for name in ("quota:ml.p5.48xlarge", "quota:ml.m7i.2xlarge", "quota:instances-all-clusters"):
        assert rows[name].status == "warn", rows[name]
        assert "other HyperPod clusters share it and what they hold could not be read: access denied" in rows[name].detail
        assert "sagemaker:ListClusters" in (rows[name].fix or "")
    assert rows["quota:instances-per-cluster"].status == "pass"


def test_a_quota_the_configuration_alone_exceeds_fails_even_when_other_clusters_are_unknown(
        env: EnvironmentConfig, clients: ClientFactory) -> None:
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_client_error("list_clusters", "ThrottlingException", "Rate exceeded")
        rows = _quota_rows(env, clients, _generous(p5=1.0))
    assert rows["quota:ml.p5.48xlarge"].status == "fail"
    assert rows["quota:ml.p5.48xlarge"].detail == "quota 1 (applied) is below the 2 instance(s) configured"


def test_other_clusters_are_listed_across_pages(env: EnvironmentConfig, aws_credentials: None) -> None:
    # GIVEN two pages of clusters: dev itself, then another team's cluster of one p5 node
    sagemaker = boto3.client("sagemaker", region_name="us-west-2")
    arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/"
    with Stubber(sagemaker) as stub:
        stub.add_response("list_clusters", {"ClusterSummaries": [
            {"ClusterName": "hpdpd-dev", "ClusterArn": arn + "a1", "CreationTime": 0, "ClusterStatus": "InService"}],
            "NextToken": "t"}, {})
        stub.add_response("list_clusters", {"ClusterSummaries": [
            {"ClusterName": "team-b", "ClusterArn": arn + "b2", "CreationTime": 0, "ClusterStatus": "Updating"}]},
            {"NextToken": "t"})
        stub.add_response("describe_cluster", {
            "ClusterArn": arn + "b2", "ClusterName": "team-b", "ClusterStatus": "Updating", "InstanceGroups": [
                {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 1, "TargetCount": 3},
                {"InstanceGroupName": "cpu", "InstanceType": "ml.m7i.2xlarge", "CurrentCount": 2, "TargetCount": 2}]},
            {"ClusterName": "team-b"})
        # WHEN the account's other clusters are read
        usage = other_clusters_usage(sagemaker, "hpdpd-dev")
        stub.assert_no_pending_responses()
    # THEN the second page's cluster counts at what it is scaling to, and dev is not read at all
    assert usage.clusters == ("team-b",)
    assert (usage.of("ml.p5.48xlarge"), usage.of("ml.m7i.2xlarge"), usage.total) == (3, 2, 5)


def test_instances_a_flexible_group_may_still_take_leave_the_quota_unconfirmed(
        env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN another cluster with a flexible group scaling to 2 instances of p5 or p5en, none of them running yet,
    # and a p5 quota of 3: dev's 2 fit, dev's 2 plus those 2 would not
    sagemaker = clients.client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("list_clusters", {"ClusterSummaries": [{
            "ClusterName": "team-c", "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/c3",
            "CreationTime": 0, "ClusterStatus": "Updating"}]}, {})
        stub.add_response("describe_cluster", {
            "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/c3", "ClusterName": "team-c",
            "ClusterStatus": "Updating", "InstanceGroups": [{
                "InstanceGroupName": "flex", "CurrentCount": 0, "TargetCount": 2, "InstanceTypeDetails": [],
                "InstanceRequirements": {"DesiredInstanceTypes": ["ml.p5.48xlarge", "ml.p5en.48xlarge"]}}]},
            {"ClusterName": "team-c"})
        # WHEN the quota rows run
        rows = _quota_rows(env, clients, _generous(p5=3.0))
    # THEN the p5 row warns (those instances may take it), the m7i row passes (they cannot)
    p5 = rows["quota:ml.p5.48xlarge"]
    assert p5.status == "warn" and "2 more instance(s) of flexible groups in other clusters may take it" in p5.detail
    assert rows["quota:ml.m7i.2xlarge"].status == "pass"


def test_the_cluster_wide_instance_quotas_count_every_type(env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN dev's 4 instances (2 m7i, 2 p5), another cluster of 7 CPU instances, per-cluster quota 3, total quota 10
    create_hyperpod_cluster(clients.client("sagemaker"), [("cpu", "ml.m5.2xlarge", 7)], name="team-d",
                            eks_cluster="team-d")
    # WHEN the quota rows run
    rows = _quota_rows(env, clients, _generous(per_cluster=3.0, all_clusters=10.0))
    # THEN both cluster-wide rows fail: dev alone exceeds the per-cluster quota, dev and team-d the account's total
    per_cluster, every = rows["quota:instances-per-cluster"], rows["quota:instances-all-clusters"]
    assert per_cluster.status == "fail" and per_cluster.detail == (
        "quota 3 (applied) is below the 4 instance(s) of this cluster")
    assert every.status == "fail" and every.detail == (
        "quota 10 (applied) is below the 11 instance(s) needed: 4 configured and the 7 that other clusters of the "
        "account hold (team-d)")


def test_a_quota_listed_without_a_value_or_not_at_all_warns(env: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN a p5 quota listed without a value, and no cluster-wide quota in either listing
    quotas = {"ml.m7i.2xlarge for cluster usage": 100.0, "ml.p5.48xlarge for cluster usage": None}
    usage = attempt(lambda: other_clusters_usage(clients.client("sagemaker"), env.hyperpod.cluster_name))
    client = clients.client("service-quotas")
    with Stubber(client) as stub:
        _applied(stub, quotas)
        stub.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        rows = {r.name: r for r in quota_checks(env, client, usage)}
    # THEN neither passes (nor fails on a made-up 0): each warns that the limit could not be confirmed
    assert rows["quota:ml.p5.48xlarge"].status == "warn" and "without a value" in rows["quota:ml.p5.48xlarge"].detail
    for name in ("quota:instances-per-cluster", "quota:instances-all-clusters"):
        assert rows[name].status == "warn" and "could not be confirmed" in rows[name].detail


def test_the_type_quota_is_compared_with_every_group_of_the_type(make_env: Callable[..., EnvironmentConfig],
                                                                clients: ClientFactory) -> None:
    # GIVEN p5 in prefill (1), decode (1), a second prefill group autoscaled up to 3, and a parked p5 group
    def more_p5(data: dict[str, Any]) -> None:
        groups = data["hyperpod"]["instance_groups"]
        prefill = next(g for g in groups if g["name"] == "prefill")
        data["hyperpod"]["autoscaling"] = {"enabled": True}
        groups.append({**prefill, "name": "prefill-burst", "count": 0, "autoscaling": {"max_nodes": 3}})
        groups.append({**prefill, "name": "prefill-parked", "count": 0})

    env = make_env(more_p5)
    # WHEN the quota rows run with a p5 quota of 4
    rows = _quota_rows(env, clients, _generous(p5=4.0))
    # THEN the p5 quota is compared with 1 + 1 + 3 (the parked group launches nothing)
    assert rows["quota:ml.p5.48xlarge"].detail == "quota 4 (applied) is below the 5 instance(s) configured"
    assert rows["quota:ml.p5.48xlarge"].fix is not None and rows["quota:ml.p5.48xlarge"].fix.endswith("--desired-value 5")
