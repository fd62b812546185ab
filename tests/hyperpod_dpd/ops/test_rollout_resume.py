"""``Promotion`` killed at every step, then run again: it ends promoted (or, when the new generation fails its checks,
with the old one serving), never with nothing serving or with the Ingress or the router policy on a deleted
generation. Blue/green and in place, against the fake API server with the official client and a fake clock."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.rollout import Abort, Promotion, RolloutResult
from hyperpod_dpd.ops.rollout_lease import Keep
from tests.fakes import kube_api
from tests.hyperpod_dpd.ops import rollout_cluster as rc

ENV = rc.environment()
ENDPOINT = ENV.endpoints[0]
NS, NEW, OLD = ENDPOINT.namespace, ENDPOINT.resource_name, rc.old_name(ENDPOINT)
OLD_ROUTER, NEW_ROUTER = f"{OLD}-{NS}-router", f"{NEW}-{NS}-router"
LEASE_SECONDS = 300.0
DRAIN = 120  # rollout.drain_seconds of rc.environment()

# A whole blue/green promote, step by step (the order is the point: nothing is deleted before everything that
# names the old generation has moved, and the old one drains in between).
BLUE_GREEN = (f"created {NEW}", f"{NEW} is DeploymentComplete", f"{NEW} passed smoke and verify",
              f"router NetworkPolicy {ENDPOINT.router_policy_name} selects app In ({OLD_ROUTER},{NEW_ROUTER})",
              f"client Service {NS}/{ENDPOINT.name} -> {rc.host(NEW, NS)}", f"Ingress {ENDPOINT.ingress_name} -> {NEW}",
              f"draining {OLD} for {DRAIN} s", f"deleted {OLD}",
              f"router NetworkPolicy {ENDPOINT.router_policy_name} selects app={NEW_ROUTER}")
IN_PLACE = (f"deleted {OLD} (in place", f"created {NEW}", f"{NEW} is DeploymentComplete",
            f"{NEW} passed smoke and verify", f"router NetworkPolicy {ENDPOINT.router_policy_name} selects app={NEW_ROUTER}",
            f"client Service {NS}/{ENDPOINT.name} -> {rc.host(NEW, NS)}", f"Ingress {ENDPOINT.ingress_name} -> {NEW}")


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    """The chart's IEC, Ingress and router policy of the configured generation (synthesized once)."""
    return rc.chart_objects(ENV, ENDPOINT)


@pytest.fixture
def cluster(objects: dict[str, dict[str, Any]], tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    with rc.serving(ENDPOINT, objects, tmp_path) as served:
        yield served


def promotion(kube: Kube, objects: dict[str, dict[str, Any]], time: rc.FakeTime, *, holder: str,
              in_place: bool = False, on_step: Callable[[str], None] | None = None,
              checks: Callable[[str, Keep], list[str]] = lambda iec, keep: []) -> Promotion:
    extra = {"on_step": on_step} if on_step else {}
    return Promotion(kube=kube, endpoint=ENDPOINT, manifest=lambda: copy.deepcopy(objects["iec"]), checks=checks,
                     groups=ENV.hyperpod.instance_groups, in_place=in_place, holder=holder,
                     lease_seconds=LEASE_SECONDS, interval_seconds=5, sleep=time.sleep, clock=time.monotonic,
                     now=time.now, **extra)


def assert_promoted(fake: kube_api.FakeKube, result: RolloutResult) -> None:
    assert result.outcome == "promoted", result.message
    # the new generation alone, with its own SageMaker endpoint name, behind the Service, the Ingress and the policy
    assert set(fake.iecs) == {(NS, NEW)}
    assert fake.iecs[(NS, NEW)]["spec"]["endpointName"] == f"llama-sm-{ENDPOINT.generation}"
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(NEW, NS)
    assert rc.ingress_backends(fake, ENDPOINT) == [f"{NEW}-{NS}-routing-service"]
    assert rc.policy_selector(fake, ENDPOINT) == {"matchLabels": {"app": NEW_ROUTER}}
    assert rc.lease_text(fake, ENDPOINT) is None  # released, no record left
    assert result.state.phase == "steady"


@pytest.mark.parametrize(("in_place", "expected"), [(False, BLUE_GREEN), (True, IN_PLACE)], ids=["blue-green", "in-place"])
def test_an_uninterrupted_promote_moves_everything_in_order(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]], in_place: bool,
        expected: tuple[str, ...]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    # WHEN the configured generation is promoted
    result = promotion(kube, objects, time, holder="first", in_place=in_place).run()
    # THEN these are its steps, in this order, and everything ends on the new generation
    assert len(result.steps) == len(expected) and all(s.startswith(e) for s, e in zip(result.steps, expected,
                                                                                       strict=True)), result.steps
    assert_promoted(fake, result)
    # AND blue/green kept the old generation for the drain after the switch (in place: nothing left to drain)
    assert time.seconds == (DRAIN if not in_place else 0)


