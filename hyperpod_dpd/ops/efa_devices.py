"""EFA devices a node offers and a pod holds, through the EFA device plugin or the EFA DRA driver.

- Device plugin: the node's allocatable ``vpc.amazonaws.com/efa`` and the pod's request of it
  (hyperpod_dpd.ops.workloads ``Node.allocatable_efa`` / ``Pod.efa``).
- EFA DRA driver (DRANET, EKS 1.34 and later; EKS user guide "Manage EFA devices on Amazon EKS": "advertises EFA
  devices as ResourceSlice objects with the driver name dra.net and the DeviceClass name efa.networking.k8s.aws"):
  the extended resource is then 0. DRANET publishes every network interface of the node; the DeviceClass selects
  ``device.driver == "dra.net" && device.attributes["dra.net"].pciDevice == 'Elastic Fabric Adapter (EFA)'``
  (kubernetes-sigs/dranet@f258477 ``examples/aws_eks_examples/gpu-efa/device-class.yaml``; a ResourceSlice as it
  publishes them: ``resourceslice-dranet.yaml`` there, ``spec.driver``, ``spec.nodeName``, ``spec.pool.name``,
  ``spec.devices[].attributes["dra.net/pciDevice"].string``). A pod holds such devices through its ResourceClaims
  (``spec.resourceClaims``, ``status.resourceClaimStatuses[].resourceClaimName``), whose
  ``status.allocation.devices.results[]`` name ``driver``, ``pool`` and ``device`` (resource.k8s.io/v1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.ops.kube import Kube

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"  # GA in Kubernetes 1.34, the first version the EFA DRA driver supports
DRA_DRIVER = "dra.net"
PCI_DEVICE_ATTRIBUTE = "dra.net/pciDevice"
EFA_PCI_DEVICE = "Elastic Fabric Adapter (EFA)"
SLICES_PERMISSION = "list on resourceslices.resource.k8s.io (cluster scope)"


def _custom(api: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api)


def _items(document: Any) -> list[dict[str, Any]]:
    return [i for i in (document.get("items") or []) if isinstance(i, dict)] if isinstance(document, dict) else []


@dataclass(frozen=True, kw_only=True)
class DraInventory:
    """EFA devices DRANET publishes, per node, as (pool, device) pairs."""

    devices: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict)

    def on(self, node: str | None) -> int:
        return len(self.devices.get(node or "", ()))

    def known(self, pool: str, device: str) -> bool:
        return any((pool, device) in found for found in self.devices.values())


def _attribute(device: Mapping[str, Any], name: str) -> str | None:
    """A device attribute's string value; DRA attributes are qualified by driver domain or given bare."""
    attributes = device.get("attributes") or {}
    value = attributes.get(name) or attributes.get(name.split("/", 1)[-1]) or {}
    return str(value.get("string")) if isinstance(value, dict) and "string" in value else None


def parse_slices(items: Iterable[Mapping[str, Any]]) -> DraInventory:
    found: dict[str, set[tuple[str, str]]] = {}
    for item in items:
        spec = item.get("spec") or {}
        if spec.get("driver") != DRA_DRIVER or not spec.get("nodeName"):
            continue
        pool = str((spec.get("pool") or {}).get("name") or spec.get("nodeName"))
        for device in spec.get("devices") or []:
            if isinstance(device, dict) and _attribute(device, PCI_DEVICE_ATTRIBUTE) == EFA_PCI_DEVICE:
                found.setdefault(str(spec["nodeName"]), set()).add((pool, str(device.get("name", ""))))
    return DraInventory(devices={node: frozenset(devices) for node, devices in found.items()})


def dra_inventory(kube: Kube) -> DraInventory:
    """Every EFA device DRANET publishes in the cluster (ResourceSlices are cluster-scoped)."""
    document = kube.call(f"list resourceslices.{RESOURCE_GROUP}", lambda api: _custom(api).list_cluster_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", _preload_content=False, _request_timeout=kube.timeout),
        permission=SLICES_PERMISSION, expect="list")
    return parse_slices(_items(document))


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The ResourceClaims whose devices the vLLM container gets: a pod's claim (named directly in its spec, or
    generated from a template: its status) reaches only the containers that list it in ``resources.claims``
    (Kubernetes API, Container ``resources.claims``: "the names of resources, defined in spec.resourceClaims, that
    are used by this container")."""
    from hyperpod_dpd.ops.fabric import worker_container

    used = {str(c.get("name")) for c in ((worker_container(pod).get("resources") or {}).get("claims") or [])
            if isinstance(c, dict) and c.get("name")}
    entries = [*((pod.get("spec") or {}).get("resourceClaims") or []),
               *((pod.get("status") or {}).get("resourceClaimStatuses") or [])]
    names = [str(c["resourceClaimName"]) for c in entries
             if isinstance(c, dict) and c.get("resourceClaimName") and str(c.get("name")) in used]
    return list(dict.fromkeys(names))


def uses_claims(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def claimed_efa(kube: Kube, *, namespace: str, pods: Iterable[Mapping[str, Any]],
                inventory: DraInventory) -> dict[str, int]:
    """EFA devices each pod holds through DRA: its claims' allocated dra.net devices that are EFA devices."""
    wanted = {str((p.get("metadata") or {}).get("name", "")): claim_names(p) for p in pods if uses_claims(p)}
    if not wanted:
        return {}
    document = kube.call(f"list resourceclaims.{RESOURCE_GROUP} in namespace {namespace}",
                         lambda api: _custom(api).list_namespaced_custom_object(
                             RESOURCE_GROUP, RESOURCE_VERSION, namespace, "resourceclaims", _preload_content=False,
                             _request_timeout=kube.timeout),
                         permission=f"list on resourceclaims.{RESOURCE_GROUP} in namespace {namespace}", expect="list")
    claims = {str((c.get("metadata") or {}).get("name", "")): c for c in _items(document)}
    held: dict[str, int] = {}
    for pod, names in wanted.items():
        count = 0
        for name in names:
            results = ((((claims.get(name) or {}).get("status") or {}).get("allocation") or {}).get("devices")
                       or {}).get("results") or []
            count += sum(1 for r in results if isinstance(r, dict) and r.get("driver") == DRA_DRIVER
                         and inventory.known(str(r.get("pool", "")), str(r.get("device", ""))))
        held[pod] = count
    return held
