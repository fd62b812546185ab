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


def plugin_less(fake: Any) -> None:
    """Nodes without the EFA device plugin (allocatable 0), pods without EFA requests."""
    for item in fake.nodes:
        item["status"]["allocatable"]["vpc.amazonaws.com/efa"] = "0"
    for item in fake.pods:
        for container in item["spec"]["containers"]:
            for kind in ("requests", "limits"):
                container.get("resources", {}).get(kind, {}).pop("vpc.amazonaws.com/efa", None)


def dra(fake: Any, *, devices: int = 4) -> None:
    """EFA through the EFA DRA driver: no extended resource, ResourceSlices of dra.net (32 EFA devices and one ENA
    interface per node, as DRANET publishes every interface), and claims allocated ``devices`` EFA devices."""
    plugin_less(fake)
    for pod_name, node_name in ((PREFILL, "p5-prefill-0"), (DECODE, "p5-decode-0")):
        fake.put("/apis/resource.k8s.io/v1/resourceslices", {"metadata": {"name": f"{node_name}-dra.net-x"}, "spec": {
            "driver": "dra.net", "nodeName": node_name, "pool": {"name": node_name, "generation": 1},
            "devices": [{"name": f"pci-0000-{i:02x}-1b-0", "attributes": {
                "dra.net/pciDevice": {"string": "Elastic Fabric Adapter (EFA)"}}} for i in range(32)]
            + [{"name": "pci-0000-20-01-0", "attributes": {"dra.net/pciDevice": {
                "string": "Elastic Network Adapter (ENA)"}}}]}})
        item = next(p for p in fake.pods if p["metadata"]["name"] == pod_name)
        item["spec"]["resourceClaims"] = [{"name": "efa", "resourceClaimTemplateName": "gpu-efa"}]
        item["spec"]["containers"][0]["resources"]["claims"] = [{"name": "efa"}]  # the vLLM container uses it
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


def test_a_cluster_without_the_dra_api_fails_the_efa_rows_instead_of_erroring(cluster: Any) -> None:
    # GIVEN nodes without the EFA device plugin, on a cluster that serves no resource.k8s.io/v1 (before 1.34: the API
    # server answers its own NotFound for the group)
    plugin_less(cluster)
    cluster.fail("/apis/resource.k8s.io/", 404, "the server could not find the requested resource")
    # WHEN the endpoint is verified
    rows = run(cluster)
    # THEN the efa rows fail on the missing devices (no DRA driver can hold any), rather than the command stopping
    assert rows["efa:prefill"].status == "fail" and rows["efa:decode"].status == "fail"
    assert "advertises no vpc.amazonaws.com/efa" in (rows["efa:decode"].cause or "")


def test_dra_objects_that_may_not_be_read_warn_naming_the_answer(cluster: Any) -> None:
    # GIVEN nodes without the device plugin, and an operations role that may not list ResourceSlices
    plugin_less(cluster)
    cluster.fail("/apis/resource.k8s.io/v1/resourceslices", 403,
                 'resourceslices.resource.k8s.io is forbidden: User "ci" cannot list resource "resourceslices"')
    rows = run(cluster)
    # THEN the efa rows cannot pass and say what the API server answered, and the rest of the report is there
    assert rows["efa:decode"].status == "warn" and "403" in (rows["efa:decode"].cause or "")
    assert "needs list on resourceslices.resource.k8s.io" in (rows["efa:decode"].cause or "")
    assert rows["transfer-backend"].status == "pass"


def test_an_efa_request_of_a_sidecar_is_no_device_for_the_server(cluster: Any) -> None:
    # GIVEN decode pods whose nginx sidecar, not the vLLM container, requests the EFA devices
    decode = next(p for p in cluster.pods if p["metadata"]["name"] == DECODE)
    server, sidecar = decode["spec"]["containers"]
    gpus = {"nvidia.com/gpu": "8"}
    server["resources"] = {"requests": dict(gpus), "limits": dict(gpus)}
    sidecar["resources"] = {"requests": {"vpc.amazonaws.com/efa": "32"}, "limits": {"vpc.amazonaws.com/efa": "32"}}
    rows = run(cluster)
    # THEN the decode efa row fails: the device plugin mounts the devices into the sidecar
    assert rows["efa:decode"].status == "fail" and "vLLM container requests no" in (rows["efa:decode"].cause or "")
    assert rows["efa:prefill"].status == "pass"


@pytest.mark.parametrize(("status", "message"), [
    (404, f'pods "{DECODE}" not found'),
    (400, f'container "decode-{ENDPOINT.resource_name}" in pod "{DECODE}" is waiting to start: ContainerCreating'),
], ids=["pod-gone", "container-not-started"])
def test_a_worker_log_that_cannot_be_read_warns_its_rows(cluster: Any, status: int, message: str) -> None:
    # GIVEN a decode pod whose log the API server will not give (deleted since it was listed, or restarting)
    cluster.fail(f"/api/v1/namespaces/{ENDPOINT.namespace}/pods/{DECODE}/log", status, message)
    # WHEN the endpoint is verified
    rows = run(cluster)
    # THEN the rows that read it warn with the API server's answer; nothing passes on the missing log
    assert rows["transfer-backend"].status == "warn" and message in rows["transfer-backend"].detail
    assert rows["kv-retrieve"].status == "warn" and rows["kv-throughput"].status == "pass"


def test_store_lines_without_lmcaches_pd_configuration_do_not_pass(cluster: Any) -> None:
    # GIVEN a long-running prefiller whose start-up lines are gone from its log: only its store lines are left
    cluster.logs[next(k for k in cluster.logs if k[1] == PREFILL)] = dpd_cluster.NIXL_EFA + dpd_cluster.stored()
    rows = run(cluster)
    # THEN the throughput is reported but does not pass: those stores may be local offloads, not writes to the decoder
    assert rows["kv-throughput"].status == "warn" and "pd_role sender" in (rows["kv-throughput"].cause or "")


def test_store_lines_faster_than_a_gpus_share_of_efa_do_not_pass(cluster: Any) -> None:
    # GIVEN stores of 0.2344 GiB in 0.5 ms of put (503 GB/s per rank: chunks the decoder already held were not sent)
    key = next(k for k in cluster.logs if k[1] == PREFILL)
    cluster.logs[key] = dpd_cluster.PREFILL_STARTUP + dpd_cluster.NIXL_EFA + dpd_cluster.stored(put_ms=0.5)
    rows = run(cluster)
    assert rows["kv-throughput"].status == "warn" and "8 store line(s) faster" in rows["kv-throughput"].detail


def test_a_decoder_that_recomputes_fails_even_when_the_prefiller_wrote(cluster: Any) -> None:
    # GIVEN a healthy prefill side, and a decoder whose retrieves found none of the KV (PYTHONHASHSEED differs)
    key = next(k for k in cluster.logs if k[1] == DECODE)
    cluster.logs[key] = cluster.logs[key].replace("Retrieved 6035 out of", "Retrieved 0 out of")
    report = verify_endpoint(cluster.client(), Target(endpoint=ENDPOINT, iec=ENDPOINT.resource_name))
    rows = {c.name: c for c in report.checks}
    # THEN the KV the fabric carried was not used: verify fails on kv-retrieve, while kv-throughput still passes
    assert rows["kv-retrieve"].status == "fail" and "PYTHONHASHSEED" in (rows["kv-retrieve"].cause or "")
    assert rows["kv-throughput"].status == "pass" and not report.ok
