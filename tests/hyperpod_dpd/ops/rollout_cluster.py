"""A cluster in the middle of a rollout, for the rollout tests (ops and CLI), on the fake API server.

The serving generation ``<name>-01d000`` (a six-hex generation the configuration does not render) runs on one node
per role, with the endpoint's Ingress and router NetworkPolicy as the endpoints chart renders them, re-named to that
generation; a second, free node per role waits for the configured one; a fake operator brings a created IEC up
(``DeploymentComplete``, with its pods, router and logs) and keeps its spec. A fake clock drives the waits.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from hyperpod_dpd.config.loader import parse_environment
from hyperpod_dpd.ops.kube import Kube
from tests.fakes import dpd_cluster, kube_api
from tests.paths import FIXTURE_CONFIG_DIR, ROOT

OLD_GENERATION = "01d000"
ROUTER_NAMESPACE = "hyperpod-inference-system"
INGRESSES = f"/apis/networking.k8s.io/v1/namespaces/{ROUTER_NAMESPACE}/ingresses"
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{ROUTER_NAMESPACE}/networkpolicies"
LEASE = "hyperpod-dpd/rollout-lease"


def old_name(endpoint: Any) -> str:
    return f"{endpoint.name}-{OLD_GENERATION}"


def host(iec: str, namespace: str) -> str:
    return f"{iec}-{namespace}-routing-service.{ROUTER_NAMESPACE}.svc.cluster.local"


def chart_objects(env: Any, endpoint: Any) -> dict[str, dict[str, Any]]:
    """The endpoint's IEC, Ingress and router NetworkPolicy as the endpoints chart renders them (one synthesis)."""
    import cdk8s

    from hyperpod_dpd.k8s.charts import add_environment_charts

    found: dict[str, dict[str, Any]] = {}
    for chart in add_environment_charts(cdk8s.App(), env):
        for document in chart.to_json():
            meta = document.get("metadata") or {}
            if document["kind"] == "InferenceEndpointConfig" and meta["name"] == endpoint.resource_name:
                found["iec"] = document
            elif document["kind"] == "Ingress" and meta["name"] == endpoint.ingress_name:
                found["ingress"] = document
            elif document["kind"] == "NetworkPolicy" and meta["name"] == endpoint.router_policy_name:
                found["policy"] = document
    return found


def as_generation(document: dict[str, Any], endpoint: Any, iec: str) -> dict[str, Any]:
    """``document`` of the configured generation, re-named to generation ``iec``."""
    return dict(json.loads(json.dumps(document).replace(endpoint.resource_name, iec)))


def seed(fake: kube_api.FakeKube, endpoint: Any, objects: dict[str, dict[str, Any]]) -> None:
    """The old generation serving, its Ingress and policy (those the chart renders), free nodes, a fake operator."""
    old = old_name(endpoint)
    dpd_cluster.healthy(fake, endpoint, iec=old)
    fake.iecs[(endpoint.namespace, old)]["spec"] = {
        "endpointName": endpoint.sagemaker_endpoint_name_for(OLD_GENERATION)} if endpoint.sagemaker_endpoint_name else {}
    fake.nodes += [kube_api.node("p5-prefill-1", role="prefill"), kube_api.node("p5-decode-1", role="decode")]
    for key, collection in (("ingress", INGRESSES), ("policy", POLICIES)):
        if key in objects:
            fake.put(collection, as_generation(objects[key], endpoint, old))

    def bring_up(fake: kube_api.FakeKube, document: dict[str, Any]) -> None:
        name = document["metadata"]["name"]
        del fake.iecs[(endpoint.namespace, name)]
        dpd_cluster.add_generation(fake, iec=name, namespace=endpoint.namespace, endpoint=endpoint.name,
                                   prefill_node="p5-prefill-1", decode_node="p5-decode-1")
        fake.iecs[(endpoint.namespace, name)]["spec"] = copy.deepcopy(document.get("spec") or {})

    fake.on_iec_created = bring_up


@contextmanager
def serving(endpoint: Any, objects: dict[str, dict[str, Any]], tmp_path: Path) -> Iterator[tuple[kube_api.FakeKube, Kube]]:
    """A fake API server :func:`seed`-ed with ``objects``, and a :class:`Kube` on it (the tests' ``cluster``)."""
    with kube_api.serve() as fake:
        seed(fake, endpoint, objects)
        yield fake, Kube(kubeconfig=fake.kubeconfig(tmp_path / "kubeconfig"))


def ingress_backends(fake: kube_api.FakeKube, endpoint: Any) -> list[str]:
    document = fake.get(INGRESSES, endpoint.ingress_name) or {}
    return [p["backend"]["service"]["name"] for rule in document["spec"]["rules"] for p in rule["http"]["paths"]]


def policy_selector(fake: kube_api.FakeKube, endpoint: Any) -> dict[str, Any]:
    return dict((fake.get(POLICIES, endpoint.router_policy_name) or {})["spec"]["podSelector"])


def lease_text(fake: kube_api.FakeKube, endpoint: Any) -> str | None:
    service = fake.services[(endpoint.namespace, endpoint.name)]
    return ((service.get("metadata") or {}).get("annotations") or {}).get(LEASE)


@dataclass
class FakeTime:
    """One clock for the monotonic waits and the wall clock of the lease: ``sleep`` moves both."""

    seconds: float = 0.0
    start: datetime = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def monotonic(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds)

    def sleep(self, seconds: float) -> None:
        self.seconds += seconds


class Killed(BaseException):
    """The promote process dies here: no ``except Exception`` sees it, nothing is released."""


def kill_at(index: int) -> Any:
    """An ``on_step`` hook that kills the run right after its ``index``-th step (0-based)."""
    done: list[str] = []

    def hook(step: str) -> None:
        done.append(step)
        if len(done) == index + 1:
            raise Killed(step)

    return hook


def environment(mutate: Any = None, **endpoint: Any) -> Any:
    """The suite's dev environment (tests/fixtures/config/dev.yaml) with its endpoint's keys replaced by ``endpoint``
    (by default an Ingress, a SageMaker endpoint name and a 120 s drain), then ``mutate(data)`` when given."""
    data = yaml.safe_load((FIXTURE_CONFIG_DIR / "dev.yaml").read_text())
    data["endpoints"][0].update({"sagemaker_endpoint_name": "llama-sm", "rollout": {"drain_seconds": 120},
                                 "router": {"allowed_cidrs": ["10.192.0.0/16"], "ingress": {"host": "llama.example.com"}}})
    data["endpoints"][0].update(endpoint)
    if mutate:
        mutate(data)
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)
