"""Where a rollout stands: the phase and message ``hpdpd rollout status`` reports, from the generations, the client
Service and the lease record on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.rollout_lease import LEASE_ANNOTATION, LeaseRecord
from hyperpod_dpd.ops.rollout_state import read_state
from tests.fakes import dpd_cluster, kube_api
from tests.hyperpod_dpd.ops import rollout_cluster as rc

ENDPOINT = rc.environment().endpoints[0]
NS, NEW, OLD = ENDPOINT.namespace, ENDPOINT.resource_name, rc.old_name(ENDPOINT)
TIME = rc.FakeTime()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    with rc.serving(ENDPOINT, {}, tmp_path) as served:
        yield served


def _record(holder: str, *, expires_in: float, step: str = "started", mode: str = "blue-green") -> str:
    return LeaseRecord(holder=holder, expires=TIME.now() + timedelta(seconds=expires_in), source=OLD, target=NEW,
                       mode=mode, step=step).to_text()  # type: ignore[arg-type]


def _annotate(fake: kube_api.FakeKube, text: str) -> None:
    fake.services[(NS, ENDPOINT.name)]["metadata"]["annotations"] = {LEASE_ANNOTATION: text}


def _new_beside(fake: kube_api.FakeKube) -> None:
    dpd_cluster.add_generation(fake, iec=NEW, namespace=NS, endpoint=ENDPOINT.name)


def _only_new(fake: kube_api.FakeKube) -> None:
    fake.iecs.clear()
    _new_beside(fake)
    fake.services[(NS, ENDPOINT.name)]["spec"]["externalName"] = rc.host(NEW, NS)


@pytest.mark.parametrize(("arrange", "phase", "words"), [
    (lambda fake: None, "pending", [f"{OLD} is serving; {NEW} (configured) is not created yet"]),
    (_new_beside, "in-progress", [f"{OLD} is serving beside {NEW}: promote or abort"]),
    (_only_new, "steady", [f"{NEW} is serving"]),
    (lambda fake: (fake.iecs.clear(), fake.services.clear()), "nothing", ["the deploy creates the endpoint"]),
    # the client Service exists but no generation does: something is broken, not "nothing to do"
    (lambda fake: fake.iecs.clear(), "down", ["DOWN: no generation serves", f"points at {rc.host(OLD, NS)}",
                                               "none exists", f"'hpdpd rollout promote' to create and switch to {NEW}"]),
    (lambda fake: _annotate(fake, _record("ci-7", expires_in=120)), "in-progress",
     ["a promote is running: ci-7 holds the rollout lease until 2026-12-01T12:02:00Z"]),
    # an in-place promote killed after its delete: nothing serves, and the record says what to finish
    (lambda fake: (fake.iecs.clear(), _annotate(fake, _record("ci-7", expires_in=-1, step=f"deleted {OLD}",
                                                               mode="in-place"))), "down",
     ["DOWN: no generation serves", f"in-place promote from {OLD} to {NEW}, last step: deleted {OLD} stopped there",
      f"run 'hpdpd rollout promote' to create and switch to {NEW}"]),
    (lambda fake: _annotate(fake, "not json"), "interrupted", ["is not a rollout lease (not JSON"]),
], ids=["pending", "beside", "steady", "nothing", "service-without-generation", "live-lease", "stopped-in-place",
        "unreadable"])
def test_each_phase_says_what_holds_and_what_to_run(cluster: tuple[kube_api.FakeKube, Kube],
                                                    arrange: Callable[[kube_api.FakeKube], object], phase: str,
                                                    words: list[str]) -> None:
    fake, kube = cluster
    # GIVEN the cluster in one of the rollout's situations
    arrange(fake)
    # WHEN the state is read
    state = read_state(kube, ENDPOINT, now=TIME.now)
    # THEN its phase and its message tell it
    assert state.phase == phase
    for word in words:
        assert word in state.message
    # AND the JSON carries the SageMaker endpoint names the generations hold
    data = state.to_json()
    assert data["phase"] == phase and all("sagemaker_endpoint_name" in g for g in data["generations"])


def test_the_serving_generations_sagemaker_endpoint_name_is_reported(cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    _, kube = cluster
    data = read_state(kube, ENDPOINT, now=TIME.now).to_json()
    assert data["serving"] == OLD and data["serving_sagemaker_endpoint_name"] == f"llama-sm-{rc.OLD_GENERATION}"


def test_a_serving_generation_whose_sagemaker_name_the_configuration_renames_is_pointed_out(
        cluster: tuple[kube_api.FakeKube, Kube]) -> None:
    fake, kube = cluster
    # GIVEN the configured generation serves alone, created before names were per generation (the base name alone)
    _only_new(fake)
    fake.iecs[(NS, NEW)]["spec"] = {"endpointName": "llama-sm"}
    # WHEN the state is read
    state = read_state(kube, ENDPOINT, now=TIME.now)
    # THEN it is steady, and the message says the next deploy renames the SageMaker endpoint in place
    assert state.phase == "steady"
    assert (f"{NEW} is serving; it holds the SageMaker endpoint llama-sm but the configuration renders "
            f"llama-sm-{ENDPOINT.generation}: the next deploy changes spec.endpointName in place") in state.message
    # AND once the names agree, nothing is said
    fake.iecs[(NS, NEW)]["spec"] = {"endpointName": f"llama-sm-{ENDPOINT.generation}"}
    assert read_state(kube, ENDPOINT, now=TIME.now).message == f"{NEW} is serving"
