"""``hpdpd verify`` on an autoscaled endpoint, against the fake API server and the fake Prometheus: the trigger query
is run where KEDA runs it, a query without series warns (KEDA would read 0 and keep the role at min_replicas), and
an autoscaled role is held to its min_replicas, the count KEDA may scale it down to."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.ops.metrics import Prometheus
from hyperpod_dpd.ops.verify import Target, verify_endpoint
from tests.fakes import dpd_cluster
from tests.fakes.prometheus import FakePrometheus, serve

QUERY = 'sum(vllm:num_requests_waiting{namespace="llm",resource_name=~"llama-[0-9a-f]{6}",pod_name=~"prefill-.*"})'


def _endpoint(query: str = QUERY, *, replicas: int = 2) -> EndpointConfig:
    return parse_endpoint({
        "name": "llama", "namespace": "llm", "instance_type": "ml.p5.48xlarge",
        "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "region": "us-west-2"}},
        "prefill": {"replicas": replicas, "autoscaling": {"min_replicas": 1, "max_replicas": 3,
                                                          "prometheus": {"query": query, "target_value": 4}}}})


def _rows(fake_kube: Any, endpoint: EndpointConfig, prometheus: Prometheus | None) -> dict[str, Any]:
    dpd_cluster.healthy(fake_kube, endpoint)  # one Running prefill pod and one decode pod
    report = verify_endpoint(fake_kube.client(), Target(endpoint=endpoint, iec=endpoint.resource_name,
                                                        prometheus=prometheus))
    return {c.name: c for c in report.checks}


def test_a_trigger_query_without_series_warns_that_the_role_stays_at_its_minimum(fake_kube: Any) -> None:
    # GIVEN a prefill trigger whose series the workspace does not have
    with serve(FakePrometheus()) as fake:
        rows = _rows(fake_kube, _endpoint(), Prometheus(url=fake.url))
        # THEN verify ran the trigger's own query and warns, naming the floor KEDA keeps the role at
        assert fake.queries.count(QUERY) == 1
    row = rows["autoscaling:prefill"]
    assert row.status == "warn", row
    assert "trigger query returns no series" in row.detail and "prefill stays at min_replicas 1" in row.detail
    assert "KEDA reads it as 0" in (row.cause or "")
    assert "autoscaling:decode" not in rows  # decode has no trigger


def test_a_trigger_query_with_one_series_passes_with_its_value(fake_kube: Any) -> None:
    with serve(FakePrometheus(series={"vllm:num_requests_waiting": 3})) as fake:
        row = _rows(fake_kube, _endpoint(), Prometheus(url=fake.url))["autoscaling:prefill"]
    assert (row.status, row.detail) == ("pass", "trigger query returns 3 (target 4 per pod; 1-3 replicas)")


def test_a_trigger_query_with_several_series_warns_that_keda_needs_one(fake_kube: Any) -> None:
    # GIVEN a query that answers one series per metric it reads (KEDA needs a single element)
    query = 'vllm:num_requests_waiting{namespace="llm",pod_name=~"prefill-.*"} or ' \
            'vllm:num_requests_running{namespace="llm",pod_name=~"prefill-.*"}'
    series = {"vllm:num_requests_waiting": 3.0, "vllm:num_requests_running": 1.0}
    with serve(FakePrometheus(series=series)) as fake:
        row = _rows(fake_kube, _endpoint(query), Prometheus(url=fake.url))["autoscaling:prefill"]
    assert row.status == "warn" and "returns 2 series; KEDA needs one" in row.detail, row


def test_a_failing_server_is_a_warning_of_the_row_not_an_abort(fake_kube: Any) -> None:
    with serve(FakePrometheus(status=503)) as fake:
        row = _rows(fake_kube, _endpoint(), Prometheus(url=fake.url))["autoscaling:prefill"]
    assert row.status == "warn" and row.detail.startswith("trigger query failed: Prometheus query sum(") and \
        "HTTP 503" in row.detail, row


def test_without_prometheus_the_row_says_the_query_was_not_run(fake_kube: Any) -> None:
    row = _rows(fake_kube, _endpoint(), None)["autoscaling:prefill"]
    assert row.status == "warn" and "pass --prometheus" in row.detail


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_an_autoscaled_role_is_held_to_its_min_replicas(fake_kube: Any, replicas: int) -> None:
    # GIVEN prefill at replicas N within autoscaling 1-3, and the one prefill pod KEDA scaled it down to
    row = _rows(fake_kube, _endpoint(replicas=replicas), None)["pods:prefill"]
    # THEN one Running pod meets min_replicas: no warning about missing replicas
    assert (row.status, row.detail.split(" (")[0]) == ("pass", "1/1 prefill pod(s) Running"), row