@pytest.mark.parametrize(("in_place", "step"), [(False, i) for i in range(len(BLUE_GREEN))]
                         + [(True, i) for i in range(len(IN_PLACE))],
                         ids=[f"blue-green-{s.split()[0]}-{i}" for i, s in enumerate(BLUE_GREEN)]
                         + [f"in-place-{s.split()[0]}-{i}" for i, s in enumerate(IN_PLACE)])
def test_a_promote_killed_at_any_step_is_refused_to_others_then_resumed(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]], in_place: bool,
        step: int) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    # GIVEN a promote that dies right after one of its steps (its lease stays behind)
    with pytest.raises(rc.Killed):
        promotion(kube, objects, time, holder="first", in_place=in_place, on_step=rc.kill_at(step)).run()
    # AND something still serves: the old generation until the switch, else the new one (in place: downtime)
    serving = fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"]
    assert serving in (rc.host(OLD, NS), rc.host(NEW, NS))
    assert (NS, OLD) in fake.iecs or in_place or serving == rc.host(NEW, NS)
    # WHEN a second promote starts while that lease is live
    refused = promotion(kube, objects, time, holder="second").run()
    # THEN it is refused, naming the holder and the expiry, and changes nothing
    assert refused.outcome == "refused" and "first holds its lease until 2026-12-01T12:0" in refused.message
    # (in place, between its delete and the new generation, nothing serves: status says "down" before the lease)
    down = refused.state.serving is None
    assert refused.state.phase == ("down" if down else "in-progress") and refused.steps == ()
    assert down == (in_place and serving == rc.host(OLD, NS))  # in place, the old one is gone before the switch
    # WHEN the lease has expired and promote runs again (without --in-place: the record says how it started)
    time.sleep(LEASE_SECONDS + 1)
    result = promotion(kube, objects, time, holder="third").run()
    # THEN it takes the record over and finishes the promote
    assert result.steps[0].startswith("took over the rollout record of first")
    assert_promoted(fake, result)


def test_a_resumed_promote_waits_only_for_the_rest_of_the_drain(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]]) -> None:
    from hyperpod_dpd.ops.rollout_lease import LeaseRecord

    fake, kube = cluster
    time = rc.FakeTime()

    def sleep(seconds: float) -> None:  # the process dies 50 s into the drain (the switch was at 0 s)
        time.sleep(seconds)
        if time.seconds >= 50:
            raise rc.Killed("during the drain")

    # GIVEN a 60 s lease, renewed while the promote drains, and the promote killed 50 s into its 120 s drain
    first = promotion(kube, objects, time, holder="first")
    first.sleep, first.lease_seconds = sleep, 60.0
    with pytest.raises(rc.Killed):
        first.run()
    record = LeaseRecord.from_text(rc.lease_text(fake, ENDPOINT) or "")
    assert (NS, OLD) in fake.iecs and record.switched_at == time.start and record.expires > time.now()
    # WHEN the next promote runs as soon as that lease has expired
    time.seconds = (record.expires - time.start).total_seconds() + 1
    resumed_at = time.seconds
    result = promotion(kube, objects, time, holder="second").run()
    # THEN it deleted the old generation 120 s after the switch: it waited only for the rest of the drain
    assert_promoted(fake, result)
    assert any(s.startswith(f"draining {OLD} for {120 - resumed_at:.0f} s") for s in result.steps)
    assert time.seconds == pytest.approx(DRAIN)


