"""The rollout lease on the client Service: taken, renewed and released with writes conditional on the Service's
``resourceVersion``, which the fake API server checks as the real one does (409 Conflict on a stale version)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.rollout_lease import (
    LEASE_ANNOTATION,
    Lease,
    LeaseHeld,
    LeaseLost,
    LeaseRecord,
    read_lease,
)
from hyperpod_dpd.ops.workloads import Conflict, get_service, patch_service
from tests.fakes import dpd_cluster, kube_api
from tests.hyperpod_dpd.ops import rollout_cluster as rc

ENDPOINT = rc.environment().endpoints[0]
NS, NAME = ENDPOINT.namespace, ENDPOINT.name


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    with kube_api.serve() as fake:
        dpd_cluster.healthy(fake, ENDPOINT, iec=rc.old_name(ENDPOINT))
        yield fake, Kube(kubeconfig=fake.kubeconfig(tmp_path / "kubeconfig"))


def plan(previous: LeaseRecord | None) -> LeaseRecord:
    return previous or LeaseRecord(holder="", expires=rc.FakeTime().start, source=rc.old_name(ENDPOINT),
                                   target=ENDPOINT.resource_name, mode="blue-green", step="started")


def take(kube: Kube, time: rc.FakeTime, holder: str,
         planner: Callable[[LeaseRecord | None], LeaseRecord] = plan) -> tuple[Lease, LeaseRecord | None]:
    return Lease.take(kube, namespace=NS, service=NAME, holder=holder, seconds=300, now=time.now, plan=planner)


def test_a_record_survives_the_annotation_and_says_what_is_wrong_when_it_cannot() -> None:
    time = rc.FakeTime()
    record = LeaseRecord(holder="ci", expires=time.now(), source=None, target="llama-9b9be6", mode="in-place",
                         step="deleted llama-01d000", switched_at=time.now() - timedelta(seconds=1))
    assert LeaseRecord.from_text(record.to_text()) == record
    for text, problem in (("{", "not JSON"), ("[]", "not a JSON object"), ('{"holder": 1}', "'holder' is not"),
                          (record.to_text().replace("in-place", "sideways"), "'mode' is not one of"),
                          (record.to_text().replace(".000Z", ""), "'expires' has no time zone")):
        with pytest.raises(ValueError, match=problem):
            LeaseRecord.from_text(text)
    # AND an annotation that is no lease names itself and how to remove it
    _, why = read_lease({"metadata": {"name": NAME, "namespace": NS, "annotations": {LEASE_ANNOTATION: "x"}}})
    assert why is not None and f"kubectl annotate service -n {NS} {NAME} {LEASE_ANNOTATION}-" in why


def test_a_lease_is_taken_renewed_and_released(cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    # WHEN a holder takes the lease
    lease, previous = take(kube, time, "first")
    # THEN the annotation names it, for 300 s
    assert previous is None
    held = LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "")
    assert (held.holder, held.expires - time.now()) == ("first", timedelta(seconds=300))
    # AND it is renewed only once half of it has passed
    time.sleep(100)
    lease.renew_if_due(during="while waiting")
    assert LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "").expires == held.expires
    time.sleep(60)
    lease.renew_if_due(during="while waiting")
    assert LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "").expires == time.now() + timedelta(seconds=300)
    # AND released with its record kept, nobody holds it; released without, the annotation is gone
    lease.release(keep_record=True)
    kept = LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "")
    assert kept.holder == "" and not kept.live(time.now()) and kept.target == ENDPOINT.resource_name
    lease, previous = take(kube, time, "second")
    assert previous == kept
    lease.release(keep_record=False)
    assert rc.lease_text(fake, ENDPOINT) is None


def test_of_two_promotes_that_read_the_same_version_only_one_takes_the_lease(
        cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    _, kube = cluster
    time = rc.FakeTime()
    raced: list[Lease] = []

    def racing(previous: LeaseRecord | None) -> LeaseRecord:
        # the second promote reads the Service too, and takes the lease between the first one's read and write
        if not raced:
            raced.append(take(kube, time, "second")[0])
        return plan(previous)

    # WHEN the first promote writes with the version it read
    with pytest.raises(LeaseHeld) as held:
        take(kube, time, "first", racing)
    # THEN its write was refused (409), it read again and found the second one's live lease
    assert held.value.record.holder == "second"
    assert "second holds its lease until 2026-12-01T12:05:00.000Z" in str(held.value)


def test_a_stale_version_is_refused_by_the_api_server(cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    _, kube = cluster
    version = get_service(kube, namespace=NS, name=NAME)["metadata"]["resourceVersion"]
    patch_service(kube, namespace=NS, name=NAME, body={"metadata": {"labels": {"team": "llm"}}})
    with pytest.raises(Conflict, match="409 Conflict"):
        patch_service(kube, namespace=NS, name=NAME, body={"metadata": {"resourceVersion": version,
                                                                         "annotations": {LEASE_ANNOTATION: "{}"}}})


def test_a_foreign_write_to_the_service_does_not_cost_the_lease_but_a_takeover_does(
        cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    lease, _ = take(kube, time, "first")
    # GIVEN a deploy re-applies the Service in between (its resourceVersion moves on, the lease stays)
    patch_service(kube, namespace=NS, name=NAME, body={"metadata": {"labels": {"app.kubernetes.io/part-of": "x"}}})
    # WHEN the holder writes its next step
    lease.write(step="created llama")
    # THEN it went through, on the version the deploy left
    assert LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "").step == "created llama"
    # BUT once its lease expired and another promote took it over, its next write stops it, naming the new holder
    time.sleep(301)
    take(kube, time, "second")
    with pytest.raises(LeaseLost, match=r"lost the rollout lease .* \(second holds it until .*\) before deleting "
                                        "llama-01d000: this run stopped there") as lost:
        lease.write(step="deleting llama-01d000")
    assert lost.value.during == "before deleting llama-01d000"
