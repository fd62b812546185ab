"""``verify_endpoint`` against the fake API server: EFA through the EFA DRA driver, and what the report carries."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.ops.verify import Target, verify_endpoint
from tests.fakes import dpd_cluster

ENDPOINT = load_environment("dev").endpoints[0]
PREFILL, DECODE = f"prefill-{ENDPOINT.resource_name}-6f9c-x1", f"decode-{ENDPOINT.resource_name}-7a8b-y1"


@pytest.fixture
def cluster(fake_kube: Any) -> Any:
    dpd_cluster.healthy(fake_kube, ENDPOINT)
    return fake_kube


def run(fake: Any) -> dict[str, Any]:
    report = verify_endpoint(fake.client(), Target(endpoint=ENDPOINT, iec=ENDPOINT.resource_name))
    return {c.name: c for c in report.checks}


def dra(fake: Any, *, devices: int = 4) -> None:
    """EFA through the EFA DRA driver: no extended resource, ResourceSlices of dra.net (32 EFA devices and one ENA
    interface per node, as DRANET publishes every interface), and claims allocated ``devices`` EFA devices."""
    for item in fake.nodes:
        item["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "0"
    for item in fake.pods:
        for container in item["spec"]["containers"]:
            for kind in ("requests", "limits"):
                container.get("resources", {}).get(kind, {}).pop("vpc.amazonaws.com/efa", None)
    for pod_name, node_name in ((PREFILL, "p5-prefill-0"), (DECODE, "p5-decode-0")):
        fake.put("/apis/resource.k8s.io/v1/resourceslices", {"metadata": {"name": f"{node_name}-dra.net-x"}, "spec": {
            "driver": "dra.net", "nodeName": node_name, "pool": {"name": node_name, "generation": 1},
            "devices": [{"name": f"pci-0000-{i:02x}-1b-0", "attributes": {
                "dra.net/pciDevice": {"string": "Elastic Fabric Adapter (EFA)"}}} for i in range(32)]
            + [{"name": "pci-0000-20-01-0", "attributes": {"dra.net/pciDevice": {
                "string": "Elastic Network Adapter (ENA)"}}}]}})
        item = next(p for p in fake.pods if p["metadata"]["name"] == pod_name)
        item["spec"]["resourceClaims"] = [{"name": "efa", "resourceClaimTemplateName": "gpu-efa"}]
        item["status"]["resourceClaimStatuses"] = [{"name": "efa", "resourceClaimName": f"{pod_name}-efa"}]
        fake.put(f"/apis/resource.k8s.io/v1/namespaces/{ENDPOINT.namespace}/resourceclaims", {
            "metadata": {"name": f"{pod_name}-efa"}, "status": {"allocation": {"devices": {"results": [
                {"request": "efa", "driver": "dra.net", "pool": node_name, "device": f"pci-0000-{i:02x}-1b-0"}
                for i in range(devices)] + [
                {"request": "nic", "driver": "dra.net", "pool": node_name, "device": "pci-0000-20-01-0"}]}}}})


def test_efa_through_the_dra_driver_is_recognised(cluster: Any) -> None:
    # GIVEN nodes whose EFA devices the EFA DRA driver publishes, and pods that hold four of them through claims
    dra(cluster)
    rows = run(cluster)
    # THEN the efa rows pass, counting only EFA devices (not the ENA interface DRANET also publishes)
    assert rows["efa:prefill"].status == "pass" and rows["efa:decode"].status == "pass"
    assert f"{PREFILL}: 4 EFA device(s) through DRA claims (node p5-prefill-0 32 published in dra.net " \
           "ResourceSlices)" in rows["efa:prefill"].detail


def test_dra_claims_without_an_efa_device_fail(cluster: Any) -> None:
    dra(cluster, devices=0)
    rows = run(cluster)
    assert rows["efa:decode"].status == "fail" and "ResourceClaims hold no EFA device" in (rows["efa:decode"].cause
                                                                                          or "")


def test_the_device_plugin_case_reads_no_dra_object(cluster: Any) -> None:
    # GIVEN EFA through the device plugin (the healthy cluster)
    rows = run(cluster)
    # THEN no ResourceSlice or ResourceClaim is read (the operations role needs those only with the DRA driver)
    assert rows["efa:prefill"].status == "pass"
    assert not any("resource.k8s.io" in path for path in cluster.calls("GET"))


def test_an_iec_the_api_server_does_not_have_fails_verify(fake_kube: Any) -> None:
    # GIVEN a cluster without the endpoint's IEC (the API server's own NotFound)
    # WHEN it is verified
    report = verify_endpoint(fake_kube.client(), Target(endpoint=ENDPOINT, iec=ENDPOINT.resource_name))
    # THEN one row fails, saying so, and nothing else is read
    (row,) = report.checks
    assert (row.name, row.status) == ("iec", "fail") and not report.ok
    assert row.detail.startswith(f"{ENDPOINT.namespace}/{ENDPOINT.resource_name} NotFound (GET /apis/")
    assert [m for m, _, _ in fake_kube.requests] == ["GET"]


def test_a_missing_crd_fails_verify_too(fake_kube: Any) -> None:
    # GIVEN an API server that serves no inference.sagemaker.aws.amazon.com group (the operator is not installed):
    # its 404 at the end of the handler chain is a NotFound Status for any path of that group
    fake_kube.fail("/apis/inference.sagemaker.aws.amazon.com/", 404, "the server could not find the requested resource")
    report = verify_endpoint(fake_kube.client(), Target(endpoint=ENDPOINT, iec=ENDPOINT.resource_name))
    assert [(c.name, c.status) for c in report.checks] == [("iec", "fail")]
    assert "the server could not find the requested resource" in report.checks[0].detail
