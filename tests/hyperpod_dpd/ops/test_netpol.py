"""The NetworkPolicy evaluator against the examples and rules of the Kubernetes documentation ("Network Policies",
kubernetes.io/docs/concepts/services-networking/network-policies/; the manifests are
kubernetes/website content/en/examples/service/networking/*.yaml)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hyperpod_dpd.ops.netpol import (
    Cluster,
    ContainerPort,
    External,
    Flow,
    Pod,
    pod_from_manifest,
    policy_types,
    selection_warnings,
    selector_matches,
)

# networkpolicy.yaml, verbatim.
TEST_NETWORK_POLICY = yaml.safe_load("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: test-network-policy
  namespace: default
spec:
  podSelector:
    matchLabels:
      role: db
  policyTypes:
  - Ingress
  - Egress
  ingress:
  - from:
    - ipBlock:
        cidr: 172.17.0.0/16
        except:
        - 172.17.1.0/24
    - namespaceSelector:
        matchLabels:
          project: myproject
    - podSelector:
        matchLabels:
          role: frontend
    ports:
    - protocol: TCP
      port: 6379
  egress:
  - to:
    - ipBlock:
        cidr: 10.0.0.0/24
    ports:
    - protocol: TCP
      port: 5978
""")
# networkpolicy-multiport-egress.yaml, verbatim.
MULTI_PORT_EGRESS = yaml.safe_load("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: multi-port-egress
  namespace: default
spec:
  podSelector:
    matchLabels:
      role: db
  policyTypes:
  - Egress
  egress:
  - to:
    - ipBlock:
        cidr: 10.0.0.0/24
    ports:
    - protocol: TCP
      port: 32000
      endPort: 32768
""")


def _policy(name: str, spec: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


# network-policy-default-deny-ingress.yaml ... network-policy-default-deny-all.yaml (the "Default policies" section).
DENY_INGRESS = _policy("default-deny-ingress", {"podSelector": {}, "policyTypes": ["Ingress"]})
ALLOW_ALL_INGRESS = _policy("allow-all-ingress", {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]})
DENY_EGRESS = _policy("default-deny-egress", {"podSelector": {}, "policyTypes": ["Egress"]})
ALLOW_ALL_EGRESS = _policy("allow-all-egress", {"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]})
DENY_ALL = _policy("default-deny-all", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})

DB = Pod("db", "default", {"role": "db"}, "10.0.5.10", (ContainerPort(6379, "redis"),))
FRONTEND = Pod("frontend", "default", {"role": "frontend"}, "10.0.5.11")
OTHER_DEFAULT = Pod("other", "default", {"role": "other"}, "10.0.5.12")
IN_MYPROJECT = Pod("any", "team-a", {"role": "whatever"}, "10.0.6.1")
FRONTEND_ELSEWHERE = Pod("frontend", "team-b", {"role": "frontend"}, "10.0.7.1")
NAMESPACES = {"team-a": {"project": "myproject"}, "team-b": {"project": "other"}}


def _allows(policies: list[dict[str, Any]], flow: Flow) -> bool:
    return Cluster(policies, NAMESPACES).allows(flow)


@pytest.mark.parametrize(("source", "port", "allowed"), [
    (FRONTEND, 6379, True),                        # podSelector: role=frontend in the policy's namespace
    (IN_MYPROJECT, 6379, True),                    # namespaceSelector: any pod of a project=myproject namespace
    (External("172.17.0.5"), 6379, True),          # ipBlock
    (External("172.17.1.5"), 6379, False),         # ... minus its except
    (FRONTEND, 6380, False),                       # only TCP 6379
    (OTHER_DEFAULT, 6379, False),                  # a pod of the namespace the selectors do not pick
    (FRONTEND_ELSEWHERE, 6379, False),             # role=frontend, but podSelector alone means the policy's namespace
])
def test_the_documented_example_isolates_db_pods_for_ingress(source, port: int, allowed: bool) -> None:
    # GIVEN test-network-policy WHEN a peer connects to a role=db pod THEN only what one rule admits passes
    assert _allows([TEST_NETWORK_POLICY], Flow(source, DB, port)) is allowed


def test_the_documented_example_isolates_db_pods_for_egress() -> None:
    assert _allows([TEST_NETWORK_POLICY], Flow(DB, External("10.0.0.7"), 5978))
    assert not _allows([TEST_NETWORK_POLICY], Flow(DB, External("10.0.0.7"), 5979))
    assert not _allows([TEST_NETWORK_POLICY], Flow(DB, External("10.0.1.7"), 5978))
    assert not _allows([TEST_NETWORK_POLICY], Flow(DB, FRONTEND, 80))  # FRONTEND's address is outside 10.0.0.0/24
    # AND a pod the policy does not select is not isolated either way
    assert _allows([TEST_NETWORK_POLICY], Flow(OTHER_DEFAULT, External("192.0.2.1"), 443))
    assert _allows([TEST_NETWORK_POLICY], Flow(External("192.0.2.1"), OTHER_DEFAULT, 443))


def test_the_udp_protocol_is_not_tcp() -> None:
    assert not _allows([TEST_NETWORK_POLICY], Flow(FRONTEND, DB, 6379, "UDP"))


def test_end_port_admits_the_range_inclusive() -> None:
    allowed = [p for p in (31999, 32000, 32500, 32768, 32769) if _allows([MULTI_PORT_EGRESS], Flow(DB, External("10.0.0.1"), p))]
    assert allowed == [32000, 32500, 32768]


def test_default_policies_of_the_documentation() -> None:
    inbound, outbound = Flow(FRONTEND, DB, 6379), Flow(DB, External("198.51.100.1"), 443)
    # default-deny-ingress isolates every pod of the namespace for ingress, not for egress
    assert not _allows([DENY_INGRESS], inbound) and _allows([DENY_INGRESS], outbound)
    # allow-all-ingress: an empty rule admits everything, and policies are additive
    assert _allows([DENY_INGRESS, ALLOW_ALL_INGRESS], inbound)
    assert not _allows([DENY_EGRESS], outbound) and _allows([DENY_EGRESS], Flow(External("198.51.100.1"), DB, 6379))
    assert _allows([DENY_EGRESS, ALLOW_ALL_EGRESS], outbound)
    assert not _allows([DENY_ALL], inbound) and not _allows([DENY_ALL], outbound)
    # FRONTEND -> DB needs FRONTEND's egress too: with default-deny-all both are isolated
    assert not _allows([DENY_ALL, ALLOW_ALL_INGRESS], inbound)


def test_policies_of_another_namespace_do_not_isolate() -> None:
    elsewhere = _policy("deny", {"podSelector": {}, "policyTypes": ["Ingress"]}, namespace="team-a")
    assert _allows([elsewhere], Flow(FRONTEND, DB, 6379))
    assert not _allows([elsewhere], Flow(FRONTEND, IN_MYPROJECT, 6379))


def test_namespace_and_pod_selector_in_one_element_is_and_in_two_elements_is_or() -> None:
    # The documentation's "Behavior of to and from selectors" example, pointed at the db pods.
    both = _policy("and", {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {"user": "alice"}}, "podSelector": {"matchLabels": {"role": "client"}}}]}]})
    either = _policy("or", {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {"user": "alice"}}}, {"podSelector": {"matchLabels": {"role": "client"}}}]}]})
    namespaces = {"alice": {"user": "alice"}}
    alice_client = Pod("c", "alice", {"role": "client"}, "10.1.0.1")
    alice_other = Pod("o", "alice", {"role": "other"}, "10.1.0.2")
    local_client = Pod("l", "default", {"role": "client"}, "10.1.0.3")
    results = {name: [Cluster([policy], namespaces).allows(Flow(p, DB, 6379)) for p in (alice_client, alice_other, local_client)]
               for name, policy in (("and", both), ("or", either))}
    assert results == {"and": [True, False, False], "or": [True, True, True]}


def test_a_namespace_is_targeted_by_its_name_label() -> None:
    by_name = _policy("by-name", {"podSelector": {}, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}]}]})
    assert _allows([by_name], Flow(FRONTEND_ELSEWHERE, DB, 1))
    assert not _allows([by_name], Flow(IN_MYPROJECT, DB, 1))


def test_named_ports_resolve_against_the_destination_pods_container_ports() -> None:
    named = _policy("named", {"podSelector": {"matchLabels": {"role": "db"}},
                              "ingress": [{"ports": [{"port": "redis"}]}]})
    assert _allows([named], Flow(FRONTEND, DB, 6379))
    assert not _allows([named], Flow(FRONTEND, DB, 6380))
    unnamed_db = Pod("db2", "default", {"role": "db"}, "10.0.5.13", (ContainerPort(6379),))
    assert not _allows([named], Flow(FRONTEND, unnamed_db, 6379))


def test_omitted_policy_types_follow_the_sections_present() -> None:
    assert policy_types(_policy("i", {"podSelector": {}, "ingress": [{}]})) == ("Ingress",)
    assert policy_types(_policy("e", {"podSelector": {}, "egress": [{}]})) == ("Ingress", "Egress")
    # a policy with only an egress section and no policyTypes isolates for ingress too, with no ingress rule
    only_egress = _policy("e", {"podSelector": {}, "egress": [{}]})
    assert not _allows([only_egress], Flow(FRONTEND, DB, 6379))


@pytest.mark.parametrize(("selector", "matches"), [
    ({}, True),
    ({"matchLabels": {"role": "db"}}, True),
    ({"matchLabels": {"role": "db", "tier": "x"}}, False),
    ({"matchExpressions": [{"key": "role", "operator": "In", "values": ["db", "cache"]}]}, True),
    ({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["db"]}]}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}, True),
    ({"matchExpressions": [{"key": "role", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "role", "operator": "DoesNotExist"}]}, False),
])
def test_label_selectors(selector: dict[str, Any], matches: bool) -> None:
    assert selector_matches(selector, {"role": "db"}) is matches


def test_pods_are_read_from_api_manifests() -> None:
    pod = pod_from_manifest({"metadata": {"name": "r", "namespace": "ns", "labels": {"app": "x"}},
                             "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8000, "name": "http"}]},
                                                     {"name": "otel"}]},
                             "status": {"podIP": "10.1.2.3"}})
    assert pod == Pod("r", "ns", {"app": "x"}, "10.1.2.3", (ContainerPort(8000, "http"),))
    assert pod_from_manifest({"metadata": {"name": "p"}}).ip is None


def test_selection_warnings_name_unselected_pods_and_unadmitted_container_ports() -> None:
    # GIVEN the documented policy and three live pods meant to be selected by it
    wrong_labels = Pod("db-x", "default", {"role": "database"}, "10.0.5.20", (ContainerPort(6379),))
    wrong_port = Pod("db-y", "default", {"role": "db"}, "10.0.5.21", (ContainerPort(6380),))
    undeclared = Pod("db-z", "default", {"role": "db"}, "10.0.5.22")
    # WHEN they are compared THEN the mislabelled and the misported pod are named, the right one and the one that
    # declares no port are not
    assert selection_warnings(TEST_NETWORK_POLICY, [DB, wrong_labels, wrong_port, undeclared]) == [
        "NetworkPolicy default/test-network-policy selects role=db, but pod default/db-x has labels role=database: "
        "the policy does not apply to it",
        "NetworkPolicy default/test-network-policy admits port 6379 of pod default/db-y, which declares container port "
        "6380: a NetworkPolicy matches the container port, so traffic to it is dropped once enforced"]
