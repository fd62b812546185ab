"""An AWS answer that is not the service's is one error naming the operation and the endpoint, never a parser crash
and never an empty result: real botocore clients against moto's server behind the fault proxy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_dpd.aws import ClientFactory, MalformedAnswer
from hyperpod_dpd.ops.clusters import describe_eks, read_hyperpod
from tests.fakes.fault_proxy import FaultProxy
from tests.fakes.fault_proxy import serve as serve_proxy
from tests.hyperpod_dpd.aws_faults import moto_server, seed_clusters
from tests.hyperpod_dpd.moto_clusters import REGION

GROUPS = [("system", "ml.m5.2xlarge", 2), ("prefill", "ml.p5.48xlarge", 1), ("decode", "ml.p5.48xlarge", 1)]


@pytest.fixture(scope="module")
def proxied() -> Iterator[FaultProxy]:
    """moto's server behind a fault proxy (each test seeds the HyperPod and EKS clusters)."""
    with moto_server() as url, serve_proxy(url) as proxy:
        yield proxy


@pytest.fixture
def clients(proxied: FaultProxy, aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClientFactory]:
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxied.url)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    seed_clusters(proxied.upstream, GROUPS)
    yield ClientFactory(region=REGION)
    proxied.set(None)


@pytest.mark.parametrize(("service", "call", "detail"), [
    ("sagemaker", lambda c: c.describe_cluster(ClusterName="hpdpd-dev"), "not UTF-8 (byte 0x80 at 0)"),
    ("eks", lambda c: c.describe_cluster(name="hpdpd-dev"), "not UTF-8 (byte 0x80 at 0)"),
    ("sts", lambda c: c.get_caller_identity(), "not XML"),
    ("ec2", lambda c: c.describe_subnets(), "not XML"),
], ids=["json", "rest-json", "query", "ec2"])
def test_garbage_is_malformed_in_every_protocol(clients: ClientFactory, proxied: FaultProxy, service: str,
                                                 call: Any, detail: str) -> None:
    # GIVEN a proxy that answers 200 with bytes that are no document at all
    proxied.set("garbage")
    # WHEN a read goes through it
    with pytest.raises(MalformedAnswer) as raised:
        call(clients.client(service))
    # THEN it is one error naming the operation, the endpoint and what the body is, not botocore's parser crash
    assert raised.value.endpoint.startswith(proxied.url) and detail in raised.value.detail
    assert "\n" not in str(raised.value) and str(raised.value).startswith(f"{raised.value.operation} at {proxied.url}")


@pytest.mark.parametrize(("service", "call"), [
    ("sagemaker", lambda c: c.describe_cluster(ClusterName="hpdpd-dev")),
    ("eks", lambda c: c.describe_cluster(name="hpdpd-dev")),
    ("ec2", lambda c: c.describe_subnets()),
    ("sts", lambda c: c.get_caller_identity()),
], ids=["json", "rest-json", "ec2", "query"])
def test_an_html_page_with_200_is_not_an_empty_answer(clients: ClientFactory, proxied: FaultProxy, service: str,
                                                       call: Any) -> None:
    # GIVEN an authenticating proxy's login page with 200 OK (botocore reads it as an empty result of the JSON and
    # ec2 protocols)
    proxied.set("html")
    # WHEN a read goes through it, THEN it is malformed, naming the page
    with pytest.raises(MalformedAnswer) as raised:
        call(clients.client(service))
    assert "HTTP 200, text/html" in raised.value.detail and "Sign in" in raised.value.detail


def test_a_truncated_body_is_malformed(clients: ClientFactory, proxied: FaultProxy) -> None:
    proxied.set("truncated")
    with pytest.raises(MalformedAnswer) as raised:
        clients.client("sagemaker").describe_cluster(ClusterName="hpdpd-dev")
    assert raised.value.operation == "DescribeCluster" and "not JSON" in raised.value.detail


