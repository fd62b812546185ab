"""``Promotion`` keeps its rollout lease through steps longer than the lease (the checks, the drain), and a lease
another holder took stops it before its next change, naming the step. Against the fake API server with a fake clock;
a competing promote is a second :class:`Lease` taken on the same Service, as another process would."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.rollout import Promotion
from hyperpod_dpd.ops.rollout_lease import Keep, Lease, LeaseHeld, LeaseRecord
from tests.fakes import kube_api
from tests.hyperpod_dpd.ops import rollout_cluster as rc

ENV = rc.environment()
ENDPOINT = ENV.endpoints[0]
NS, NEW, OLD = ENDPOINT.namespace, ENDPOINT.resource_name, rc.old_name(ENDPOINT)
LEASE_SECONDS = 300.0
OLD_POLICY = {"matchLabels": {"app": f"{OLD}-{NS}-router"}}


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    return rc.chart_objects(ENV, ENDPOINT)


@pytest.fixture
def cluster(objects: dict[str, dict[str, Any]], tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    with rc.serving(ENDPOINT, objects, tmp_path) as served:
        yield served


def promotion(kube: Kube, objects: dict[str, dict[str, Any]], time: rc.FakeTime,
              checks: Callable[[str, Keep], list[str]], on_step: Callable[[str], None] | None = None) -> Promotion:
    return Promotion(kube=kube, endpoint=ENDPOINT, manifest=lambda: copy.deepcopy(objects["iec"]), checks=checks,
                     groups=ENV.hyperpod.instance_groups, holder="first", lease_seconds=LEASE_SECONDS,
                     interval_seconds=5, sleep=time.sleep, clock=time.monotonic, now=time.now,
                     on_step=on_step or (lambda step: None))


def compete(kube: Kube, time: rc.FakeTime) -> Lease:
    """A second promote takes the lease (raises LeaseHeld while the first one's is live)."""
    lease, _ = Lease.take(kube, namespace=NS, service=ENDPOINT.name, holder="second", seconds=LEASE_SECONDS,
                      now=time.now, plan=lambda previous: previous or LeaseRecord(
                          holder="", expires=time.now(), source=OLD, target=NEW, mode="blue-green", step="started"))
    return lease


def assert_nothing_moved(fake: kube_api.FakeKube) -> None:
    """The old generation serves, with the Ingress and the policy on it alone, and still exists."""
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(OLD, NS)
    assert rc.ingress_backends(fake, ENDPOINT) == [f"{OLD}-{NS}-routing-service"]
    assert rc.policy_selector(fake, ENDPOINT) == OLD_POLICY and (NS, OLD) in fake.iecs


@pytest.mark.parametrize("renew", ["before each prompt", "in its polls"])
def test_checks_longer_than_the_lease_keep_it_so_a_second_promote_is_refused(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]], renew: str) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    refused: list[LeaseHeld] = []

    def checks(iec: str, keep: Keep) -> list[str]:
        # GIVEN checks that run for twice the lease: six 100 s prompts (each renewing ahead of its 100 s, as the
        # smoke does), or a probe polling for 600 s with the sleep it is given
        for _ in range(6) if renew == "before each prompt" else ():
            keep.ahead(100)
            time.sleep(100)
        for _ in range(60) if renew == "in its polls" else ():
            keep.sleep(10)
        # WHEN a second promote tries to take the lease once the first lease would have expired unrenewed
        with pytest.raises(LeaseHeld) as held:
            compete(kube, time)
        refused.append(held.value)
        return []

    result = promotion(kube, objects, time, checks).run()
    # THEN the second one was refused, naming the first holder, and the first promote finished
    assert time.seconds >= 2 * LEASE_SECONDS and refused[0].record.holder == "first"
    assert result.outcome == "promoted", result.message
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(NEW, NS)


@pytest.mark.parametrize("swallowed", [False, True], ids=["blocking-check", "check-that-swallows-the-error"])
def test_a_lease_lost_during_the_checks_stops_the_promote_before_the_traffic_moves(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]], swallowed: bool) -> None:
    fake, kube = cluster
    time = rc.FakeTime()

    def checks(iec: str, keep: Keep) -> list[str]:
        # GIVEN a check that blocks past the lease without renewing it (one call longer than the lease) ...
        time.sleep(LEASE_SECONDS + 1)
        # ... AND a second promote that takes the expired lease meanwhile
        compete(kube, time)
        if swallowed:  # a check that turns every error of its calls into a failed case (as the smoke does)
            try:
                keep.ahead(60)
            except Exception:  # noqa: BLE001 - what the smoke's measure does with a send that raises
                pass
        return []

    # WHEN the first promote's checks return
    result = promotion(kube, objects, time, checks).run()
    # THEN it stopped, saying it lost the lease to the second promote during or after its checks
    assert result.outcome == "failed"
    when = "while the checks of" if swallowed else "after the checks of"
    assert f"lost the rollout lease of {NS}/{ENDPOINT.name} (second holds it until" in result.message
    assert f"{when} {NEW} (smoke, verify)" in result.message and "this run stopped there" in result.message
    # AND it moved nothing: no policy, Service or Ingress change, no delete; the second one's lease is untouched
    assert result.steps[-1] == f"{NEW} is DeploymentComplete"
    assert_nothing_moved(fake)
    assert LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "").holder == "second"


def test_a_lease_lost_before_a_delete_keeps_the_old_generation(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()

    def stalled(step: str) -> None:
        # GIVEN the promote's process is stalled past its lease right after the Ingress moved (the drain is over by
        # the time it wakes), and a second promote takes the lease meanwhile
        if step.startswith("Ingress "):
            time.sleep(LEASE_SECONDS + 1)
            compete(kube, time)

    # WHEN it goes on to delete the old generation
    result = promotion(kube, objects, time, lambda iec, keep: [], on_step=stalled).run()
    # THEN it stopped before the delete, saying so, and the old generation (the way back) still exists
    assert result.outcome == "failed", result.message
    assert "(second holds it until" in result.message and f"before deleting {OLD}: this run stopped" in result.message
    assert (NS, OLD) in fake.iecs and not any(s.startswith("deleted") for s in result.steps)
    assert LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "").holder == "second"


def test_a_lease_lost_before_the_switch_leaves_the_old_generation_serving(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()

    def checks(iec: str, keep: Keep) -> list[str]:
        # GIVEN checks that end just short of half the lease (no renewal due), after which another process with a
        # clock ahead of this one's judges the lease expired and takes it
        time.sleep(LEASE_SECONDS / 2 - 1)
        ahead = rc.FakeTime(seconds=time.seconds + LEASE_SECONDS)
        compete(kube, ahead)
        return []

    # WHEN the first promote goes on to widen the router policy
    result = promotion(kube, objects, time, checks).run()
    # THEN the write that renews its lease right before the policy moves finds the lease taken: nothing moved
    assert result.outcome == "failed", result.message
    assert f"before the router NetworkPolicy {ENDPOINT.router_policy_name} was set to" in result.message
    assert_nothing_moved(fake)
