"""Re-pointing the Ingress and the router NetworkPolicy from one IEC generation to the next: the selector algebra,
the patches (applied by the fake API server as merge patches), and the refusals that come before anything changes."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.rollout import Promotion
from hyperpod_dpd.ops.rollout_repoint import (
    ingress_patch,
    ingress_services,
    read_exposure,
    selector_patch,
    selects,
    set_policy_selector,
    widened,
)
from hyperpod_dpd.ops.workloads import Conflict, patch_network_policy
from tests.fakes import kube_api
from tests.hyperpod_dpd.ops import rollout_cluster as rc

ENV = rc.environment()
ENDPOINT = ENV.endpoints[0]
NS, NEW, OLD = ENDPOINT.namespace, ENDPOINT.resource_name, rc.old_name(ENDPOINT)


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    return rc.chart_objects(ENV, ENDPOINT)


@pytest.fixture
def cluster(objects: dict[str, dict[str, Any]], tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    with rc.serving(ENDPOINT, objects, tmp_path) as served:
        yield served


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ({"matchLabels": {"app": "a"}}, {"app": "a", "x": "1"}, True),
    ({"matchLabels": {"app": "a"}}, {"app": "b"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, {"app": "b"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {"app": "a"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {}, True),
    ({}, {"anything": "x"}, True),  # the empty selector selects every pod
])
def test_selectors_match_as_kubernetes_label_selectors_do(selector: dict[str, Any], labels: dict[str, str],
                                                          expected: bool) -> None:
    assert selects(selector, labels) is expected


def test_two_routers_are_united_by_the_one_key_their_labels_differ_in() -> None:
    old, new = {"app": "r-old", "tier": "router"}, {"app": "r-new", "tier": "router"}
    # WHEN the old router's selector is widened to the new router
    union = widened({"matchLabels": old}, new)
    # THEN it selects both, and nothing that has neither label value
    assert union == {"matchLabels": {"tier": "router"},
                     "matchExpressions": [{"key": "app", "operator": "In", "values": ["r-new", "r-old"]}]}
    assert union is not None and selects(union, old) and selects(union, new) and not selects(union, {"app": "r-new"})
    # AND a selector that already selects the new router stays as it is (router.router_pod_labels, or resumed)
    assert widened(union, new) == union
    # BUT labels that differ in two keys, or a hand-written expression, cannot be united in one selector
    assert widened({"matchLabels": {"app": "a", "v": "1"}}, {"app": "b", "v": "2"}) is None
    assert widened({"matchExpressions": [{"key": "app", "operator": "Exists"}], "matchLabels": {"x": "y"}},
                   {"app": "b"}) is None


def test_a_selector_patch_makes_the_selector_exactly_the_wanted_one() -> None:
    live = {"metadata": {"resourceVersion": "7"}, "spec": {"podSelector": {
        "matchLabels": {"tier": "router"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}}}
    # THEN labels it drops are nulled, expressions replaced whole, and the version makes it conditional
    assert selector_patch(live, {"matchLabels": {"app": "b"}}) == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"podSelector": {"matchLabels": {"tier": None, "app": "b"}, "matchExpressions": None}}}
    # AND a selector that is already the wanted one (in any order) needs no patch
    assert selector_patch(live, {"matchExpressions": [{"values": ["a"], "operator": "In", "key": "app"}],
                                 "matchLabels": {"tier": "router"}}) is None


def test_only_the_backends_of_the_endpoints_generations_are_re_pointed(objects: dict[str, dict[str, Any]]) -> None:
    # GIVEN the old generation's Ingress with one more, foreign backend and a default backend
    document = rc.as_generation(objects["ingress"], ENDPOINT, OLD)
    document["spec"]["rules"][0]["http"]["paths"].append(
        {"path": "/docs", "pathType": "Prefix", "backend": {"service": {"name": "docs", "port": {"number": 80}}}})
    document["spec"]["defaultBackend"] = {"service": {"name": f"{OLD}-{NS}-routing-service", "port": {"number": 443}}}
    document["metadata"]["resourceVersion"] = "12"
    assert ingress_services(document, ENDPOINT) == {f"{OLD}-{NS}-routing-service"}
    # WHEN it is re-pointed at the new generation
    patch = ingress_patch(document, ENDPOINT, NEW)
    # THEN the rules are sent whole (a list is replaced by a merge patch), with only the generation's backends moved
    assert patch is not None and patch["metadata"] == {"resourceVersion": "12"}
    paths = patch["spec"]["rules"][0]["http"]["paths"]
    assert [p["backend"]["service"]["name"] for p in paths] == [f"{NEW}-{NS}-routing-service", "docs"]
    assert patch["spec"]["defaultBackend"]["service"] == {"name": f"{NEW}-{NS}-routing-service",
                                                          "port": {"number": 443}}
    # AND an Ingress already on the new generation needs no patch
    assert ingress_patch(rc.as_generation(objects["ingress"], ENDPOINT, NEW), ENDPOINT, NEW) is None


def test_a_policy_changed_since_it_was_read_is_not_overwritten(cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    fake, kube = cluster
    # GIVEN the router policy as read, then changed by someone else
    read = read_exposure(kube, ENDPOINT).policy
    patch_network_policy(kube, name=ENDPOINT.router_policy_name, body={"metadata": {"labels": {"edited": "yes"}}})
    # WHEN the rollout patches it from what it read
    with pytest.raises(Conflict):
        set_policy_selector(kube, ENDPOINT, read, {"matchLabels": {"app": "x"}})
    # THEN the other change stands
    assert (fake.get(rc.POLICIES, ENDPOINT.router_policy_name) or {})["metadata"]["labels"]["edited"] == "yes"


def test_absent_objects_are_skipped(cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, Any]) -> None:
    fake, kube = cluster
    # GIVEN an endpoint deployed without an Ingress and without NetworkPolicies
    fake.objects.clear()
    # WHEN it is promoted
    result = Promotion(kube=kube, endpoint=ENDPOINT, manifest=lambda: copy.deepcopy(objects["iec"]),
                       checks=lambda iec, keep: [], drain_seconds=0).run()
    # THEN the generation moves, and nothing was created in their place
    assert result.outcome == "promoted", result.message
    assert fake.objects.get(rc.INGRESSES, {}) == {} and fake.objects.get(rc.POLICIES, {}) == {}
    assert not any("Ingress" in s or "NetworkPolicy" in s for s in result.steps)


def test_an_unreadable_ingress_stops_the_promote_before_anything_changes(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, Any]) -> None:
    from hyperpod_dpd.ops.kube import KubeError

    fake, kube = cluster
    fake.fail(rc.INGRESSES, 403, "ingresses.networking.k8s.io is forbidden", methods=("GET",))
    with pytest.raises(KubeError, match="needs get on ingresses.networking.k8s.io in namespace hyperpod-inference"):
        Promotion(kube=kube, endpoint=ENDPOINT, manifest=lambda: copy.deepcopy(objects["iec"]),
                  checks=lambda iec, keep: []).run()
    assert fake.calls("POST") == [] and fake.calls("DELETE") == [] and set(fake.iecs) == {(NS, OLD)}


def test_a_hand_edited_policy_that_cannot_take_both_routers_is_refused_before_anything_is_created(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, Any]) -> None:
    fake, kube = cluster
    policy = fake.get(rc.POLICIES, ENDPOINT.router_policy_name) or {}
    policy["spec"]["podSelector"] = {"matchLabels": {"app": f"{OLD}-{NS}-router", "pinned": "yes"}}
    result = Promotion(kube=kube, endpoint=ENDPOINT, manifest=lambda: copy.deepcopy(objects["iec"]),
                       checks=lambda iec, keep: []).run()
    assert result.outcome == "refused" and "cannot be widened to the new router's" in result.message
    assert "pinned=yes" in result.message and fake.calls("POST") == [] and rc.lease_text(fake, ENDPOINT) is None