def _reshaped(change: Any) -> Any:
    def reshape(body: bytes) -> bytes:
        document = json.loads(body)
        change(document)
        return json.dumps(document).encode()

    return reshape


@pytest.mark.parametrize(("change", "detail"), [
    # the body's values against the service model: each named by its path
    (lambda d: d.__setitem__("cluster", "hpdpd-dev"), "cluster: a string where an object belongs"),
    (lambda d: d["cluster"].__setitem__("tags", ["a"]), "cluster.tags: a list where a map belongs"),
    (lambda d: d["cluster"].__setitem__("version", 135), "cluster.version: a number where a string belongs"),
    # botocore's rest-json parser would read this as False (ensure_boolean): it never gets the chance
    (lambda d: d["cluster"]["resourcesVpcConfig"].__setitem__("endpointPublicAccess", "yes"),
     "cluster.resourcesVpcConfig.endpointPublicAccess: a string where a boolean belongs"),
    # a value of the right JSON type that botocore's own parser cannot read: its failure is the detail
    (lambda d: d["cluster"].__setitem__("createdAt", "the day before yesterday"),
     "botocore cannot parse it (ValueError: Invalid timestamp \"the day before yesterday\": Unknown string "
     "format: the day before yesterday)"),
], ids=["structure", "map", "string", "boolean", "timestamp"])
def test_a_field_of_the_wrong_type_is_malformed(clients: ClientFactory, proxied: FaultProxy, change: Any,
                                                detail: str) -> None:
    # GIVEN EKS's own answer with one field of another type than the service model says
    proxied.set("reshape", reshape=_reshaped(change))
    # WHEN the cluster is described, THEN it is malformed, saying which field or what failed
    with pytest.raises(MalformedAnswer) as raised:
        clients.client("eks").describe_cluster(name="hpdpd-dev")
    assert raised.value.detail == f"HTTP 200, application/json: {detail}"


def test_an_answer_without_its_object_is_malformed_not_absent(clients: ClientFactory, proxied: FaultProxy) -> None:
    # GIVEN a JSON object that is valid but carries no cluster (something in between answering {})
    proxied.set("reshape", reshape=lambda body: b"{}")
    # WHEN the EKS cluster is read, THEN that is no answer of DescribeCluster, never "the cluster does not exist"
    with pytest.raises(MalformedAnswer) as raised:
        describe_eks(clients.client("eks"), "hpdpd-dev")
    assert raised.value.detail == "it carries no 'cluster' object"


def test_integers_of_the_wrong_type_are_caught_before_the_toolkit_reads_them(clients: ClientFactory,
                                                                              proxied: FaultProxy) -> None:
    # GIVEN SageMaker's answer with a group's CurrentCount as text
    def change(document: dict[str, Any]) -> None:
        document["InstanceGroups"][0]["CurrentCount"] = "two"

    proxied.set("reshape", reshape=_reshaped(change))
    # WHEN the HyperPod cluster is read as status and wait read it
    with pytest.raises(MalformedAnswer) as raised:
        read_hyperpod(clients.client("sagemaker"), "hpdpd-dev")
    # THEN the read is not "unknown" (which a command would report and go on): the command stops, naming the field
    assert raised.value.detail.endswith("InstanceGroups[0].CurrentCount: a string where a integer belongs")


def test_the_services_own_answers_pass(clients: ClientFactory, proxied: FaultProxy) -> None:
    # GIVEN no fault: moto's own answers, errors included
    # WHEN the clusters are read, and one that does not exist
    cluster = read_hyperpod(clients.client("sagemaker"), "hpdpd-dev")
    eks = describe_eks(clients.client("eks"), "hpdpd-dev")
    with pytest.raises(ClientError) as missing:
        clients.client("eks").describe_cluster(name="nope")
    # THEN they are read as the service meant them: found, and its own not-found error
    assert cluster.found and [g.current for g in cluster.get().groups] == [2, 1, 1]
    assert eks is not None and eks.version == "1.35"
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
