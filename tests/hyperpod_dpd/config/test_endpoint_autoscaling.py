"""Per-role autoscaling of an endpoint (hyperpod_dpd.config.endpoint_autoscaling and endpoint_autoscaling_checks): the
single decoder refused once, the CRD's bounds, and trigger queries over series that cannot exist refused or warned
about, since KEDA reads a query without series as 0 and would keep the role at min_replicas in silence."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_autoscaling_checks import selectors
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.errors import ConfigError

ENDPOINT: dict[str, Any] = {
    "name": "llama",
    "namespace": "llm",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "prefix": "llama", "region": "us-west-2"}},
    "instance_type": "ml.p5.48xlarge",
}
# The query docs/endpoints.md recommends for prefill: the prefillers' queue, this endpoint only, every generation.
SCOPED = 'sum(vllm:num_requests_waiting{namespace="llm",resource_name=~"llama-[0-9a-f]{6}",pod_name=~"prefill-.*"})'
WORKSPACE = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd"


def _endpoint(role: str = "prefill", **scaling: Any) -> dict[str, Any]:
    data = copy.deepcopy(ENDPOINT)
    data[role] = {"autoscaling": {"max_replicas": 1 if role == "decode" else 3,
                                  "prometheus": {"query": SCOPED, "target_value": 4}, **scaling}}
    return data


def _query(query: str, role: str = "prefill") -> dict[str, Any]:
    return _endpoint(role, prometheus={"query": query, "target_value": 4})


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_endpoint(data, source="endpoint llama")
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.removeprefix("endpoint llama: ")


def _warnings(data: dict[str, Any]) -> list[str]:
    endpoint: EndpointConfig = parse_endpoint(data)
    return [f"{w.path}: {w.message}" for w in endpoint.warnings()]


# --- the single decoder ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("decode", [
    {"replicas": 2, "autoscaling": {"min_replicas": 2, "max_replicas": 2}},
    {"autoscaling": {"min_replicas": 2, "max_replicas": 2}},
    {"autoscaling": {"max_replicas": 3}},
])
def test_a_decoder_autoscaled_above_one_is_refused_in_one_message(decode: dict[str, Any]) -> None:
    # GIVEN a decoder whose autoscaling (and maybe its replicas) goes above the operator's one decoder
    data = copy.deepcopy(ENDPOINT)
    decode["autoscaling"]["prometheus"] = {"query": SCOPED.replace("prefill-", "decode-"), "target_value": 4}
    data["decode"] = decode
    # WHEN it is parsed THEN one line names the ceiling, its value, the limit and the way out
    message = _refusal(data)
    assert message.startswith(f"decode.autoscaling.max_replicas: {decode['autoscaling']['max_replicas']}: "), message
    assert "supports 1 decoder per endpoint today, so decode may autoscale to at most 1" in message
    assert "prefill.autoscaling" in message and "decode.allow_multiple_replicas: true" in message


def test_a_decoder_autoscaled_between_zero_and_one_with_prefill_kept_is_refused() -> None:
    # GIVEN decode min_replicas 0 while prefill keeps its replica THEN prefillers without a decoder are refused
    message = _refusal(_endpoint("decode", min_replicas=0,
                                 prometheus={"query": SCOPED.replace("prefill-", "decode-"), "target_value": 4}))
    assert message.startswith("decode.autoscaling.min_replicas: 0: "), message


def test_the_opt_in_lets_the_decoder_autoscale() -> None:
    data = _endpoint("decode", max_replicas=2,
                     prometheus={"query": SCOPED.replace("prefill-", "decode-"), "target_value": 4})
    data["decode"]["allow_multiple_replicas"] = True
    data["ratio"] = {"min": 0, "max": 4}
    assert parse_endpoint(data).decode.autoscaling.max_replicas == 2  # type: ignore[union-attr]


# --- bounds ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("scaling", "expected"), [
    ({"min_replicas": 3, "max_replicas": 2}, "prefill.autoscaling.max_replicas: 2: must be at least min_replicas (3)"),
    ({"cooldown_seconds": 2**31}, "prefill.autoscaling.cooldown_seconds: 2147483648: Input should be less than or "
                                  "equal to 2147483647"),
    ({"polling_interval_seconds": 2**31}, "prefill.autoscaling.polling_interval_seconds: 2147483648: "),
    ({"prometheus": {"query": "  ", "target_value": 4}}, "prefill.autoscaling.prometheus.query: '  ': must be a PromQL "
                                                         "expression"),
    ({"prometheus": {"query": SCOPED, "target_value": 4, "server_address": "http://prometheus:9090"}},
     "prefill.autoscaling.prometheus.server_address: 'http://prometheus:9090': must be an Amazon Managed Prometheus "
     "workspace URL"),
])
def test_values_the_crd_or_keda_cannot_take_are_refused_on_their_field(scaling: dict[str, Any], expected: str) -> None:
    # GIVEN one autoscaling field outside what the CRD (int32, serverAddress pattern) or KEDA (a query) accepts
    # THEN one line names that field, its value and what is allowed
    assert _refusal(_endpoint(**scaling)).startswith(expected)


# --- trigger queries ---------------------------------------------------------------------------------------------------

def test_the_recommended_query_loads_without_warnings() -> None:
    # GIVEN the prefill queue of this endpoint's prefill pods, every generation, on the toolkit's workspace
    data = _endpoint(prometheus={"query": SCOPED, "target_value": 4, "server_address": WORKSPACE})
    # THEN nothing is refused or doubted
    assert _warnings(data) == []


@pytest.mark.parametrize(("query", "expected"), [
    ('sum(rate(vllm:nixl_xfer_time_seconds_count{namespace="llm"}[1m]))',
     "reads vllm:nixl_xfer_time_seconds, which only vLLM's own NixlConnector registers"),
    ('sum(vllm:num_requests_waiting{namespace="llm-serving",pod_name=~"prefill-.*"})',
     "does not match the endpoint's namespace 'llm'"),
    ('sum(vllm:num_requests_waiting{resource_name="llama-abcdef",pod_name=~"prefill-.*"})',
     'resource_name=~"llama-[0-9a-f]{6}" follows every generation'),
    ('sum(vllm:num_requests_waiting{namespace="llm",pod_name=~"prefill-mistral-.*"})',
     "matches no pod of the endpoint (the operator names them 'prefill-llama-"),
    ('sum(vllm:num_requests_waiting{namespace="llm",pod_name=~"prefill-.*"}',
     "is not PromQL: unclosed '('"),
])
def test_a_query_no_series_of_the_endpoint_can_answer_is_refused(query: str, expected: str) -> None:
    # GIVEN a trigger query over a series the endpoint never has (or not PromQL at all)
    # THEN it is refused on the query, saying why KEDA would keep the role at min_replicas
    message = _refusal(_query(query))
    assert message.startswith("prefill.autoscaling.prometheus.query: "), message
    assert expected in message, message


@pytest.mark.parametrize(("query", "expected"), [
    ("sum(vllm:num_requests_waiting)", ['without namespace="llm" or resource_name=~"llama-[0-9a-f]{6}": it also '
                                        "counts every other endpoint's pods",
                                        'without pod_name=~"prefill-.*": the prefill trigger also counts']),
    ('sum(vllm:num_requests_waiting{namespace="llm"})', ['without pod_name=~"prefill-.*"']),
    # a pod prefix that endpoint llama-small's prefillers also have
    ('sum(vllm:num_requests_waiting{pod_name=~"prefill-llama-.*"})', ["also counts every other endpoint's pods"]),
    ('sum(vllm:num_request_waiting{namespace="llm",pod_name=~"prefill-.*"})',
     ["reads vllm:num_request_waiting, which is not a metric hyperpod-dpd knows", "hpdpd verify --prometheus"]),
    ('sum(vllm:num_requests_waiting{namespace="llm",pod="prefill-0"})',
     ["on label 'pod', which the catalogue does not list for it"]),
    ('sum(vllm:num_requests_waiting{namespace="llm",resource_name="llama-9b9be6",pod_name=~"prefill-.*"})',
     ['pins resource_name="llama-9b9be6", this generation\'s IEC']),
    ("vector(4)", ["reads no metric"]),
])
def test_a_query_that_may_read_nothing_or_too_much_warns(query: str, expected: list[str]) -> None:
    # GIVEN a query the catalogue cannot vouch for, or one that counts other endpoints or the other role
    found = _warnings(_query(query))
    # THEN each doubt is a warning on the query (the endpoint still loads)
    assert all(w.startswith("prefill.autoscaling.prometheus.query: ") for w in found), found
    for text in expected:
        assert any(text in w for w in found), (text, found)


@pytest.mark.parametrize("query", [
    'histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{namespace="llm",'
    'pod_name=~"prefill-.*"}[5m])))',
    'sum({__name__=~"vllm[:_]num_requests_waiting",namespace="llm",pod_name=~"prefill-.*"})',
    'sum(vllm_num_requests_waiting{namespace="llm",pod_name=~"prefill-llama-.*"})',
    'sum(vllm:num_requests_waiting{pod_name=~"prefill-llama-[0-9a-f]{6}-.*"})',
    'max without (node_name) (lmcache:time_to_store_count{namespace="llm",pod_name=~"prefill-.*"})',
])
def test_aggregations_both_spellings_and_name_matchers_are_read_as_the_catalogue_metrics(query: str) -> None:
    # GIVEN well-scoped queries in other PromQL forms THEN none warns (an aggregation's name is not a metric)
    assert _warnings(_query(query)) == []


def test_selectors_skip_functions_grouping_labels_and_keywords() -> None:
    found = selectors('sum by (pod_name) (rate(a:b{x="1"}[5m])) / on (pod_name) group_left c > bool 0')
    assert [(s.name, s.matchers) for s in found] == [("a:b", (("x", "=", "1"),)), ("c", ())]


# --- what the environment says about a trigger -------------------------------------------------------------------------

def _autoscaled(trigger: dict[str, Any], *, observability: bool = True) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == "prefill")["count"] = 2
        data["endpoints"][0]["prefill"]["autoscaling"] = {"max_replicas": 2, **trigger}
        data["operator"]["observability"]["enabled"] = observability
    return mutate


def _prometheus(query: str = SCOPED, **fields: Any) -> dict[str, Any]:
    return {"prometheus": {"query": query.replace('"llm"', '"llm-serving"').replace("llama-", "llama-3-3-70b-"),
                           "target_value": 4, **fields}}


def _environment_warnings(config_dir: Path) -> list[str]:
    return [f"{w.path}: {w.message}" for w in environment_warnings(load_environment("dev", config_dir))
            if ".autoscaling" in w.path]


def test_a_scoped_trigger_in_the_environment_loads_without_warnings(write_config: Callable[..., Path]) -> None:
    assert _environment_warnings(write_config(_autoscaled(_prometheus()))) == []


def test_a_workspace_of_another_region_is_refused(write_config: Callable[..., Path]) -> None:
    # GIVEN an environment in us-west-2 and a trigger on a us-east-1 workspace
    address = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd"
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(_autoscaled(_prometheus(server_address=address))))
    # THEN one line says KEDA's role cannot query it
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert f"endpoints[0].prefill.autoscaling.prometheus.server_address: '{address}': is a workspace in us-east-1; " \
           "KEDA's role may query Amazon Managed Prometheus workspaces of the environment's Region us-west-2 only" \
           in message


def test_a_trigger_without_the_observability_add_on_warns(write_config: Callable[..., Path]) -> None:
    # GIVEN a Prometheus trigger on vLLM's queue and the observability add-on off
    found = _environment_warnings(write_config(_autoscaled(_prometheus(), observability=False)))
    # THEN the query is flagged: nothing carries that series to Prometheus
    assert found == ["endpoints[0].prefill.autoscaling.prometheus.query: reads vllm:num_requests_waiting, which "
                     "reaches Prometheus through the HyperPod observability add-on, and operator.observability.enabled "
                     "is false: KEDA reads a query without series as 0 (the Prometheus scaler's ignoreNullValues "
                     "defaults to true and the IEC cannot change it), so the role would stay at min_replicas"]


def test_a_trigger_on_another_workspace_than_the_add_ons_warns(write_config: Callable[..., Path]) -> None:
    def mutate(data: dict[str, Any]) -> None:
        _autoscaled(_prometheus(server_address=WORKSPACE))(data)
        data["operator"]["observability"]["prometheus_workspace_arn"] = \
            "arn:aws:aps:us-west-2:111111111111:workspace/ws-99999999"
    found = _environment_warnings(write_config(mutate))
    assert len(found) == 1 and "is workspace ws-0123abcd, and the observability add-on writes the endpoint's " \
                                "metrics to ws-99999999" in found[0], found


def test_a_cloudwatch_trigger_on_a_metric_nobody_is_known_to_publish_warns(write_config: Callable[..., Path]) -> None:
    trigger = {"cloudwatch": {"metric_name": "PrefillQueue", "namespace": "HyperPod/DPD", "target_value": 8}}
    found = _environment_warnings(write_config(_autoscaled(trigger)))
    assert found == ["endpoints[0].prefill.autoscaling.cloudwatch.metric_name: in namespace 'HyperPod/DPD' is not a "
                     "metric hyperpod-dpd publishes or knows the endpoint to publish; KEDA reads an empty CloudWatch "
                     "answer as the trigger's minValue (CRD default 0), so the role would stay at min_replicas while "
                     "the metric is missing: check it with 'aws cloudwatch list-metrics' after the first requests"]