def test_a_resumed_promote_whose_generation_now_fails_leaves_the_old_one_serving_and_abort_cleans_up(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    # GIVEN a promote killed after it widened the router policy (index 3), just before the switch
    with pytest.raises(rc.Killed):
        promotion(kube, objects, time, holder="first", on_step=rc.kill_at(3)).run()
    assert rc.policy_selector(fake, ENDPOINT)["matchExpressions"][0]["values"] == [OLD_ROUTER, NEW_ROUTER]
    # WHEN it is run again after the lease expired, and the new generation fails its checks this time
    time.sleep(LEASE_SECONDS + 1)
    failed = promotion(kube, objects, time, holder="second", checks=lambda iec, keep: ["smoke long: HTTP 500"]).run()
    # THEN the old generation keeps serving, with the Ingress and the policy on it alone, and no record is left
    assert failed.outcome == "failed" and f"{OLD} keeps serving" in failed.message
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(OLD, NS)
    assert rc.ingress_backends(fake, ENDPOINT) == [f"{OLD}-{NS}-routing-service"]
    assert rc.policy_selector(fake, ENDPOINT) == {"matchLabels": {"app": OLD_ROUTER}}
    assert rc.lease_text(fake, ENDPOINT) is None and failed.state.phase == "in-progress"
    # AND abort removes the new generation, the old one serving throughout
    aborted = Abort(kube=kube, endpoint=ENDPOINT, holder="third", sleep=time.sleep, clock=time.monotonic,
                    now=time.now).run()
    assert aborted.outcome == "aborted" and set(fake.iecs) == {(NS, OLD)}
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(OLD, NS)
    assert aborted.state.phase == "pending" and rc.lease_text(fake, ENDPOINT) is None  # the configured one is gone


def test_an_api_error_releases_the_lease_but_keeps_the_record_so_the_next_run_resumes_at_once(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]]) -> None:
    from hyperpod_dpd.ops.kube import KubeError

    fake, kube = cluster
    time = rc.FakeTime()
    # GIVEN the API server refuses to create the new generation of an in-place promote (after its delete)
    fake.fail(kube_api.IEC_PREFIX + f"{NS}/inferenceendpointconfigs", 500, "etcdserver: request timed out",
              methods=("POST",))
    with pytest.raises(KubeError, match="500"):
        promotion(kube, objects, time, holder="first", in_place=True).run()
    # THEN nothing serves, and the record says what to finish, with no live holder
    record = rc.lease_text(fake, ENDPOINT)
    assert record is not None and '"holder": ""' in record and '"mode": "in-place"' in record
    assert set(fake.iecs) == set()
    # WHEN the API server recovers and promote runs again at once (no --in-place)
    fake.faults.clear()
    result = promotion(kube, objects, time, holder="second").run()
    # THEN it creates the configured generation and switches to it
    assert_promoted(fake, result)


def test_a_resumed_promote_after_the_switch_keeps_the_old_generation_when_the_new_one_now_fails(
        cluster: tuple[kube_api.FakeKube, Kube], objects: dict[str, dict[str, Any]]) -> None:
    fake, kube = cluster
    time = rc.FakeTime()
    # GIVEN a promote killed after the client Service moved to the new generation (during the drain)
    draining = BLUE_GREEN.index(f"draining {OLD} for {DRAIN} s")
    with pytest.raises(rc.Killed):
        promotion(kube, objects, time, holder="first", on_step=rc.kill_at(draining)).run()
    assert fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] == rc.host(NEW, NS)
    # AND the new generation has failed since
    fake.iecs[(NS, NEW)]["status"] = {"state": "DeploymentFailed", "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodsCrashing", "message": "decode pods CrashLoopBackOff",
         "lastTransitionTime": "2026-12-01T12:03:00Z"}]}
    # WHEN the lease has expired and promote runs again
    time.sleep(LEASE_SECONDS + 1)
    result = promotion(kube, objects, time, holder="second").run()
    # THEN it does not report the failed generation promoted, and the old generation (the way back) is not deleted
    assert result.outcome == "failed" and "DeploymentFailed" in result.message
    assert (NS, OLD) in fake.iecs and rc.lease_text(fake, ENDPOINT) is not None
