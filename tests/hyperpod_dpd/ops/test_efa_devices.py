"""EFA devices of the EFA DRA driver (DRANET): ResourceSlices as it publishes them, and the claims that hold them."""

from __future__ import annotations

from typing import Any

from hyperpod_dpd.ops.efa_devices import claimed_efa, dra_inventory, parse_slices

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def slice_of(node: str, *, driver: str = "dra.net", efa: int = 2, ena: int = 1) -> dict[str, Any]:
    """A ResourceSlice shaped as kubernetes-sigs/dranet's gpu-efa example publishes it."""
    devices = [{"name": f"pci-efa-{i}", "attributes": {"dra.net/pciDevice": {"string": "Elastic Fabric Adapter (EFA)"},
                                                        "dra.net/rdma": {"bool": True}}} for i in range(efa)]
    devices += [{"name": f"pci-ena-{i}", "attributes": {"dra.net/pciDevice": {"string": "Elastic Network Adapter (ENA)"}}}
                for i in range(ena)]
    return {"metadata": {"name": f"{node}-{driver}-abc"}, "spec": {"driver": driver, "nodeName": node,
                                                                   "pool": {"name": node}, "devices": devices}}


def test_only_efa_devices_of_dranet_count() -> None:
    inventory = parse_slices([slice_of("n1"), slice_of("n2", driver="gpu.nvidia.com", efa=4)])
    assert inventory.on("n1") == 2 and inventory.on("n2") == 0 and inventory.known("n1", "pci-efa-1")
    assert not inventory.known("n1", "pci-ena-0")


def test_a_pods_claims_hold_the_allocated_efa_devices(fake_kube: Any) -> None:
    fake_kube.put(SLICES, slice_of("n1"))
    fake_kube.put("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims", {
        "metadata": {"name": "d-efa"}, "status": {"allocation": {"devices": {"results": [
            {"driver": "dra.net", "pool": "n1", "device": "pci-efa-0"},
            {"driver": "dra.net", "pool": "n1", "device": "pci-ena-0"},
            {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}}}})
    kube = fake_kube.client()
    inventory = dra_inventory(kube)
    pods = [{"metadata": {"name": "d"}, "spec": {
        "resourceClaims": [{"name": "efa", "resourceClaimTemplateName": "t"}],
        "containers": [{"name": "decode-x", "resources": {"claims": [{"name": "efa"}]}}]},
        "status": {"resourceClaimStatuses": [{"name": "efa", "resourceClaimName": "d-efa"}]}},
            {"metadata": {"name": "plain"}, "spec": {}}]
    assert claimed_efa(kube, namespace="ns", pods=pods, inventory=inventory) == {"d": 1}
    assert claimed_efa(kube, namespace="ns", pods=pods[1:], inventory=inventory) == {}


def test_a_claim_only_a_sidecar_uses_gives_the_server_no_device(fake_kube: Any) -> None:
    # GIVEN a pod whose EFA claim is listed by its nginx sidecar, not by its vLLM container
    fake_kube.put(SLICES, slice_of("n1"))
    fake_kube.put("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims", {
        "metadata": {"name": "d-efa"}, "status": {"allocation": {"devices": {"results": [
            {"driver": "dra.net", "pool": "n1", "device": "pci-efa-0"}]}}}})
    kube = fake_kube.client()
    pod = {"metadata": {"name": "d"}, "spec": {
        "resourceClaims": [{"name": "efa", "resourceClaimName": "d-efa"}],
        "containers": [{"name": "decode-x"}, {"name": "nginx", "resources": {"claims": [{"name": "efa"}]}}]}}
    # WHEN the devices the pod holds are counted
    held = claimed_efa(kube, namespace="ns", pods=[pod], inventory=dra_inventory(kube))
    # THEN the server holds none: a claim reaches only the containers that list it in resources.claims
    assert held == {"d": 0}
