"""``hpdpd verify``'s ``metrics-scope`` row: the scope query evaluated by Prometheus's own engine (promtool) over the
series HyperPod labels, and the row's verdicts against the fake API server and the fake Prometheus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.ops.metrics import Prometheus
from hyperpod_dpd.ops.verify import Target, verify_endpoint
from hyperpod_dpd.ops.verify_scope import scope_query
from tests.fakes import dpd_cluster
from tests.fakes.prometheus import FakePrometheus, serve
from tests.hyperpod_dpd.monitoring import promtool

GROUPED = "count by (cluster_id)"


def _endpoint() -> EndpointConfig:
    return parse_endpoint({
        "name": "llama", "namespace": "llm", "instance_type": "ml.p5.48xlarge",
        "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "region": "us-west-2"}}})


def _labels(cluster: str, resource: str = "llama-0a1b2c", namespace: str = "llm", pod: str = "decode-llama-0") -> dict:
    return {"cluster_id": cluster, "namespace": namespace, "resource_name": resource, "resource_type": "InferenceEndpointConfig",
            "pod_name": pod, "node_name": "hyperpod-i-0abc"}


def test_prometheus_counts_the_clusters_that_write_the_endpoints_series(tmp_path: Path) -> None:
    # GIVEN one workspace with the endpoint's series from two clusters (proxy invocations in one, vLLM's finished
    # requests with the OpenTelemetry spelling in the other), and series of clusters that are not the endpoint's:
    # another endpoint whose name starts the same, and the same name in another namespace
    series = [
        promtool.counter("model_invocations_total", {**_labels("9476q1hxcfor"), "method": "POST"}, 60),
        promtool.counter("vllm:request_success_total", _labels("9476q1hxcfor", pod="prefill-llama-0"), 60),
        promtool.counter("vllm_request_success_total", _labels("k2l3m4n5o6p7"), 60),
        promtool.counter("vllm:request_success_total", _labels("zz0000000000", resource="llama-small-0a1b2c"), 60),
        promtool.counter("vllm:request_success_total", _labels("yy0000000000", namespace="other"), 60),
    ]
    (tmp_path / "none.yaml").write_text("groups: []\n")
    document = {"rule_files": ["none.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [s.to_input() for s in series],
        "promql_expr_test": [{"expr": scope_query(_endpoint()), "eval_time": "30m",
                              "exp_samples": [{"labels": '{cluster_id="9476q1hxcfor"}', "value": 2},
                                              {"labels": '{cluster_id="k2l3m4n5o6p7"}', "value": 1}]}]}]}
    (tmp_path / "scope.test.yaml").write_text(yaml.safe_dump(document, sort_keys=False, width=1000))
    # WHEN promtool evaluates the row's query THEN it answers one sample per cluster of this endpoint, and no other
    result = promtool.run("test", "rules", "scope.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _row(fake_kube: Any, fake: FakePrometheus | None) -> Any:
    endpoint = _endpoint()
    dpd_cluster.healthy(fake_kube, endpoint)
    report = verify_endpoint(fake_kube.client(), Target(endpoint=endpoint, iec=endpoint.resource_name,
                                                        prometheus=Prometheus(url=fake.url) if fake else None))
    rows = {c.name: c for c in report.checks}
    return rows.get("metrics-scope"), report


def test_series_of_one_cluster_pass_naming_it(fake_kube: Any) -> None:
    with serve(FakePrometheus(grouped={GROUPED: [{"cluster_id": "9476q1hxcfor"}]})) as fake:
        row, _ = _row(fake_kube, fake)
        assert sum(GROUPED in q for q in fake.queries) == 1
    assert (row.status, row.detail) == ("pass", "series of llm/llama come from one cluster (cluster_id 9476q1hxcfor)")


def test_series_of_two_clusters_fail_the_gate_and_say_what_mixes(fake_kube: Any) -> None:
    # GIVEN a workspace another cluster writes the same endpoint's series to
    clusters = [{"cluster_id": "9476q1hxcfor"}, {"cluster_id": "k2l3m4n5o6p7"}]
    with serve(FakePrometheus(grouped={GROUPED: clusters})) as fake:
        row, report = _row(fake_kube, fake)
    # THEN the row fails, naming both clusters, what their mixing breaks and the fix, and verify is not ok
    assert row.status == "fail", row
    assert "from 2 clusters (cluster_id 9476q1hxcfor, k2l3m4n5o6p7)" in row.detail
    assert "SLO alerts" in row.detail and "prometheus_workspace_arn" in (row.fix or "")
    assert not report.ok


def test_series_without_the_label_warn_that_the_scope_cannot_be_told(fake_kube: Any) -> None:
    with serve(FakePrometheus(grouped={GROUPED: [{}]})) as fake:
        row, report = _row(fake_kube, fake)
    assert row.status == "warn" and "carry no cluster_id label" in row.detail, row


def test_labelled_and_unlabelled_series_are_two_sources(fake_kube: Any) -> None:
    with serve(FakePrometheus(grouped={GROUPED: [{"cluster_id": "9476q1hxcfor"}, {}]})) as fake:
        row, _ = _row(fake_kube, fake)
    assert row.status == "fail" and "(no cluster_id label)" in row.detail, row


def test_no_series_warn_that_the_alerts_see_nothing(fake_kube: Any) -> None:
    with serve(FakePrometheus()) as fake:
        row, _ = _row(fake_kube, fake)
    assert row.status == "warn" and row.detail.startswith("no series of llm/llama on http://127.0.0.1:"), row
    assert "the SLO alerts see nothing" in (row.cause or "")


def test_a_failing_server_is_a_warning_of_the_row(fake_kube: Any) -> None:
    with serve(FakePrometheus(status=503)) as fake:
        row, _ = _row(fake_kube, fake)
    assert row.status == "warn" and row.detail.startswith("scope query failed: Prometheus query count by") and \
        "HTTP 503" in row.detail, row


def test_without_prometheus_there_is_no_row(fake_kube: Any) -> None:
    row, _ = _row(fake_kube, None)
    assert row is None
