"""NetworkPolicy (``networking.k8s.io/v1``) evaluation on plain manifests, as Kubernetes defines it.

Semantics (Kubernetes documentation, "Network Policies"): a pod selected by any policy whose ``policyTypes`` include
Ingress (Egress) is isolated for ingress (egress); an isolated pod accepts (sends) only what at least one rule of one
selecting policy allows; a connection needs both the source's egress and the destination's ingress. Omitted
``policyTypes`` are Ingress, plus Egress when the policy has an ``egress`` section. A rule without ``from``/``to``
(or with an empty list) admits every peer, and without ``ports`` every port. A peer is an ``ipBlock`` (``cidr`` minus
``except``), or a ``namespaceSelector`` and/or ``podSelector`` (both: pods matching the one in namespaces matching the
other; only ``podSelector``: pods of the policy's namespace). Ports: a number (with ``endPort`` a range) or a name,
resolved against the destination pod's container ports; protocol TCP by default.

As the Amazon VPC CNI does, an ``ipBlock`` also matches pod addresses (pods take VPC addresses there). Traffic from the
node to its own pods (kubelet probes) is admitted by the VPC CNI whatever the policies say and is not modelled here.

No cdk8s import: ``hpdpd status`` uses :func:`selection_warnings` on the live pods and policies.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.catalogue.operator import ENDPOINT_LABEL, INFERENCE_NAMESPACE

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace
# The label EndpointChart puts on every object of an endpoint; the same value as hyperpod_dpd.k8s.defaults
# (importing that package would start cdk8s's jsii runtime; tests/hyperpod_dpd/ops/test_status_netpol.py checks they agree).
Manifest = Mapping[str, Any]


@dataclass(frozen=True)
class ContainerPort:
    port: int
    name: str | None = None
    protocol: str = "TCP"


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    ip: str | None = None  # None: not scheduled yet (no ipBlock matches it)
    ports: tuple[ContainerPort, ...] = ()


@dataclass(frozen=True)
class External:
    """An address outside the pod network: a load balancer, a client on the internet, an AWS API."""

    ip: str
    name: str = ""


Peer = Pod | External


@dataclass(frozen=True)
class Flow:
    source: Peer
    destination: Peer
    port: int
    protocol: str = "TCP"

    def __str__(self) -> str:
        return f"{_describe(self.source)} -> {_describe(self.destination)}:{self.port}/{self.protocol}"


def _describe(peer: Peer) -> str:
    return f"{peer.namespace}/{peer.name}" if isinstance(peer, Pod) else (peer.name or peer.ip)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector``: every ``matchLabels`` pair and every ``matchExpressions`` requirement; ``{}`` matches all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for requirement in selector.get("matchExpressions") or []:
        key, operator, values = requirement["key"], requirement["operator"], requirement.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown label selector operator {operator!r}")
    return True


def policy_types(policy: Manifest) -> tuple[str, ...]:
    spec = policy.get("spec") or {}
    if spec.get("policyTypes"):
        return tuple(spec["policyTypes"])
    return ("Ingress", "Egress") if "egress" in spec else ("Ingress",)


def selects(policy: Manifest, pod: Pod) -> bool:
    """The policy's ``podSelector`` picks the pod (in the policy's namespace)."""
    namespace = (policy.get("metadata") or {}).get("namespace", "default")
    return pod.namespace == namespace and selector_matches((policy.get("spec") or {}).get("podSelector"), pod.labels)


@dataclass
class Cluster:
    """Policies and the labels of namespaces (a namespace not listed has only ``kubernetes.io/metadata.name``)."""

    policies: Sequence[Manifest]
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def labels_of(self, namespace: str) -> Mapping[str, str]:
        return {**self.namespace_labels.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}  # set by the API server

    def allows(self, flow: Flow) -> bool:
        """Both the source's egress and the destination's ingress admit the flow."""
        return self._admits(flow, "Egress") and self._admits(flow, "Ingress")

    def _admits(self, flow: Flow, direction: str) -> bool:
        subject, other = (flow.source, flow.destination) if direction == "Egress" else (flow.destination, flow.source)
        if not isinstance(subject, Pod):
            return True  # only pods are isolated by NetworkPolicies
        selecting = [p for p in self.policies if direction in policy_types(p) and selects(p, subject)]
        if not selecting:
            return True
        key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
        return any(self._rule_admits(rule, peers_key, policy, other, flow)
                   for policy in selecting for rule in (policy.get("spec") or {}).get(key) or [])

    def _rule_admits(self, rule: Mapping[str, Any], peers_key: str, policy: Manifest, peer: Peer, flow: Flow) -> bool:
        peers = rule.get(peers_key) or []
        namespace = (policy.get("metadata") or {}).get("namespace", "default")
        if peers and not any(self._peer_matches(p, namespace, peer) for p in peers):
            return False
        return ports_admit(rule.get("ports") or [], flow.port, flow.protocol, flow.destination)

    def _peer_matches(self, peer: Mapping[str, Any], namespace: str, candidate: Peer) -> bool:
        if "ipBlock" in peer:
            return ip_in_block(candidate.ip, peer["ipBlock"])
        if not isinstance(candidate, Pod) or not ("podSelector" in peer or "namespaceSelector" in peer):
            return False
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self.labels_of(candidate.namespace)):
                return False
        elif candidate.namespace != namespace:
            return False
        return "podSelector" not in peer or selector_matches(peer["podSelector"], candidate.labels)


def ip_in_block(ip: str | None, block: Mapping[str, Any]) -> bool:
    if ip is None:
        return False
    address = ipaddress.ip_address(ip)
    if address not in ipaddress.ip_network(block["cidr"], strict=False):
        return False
    return not any(address in ipaddress.ip_network(cidr, strict=False) for cidr in block.get("except") or [])


def ports_admit(ports: Sequence[Mapping[str, Any]], port: int, protocol: str, destination: Peer) -> bool:
    """``ports`` of a rule admit ``port``/``protocol`` on ``destination`` (named ports resolve against its pod)."""
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str) and not wanted.isdigit():
            if isinstance(destination, Pod) and any(
                    c.name == wanted and c.port == port and c.protocol == protocol for c in destination.ports):
                return True
            continue
        low = int(wanted)
        if low <= port <= int(entry.get("endPort", low)):
            return True
    return False


def numeric_ports(policy: Manifest, direction: str = "Ingress") -> set[tuple[int, int, str]]:
    """The ``(first, last, protocol)`` port ranges of the rules that list numeric ports."""
    key = "ingress" if direction == "Ingress" else "egress"
    ranges = set()
    for rule in (policy.get("spec") or {}).get(key) or []:
        for entry in rule.get("ports") or []:
            wanted = entry.get("port")
            if isinstance(wanted, int) or (isinstance(wanted, str) and wanted.isdigit()):
                ranges.add((int(wanted), int(entry.get("endPort", wanted)), entry.get("protocol", "TCP")))
    return ranges


def pod_from_manifest(item: Mapping[str, Any]) -> Pod:
    """A :class:`Pod` of a ``v1.Pod`` manifest (as the API returns it): labels, address and declared container ports."""
    meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    ports = tuple(ContainerPort(port=int(p["containerPort"]), name=p.get("name"), protocol=p.get("protocol", "TCP"))
                  for c in spec.get("containers") or [] for p in c.get("ports") or [] if "containerPort" in p)
    return Pod(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
               labels=dict(meta.get("labels") or {}), ip=status.get("podIP") or None, ports=ports)


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"


def _selector(policy: Manifest) -> str:
    selector = (policy.get("spec") or {}).get("podSelector") or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    parts += [f"{r['key']} {r['operator']} ({','.join(r.get('values') or [])})" for r in selector.get("matchExpressions") or []]
    return ", ".join(parts) or "every pod"


def selection_warnings(policy: Manifest, pods: Iterable[Pod | Mapping[str, Any]], *, fix: str = "") -> list[str]:
    """Why ``policy`` would not do its job on ``pods``, the live pods it is meant to select: a pod it does not select
    (its rules then do not apply), or a pod that declares container ports none of which the policy's port-restricted
    ingress rules admit (the policy names the wrong port: what arrives on the real one is dropped once enforced).

    A pod that declares no ports is not judged on ports (undeclared ports still receive traffic). ``fix`` is appended
    to the warning about an unselected pod.
    """
    meta = policy.get("metadata") or {}
    where = f"NetworkPolicy {meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    ranges = numeric_ports(policy)
    found = []
    for pod in (p if isinstance(p, Pod) else pod_from_manifest(p) for p in pods):
        if not selects(policy, pod):
            found.append(f"{where} selects {_selector(policy)}, but pod {pod.namespace}/{pod.name} has labels "
                         f"{_labels(pod.labels)}: the policy does not apply to it{fix}")
            continue
        declared = {(c.port, c.protocol) for c in pod.ports}
        if ranges and declared and not any(lo <= port <= hi and proto == protocol
                                           for lo, hi, proto in ranges for port, protocol in declared):
            admitted = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi, _ in sorted(ranges))
            ports = ", ".join(str(port) for port, _ in sorted(declared))
            found.append(f"{where} admits port {admitted} of pod {pod.namespace}/{pod.name}, which declares container "
                         f"port {ports}: a NetworkPolicy matches the container port, so traffic to it is dropped once "
                         "enforced")
    return found


def endpoint_policy_warnings(*, endpoint: str, namespace: str, iec: str, pods: Iterable[Pod | Mapping[str, Any]],
                             policies: Iterable[Manifest]) -> list[str]:
    """:func:`selection_warnings` of one endpoint's NetworkPolicies (found by the ``hyperpod-dpd/endpoint`` label):
    the router policy (in the operator's namespace) against the IEC's router pods ``<iec>-<namespace>-router-…``, the
    worker policy (in the endpoint's namespace) against its ``prefill-<iec>-…`` / ``decode-<iec>-…`` pods."""
    live = [p if isinstance(p, Pod) else pod_from_manifest(p) for p in pods]
    routers = [p for p in live if p.namespace == INFERENCE_NAMESPACE and p.name.startswith(f"{iec}-{namespace}-router")]
    workers = [p for p in live if p.namespace == namespace and p.name.startswith((f"prefill-{iec}-", f"decode-{iec}-"))]
    found: list[str] = []
    for policy in policies:
        meta = policy.get("metadata") or {}
        if (meta.get("labels") or {}).get(ENDPOINT_LABEL) != endpoint:
            continue
        if meta.get("namespace") == INFERENCE_NAMESPACE:
            found += selection_warnings(policy, routers, fix=" (set router.router_pod_labels to the router pods' labels)")
        elif meta.get("namespace") == namespace:
            found += selection_warnings(policy, workers)
    return found
