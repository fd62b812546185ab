"""The endpoints section: defaults, derived names, every semantic check and warning, and bad input in one line."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_dpd.catalogue.operator import DEFAULT_PD_BUFFER_SIZE, DEFAULT_ROUTING_THRESHOLD, DEFAULT_WORKER_IMAGE
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.errors import ConfigError
from tests.examples import examples

Mutation = Callable[[dict[str, Any]], None]

MINIMAL: dict[str, Any] = {
    "name": "llama",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "prefix": "llama", "region": "us-west-2"}},
    "instance_type": "ml.p5.48xlarge",
}


# An image of the user's own that states the versions kvaware needs (tests/hyperpod_dpd/config/test_known_bad.py refuses
# kvaware on the documented images, whose vLLM is too old).
KVAWARE_IMAGE: dict[str, Any] = {"image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-dpd:0.19.1",
                                 "image_versions": {"vllm": "0.19.1", "lmcache": "0.4.3"}}


def minimal(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    data.update(changes)
    return data


def _endpoint(data: dict[str, Any]) -> dict[str, Any]:
    return data["endpoints"][0]


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == name)


# --- the committed config ----------------------------------------------------------------------------------------------

def test_dev_declares_one_llama_endpoint_with_the_shape_other_modules_read() -> None:
    # WHEN dev is loaded
    endpoint = load_environment("dev").endpoints[0]
    # THEN the attributes other modules read have the declared values
    assert (endpoint.name, endpoint.namespace, endpoint.instance_type) == ("llama-3-3-70b", "llm-serving", "ml.p5.48xlarge")
    assert endpoint.model.name == "Llama-3.3-70B-Instruct"
    s3 = endpoint.model.s3
    assert s3 is not None
    assert (s3.bucket, s3.prefix, s3.region) == ("hpdpd-models-111111111111-us-west-2", "Llama-3.3-70B-Instruct", "us-west-2")
    assert (endpoint.prefill.replicas, endpoint.decode.replicas) == (1, 1)
    assert (endpoint.routing.threshold, endpoint.routing.strategy) == (4096, "prefixaware")
    assert endpoint.sagemaker_endpoint_name is None
    assert endpoint.invocation_path == "v1/chat/completions"
    assert endpoint.pd_buffer_size == 8589934592


def test_environments_without_endpoints_have_an_empty_tuple(write_config: Callable[..., Path]) -> None:
    assert load_environment("staging", write_config(env="staging")).endpoints == ()


# --- defaults and derived values ---------------------------------------------------------------------------------------

def test_defaults_come_from_the_catalogue() -> None:
    # WHEN only the required fields are given
    endpoint = parse_endpoint(minimal())
    # THEN the documented defaults apply
    assert endpoint.namespace == "default"
    assert endpoint.image == DEFAULT_WORKER_IMAGE
    assert endpoint.routing.threshold == DEFAULT_ROUTING_THRESHOLD == 4096
    assert endpoint.routing.strategy == "prefixaware"
    assert endpoint.pd_buffer_size == DEFAULT_PD_BUFFER_SIZE == 8 * 1024**3
    assert endpoint.l1_cache is True
    assert endpoint.gpus_per_pod == 8  # every GPU of ml.p5.48xlarge
    assert (endpoint.prefill.replicas, endpoint.decode.replicas) == (1, 1)
    assert endpoint.health_check_path == "/health"
    assert endpoint.client_namespaces == ("default",)


def test_worker_environment_has_the_three_dpd_variables_first() -> None:
    endpoint = parse_endpoint(minimal(environment={"HF_HOME": "/tmp/hf_home"}, pd_buffer_size=17179869184))  # noqa: S108
    assert list(endpoint.worker_environment.items()) == [
        ("PD_BUFFER_SIZE", "17179869184"), ("LMCACHE_SAVE_DECODE_CACHE", "False"), ("PYTHONHASHSEED", "0"),
        ("HF_HOME", "/tmp/hf_home")]  # noqa: S108


def test_names_derive_from_the_name_the_namespace_and_the_generation() -> None:
    endpoint = parse_endpoint(minimal(namespace="llm"))
    assert re.fullmatch(r"llama-[0-9a-f]{6}", endpoint.resource_name)
    assert endpoint.router_host == (f"{endpoint.resource_name}-llm-routing-service"
                                    ".hyperpod-inference-system.svc.cluster.local")
    assert endpoint.client_service_host == "llama.llm.svc.cluster.local"


@pytest.mark.parametrize("change", [
    {"pd_buffer_size": 17179869184},
    {"environment": {"HF_HOME": "/scratch/hf"}},
])
def test_changing_an_immutable_field_changes_the_generation(change: dict[str, Any]) -> None:
    # GIVEN an endpoint and a copy with one immutable field changed
    before, after = parse_endpoint(minimal()), parse_endpoint(minimal(**change))
    # THEN the IEC name changes while the client-facing name stays
    assert before.generation != after.generation
    assert before.resource_name != after.resource_name
    assert before.client_service_host == after.client_service_host


@pytest.mark.parametrize("change", [
    {"prefill": {"replicas": 2}},
    {"routing": {"threshold": 2048, "strategy": "roundrobin"}},
    {"max_model_len": 8192},
    {"prefill": {"args": ["--max-num-seqs", "8"]}},
])
def test_fields_the_operator_updates_in_place_keep_the_generation(change: dict[str, Any]) -> None:
    assert parse_endpoint(minimal()).resource_name == parse_endpoint(minimal(**change)).resource_name


def test_node_selectors_target_the_role_and_its_instance_group() -> None:
    endpoint = parse_endpoint(minimal(prefill={"instance_group": "prefill", "node_selector": {"team": "llm"}}))
    assert endpoint.node_selector("prefill") == {"team": "llm", "hyperpod-dpd/role": "prefill",
                                                 "hyperpod-dpd/instance-group": "prefill"}
    assert endpoint.node_selector("decode") == {"hyperpod-dpd/role": "decode"}


def test_in_zone_pins_only_an_unpinned_endpoint() -> None:
    assert parse_endpoint(minimal()).in_zone("us-west-2a").topology.availability_zone == "us-west-2a"
    pinned = parse_endpoint(minimal(topology={"availability_zone": "us-west-2b"}))
    assert pinned.in_zone("us-west-2a").topology.availability_zone == "us-west-2b"


# --- semantic errors (Python path) -------------------------------------------------------------------------------------

SEMANTIC_ERRORS: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "instance type not DPD-capable": (
        {"instance_type": "ml.m7i.4xlarge"}, "instance_type", "'ml.m7i.4xlarge'",
        "is not a DPD-capable instance type; allowed: ml.p5.48xlarge, ml.p5e.48xlarge"),
    "two decoders": (
        {"decode": {"replicas": 2}}, "decode.replicas", "2",
        "supports 1 decoder per endpoint today; add prefill replicas or raise pd_buffer_size instead, or set "
        "decode.allow_multiple_replicas: true"),
    "decode autoscaling above one decoder": (
        {"decode": {"autoscaling": {"max_replicas": 3, "prometheus": {"query": "q", "target_value": 1}}}},
        "decode.autoscaling.max_replicas", "3", "supports 1 decoder per endpoint today"),
    "tensor parallel size that does not divide the GPUs": (
        {"tensor_parallel_size": 3}, "tensor_parallel_size", "3",
        "must divide the 8 GPUs of ml.p5.48xlarge; allowed: [1, 2, 4, 8]"),
    "tensor parallel size above the GPUs": (
        {"tensor_parallel_size": 16}, "tensor_parallel_size", "16", "exceeds the 8 GPUs of ml.p5.48xlarge"),
    "kvaware with chat completions": (
        {"routing": {"strategy": "kvaware"}, "invocation_path": "/v1/chat/completions", **KVAWARE_IMAGE}, "invocation_path",
        "'/v1/chat/completions'", "routing strategy 'kvaware' supports only the completions API; use '/completions'"),
    "name over 63 characters": (
        {"name": "a" * 64}, "name", "'aaaa", "must be a DNS-1035 label"),
    "name with upper case and dots": (
        {"name": "Llama-3.3"}, "name", "'Llama-3.3'", "must be a DNS-1035 label"),
    "name starting with a digit": (
        {"name": "3-llama"}, "name", "'3-llama'", "starting with a letter"),
    "name and namespace too long for the router Service": (
        {"name": "a" * 30, "namespace": "b" * 20}, "name", "'aaaa",
        "the operator's router Service 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-"),
    "namespace with bad characters": (
        {"namespace": "LLM_team"}, "namespace", "'LLM_team'", "must be a Kubernetes namespace"),
    "SageMaker endpoint name with bad characters": (
        {"sagemaker_endpoint_name": "llama_70b"}, "sagemaker_endpoint_name", "'llama_70b'",
        "must be a SageMaker endpoint name"),
    "threshold below 0": (
        {"routing": {"threshold": -1}}, "routing.threshold", "-1",
        "must be 0 (always disaggregate) or a positive estimated input token count"),
    "prefill and decode on different images": (
        {"decode": {"image": "lmcache/vllm-openai:v0.4.3"}}, "decode.image", "'lmcache/vllm-openai:v0.4.3'",
        "must equal the prefill image (public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1)"),
    "PYTHONHASHSEED overridden": (
        {"environment": {"PYTHONHASHSEED": "42"}}, "environment.PYTHONHASHSEED", "'42'",
        "must be '0' for DPD"),
    "PD_BUFFER_SIZE as a free-form variable": (
        {"environment": {"PD_BUFFER_SIZE": "1"}}, "environment.PD_BUFFER_SIZE", "'1'",
        "set the typed field pd_buffer_size instead"),
    "managed vLLM flag in role args": (
        {"prefill": {"args": ["--tensor-parallel-size=4"]}}, "prefill.args[0]", "'--tensor-parallel-size=4'",
        "is set by hyperpod-dpd"),
    "KV cache dtype on the decoder only": (
        {"decode": {"args": ["--max-num-seqs", "64", "--kv-cache-dtype", "fp8"]}}, "decode.args[2]",
        "'--kv-cache-dtype'", "sets --kv-cache-dtype fp8 on decode while prefill runs auto (vLLM default): "
        "prefiller and decoder must hold the KV cache in one format"),
    "KV cache dtype overridden by the prefiller's own args": (
        {"args": ["--kv-cache-dtype=fp8"], "prefill": {"args": ["--kv-cache-dtype=auto"]}}, "prefill.args[0]",
        "'--kv-cache-dtype=auto'", "sets --kv-cache-dtype auto on prefill while decode runs fp8:"),
    "model dtype set twice on the decoder, the last one differing": (
        {"decode": {"args": ["--dtype", "bfloat16", "--dtype", "float16"]}}, "decode.args[2]", "'--dtype'",
        "sets --dtype float16 on decode while prefill runs auto (vLLM default)"),
    "replicas outside the autoscaling range": (
        {"prefill": {"replicas": 5, "autoscaling": {"max_replicas": 3, "cloudwatch": {
            "metric_name": "m", "namespace": "n", "target_value": 1}}}}, "prefill.replicas", "5",
        "must be between autoscaling.min_replicas (1) and max_replicas (3)"),
    "autoscaling with two triggers": (
        {"prefill": {"autoscaling": {"max_replicas": 3, "prometheus": {"query": "q", "target_value": 1},
                                     "cloudwatch": {"metric_name": "m", "namespace": "n", "target_value": 1}}}},
        "prefill.autoscaling", "", "set exactly one trigger"),
    "PD buffer as large as a GPU": (
        {"pd_buffer_size": 80 * 1024**3}, "pd_buffer_size", "85899345920", "must be smaller than one GPU's memory (80 GiB"),
    "two model sources": (
        {"model": {"name": "m", "s3": {"bucket": "models-bucket", "region": "us-west-2"},
                   "huggingface": {"model_id": "meta-llama/Llama-3.3-70B-Instruct"}}},
        "model", "", "set exactly one model source: 's3', 'fsx' or 'huggingface' (found s3 and huggingface)"),
    "custom certificate without its domain": (
        {"tls": {"acm_certificate_arn": "arn:aws:acm:us-west-2:111111111111:certificate/abc-123"}}, "tls", "",
        "set both 'acm_certificate_arn' and 'domain_name'"),
    "ingress without sources for the router NetworkPolicy": (
        {"router": {"ingress": {"host": "llm.example.com"}}}, "router", "", "list them (e.g. the VPC CIDR) in 'allowed_cidrs'"),
    "unknown routing strategy": (
        {"routing": {"strategy": "leastload"}}, "routing.strategy", "'leastload'",
        "Input should be 'prefixaware', 'kvaware', 'session' or 'roundrobin'"),
}


@pytest.mark.parametrize("case", sorted(SEMANTIC_ERRORS))
def test_python_endpoint_errors_name_the_field_value_and_what_is_allowed(case: str) -> None:
    change, path, value, allowed = SEMANTIC_ERRORS[case]
    # WHEN an endpoint with one bad field is built in Python
    with pytest.raises(ConfigError) as raised:
        parse_endpoint(minimal(**change), source="endpoint llama")
    # THEN one line names the source, the field path, the value and what is allowed
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"endpoint llama: {path}: {value}"), message
    assert allowed in message, message


@pytest.mark.parametrize("change", [
    {"decode": {"replicas": 2, "allow_multiple_replicas": True}},
    {"routing": {"strategy": "kvaware"}, "invocation_path": "/completions", **KVAWARE_IMAGE},
    {"routing": {"strategy": "kvaware"}, "invocation_path": "v1/completions", **KVAWARE_IMAGE},
    {"routing": {"threshold": 0}},
    {"environment": {"PYTHONHASHSEED": "0"}},
    {"tensor_parallel_size": 4},
    {"name": "a" * 25, "namespace": "b" * 14},
    {"args": ["--kv-cache-dtype", "fp8"]},  # one KV format, set once for both roles
    {"prefill": {"args": ["--kv-cache-dtype=fp8"]}, "decode": {"args": ["--kv-cache-dtype", "fp8"]}},
    {"args": ["--kv-cache-dtype", "fp8"], "decode": {"args": ["--kv-cache-dtype", "auto", "--kv-cache-dtype", "fp8"]}},
    {"decode": {"args": ["--dtype", "auto"]}},  # vLLM's default, stated on one role
])
def test_allowed_edge_cases_pass(change: dict[str, Any]) -> None:
    parse_endpoint(minimal(**change))


def test_deploy_time_tokens_skip_pattern_checks() -> None:
    # GIVEN a bucket name and Region that another CDK construct resolves at deploy time
    token = "${Token[TOKEN.123]}"
    endpoint = parse_endpoint(minimal(model={"name": "m", "s3": {"bucket": token, "region": token}}))
    assert endpoint.model.s3 is not None and endpoint.model.s3.bucket == token


def test_names_must_be_literal_even_in_cdk_apps() -> None:
    with pytest.raises(ConfigError, match="name: '\\$\\{Token"):
        parse_endpoint(minimal(name="${Token[TOKEN.9]}"))


# --- warnings ----------------------------------------------------------------------------------------------------------

WARNINGS: dict[str, tuple[dict[str, Any], str, str]] = {
    "model under 70B": (
        {"model": {**MINIMAL["model"], "parameters_billion": 8}}, "model.parameters_billion",
        "DPD pays off for dense models of 70B+ parameters"),
    "max model length below the threshold": (
        {"max_model_len": 2048}, "max_model_len", "is below routing.threshold (4096)"),
    "undocumented image": (
        {"image": "example.com/vllm:latest"}, "image", "is not a documented DPD image"),
    "kvaware on an image of one's own that states its versions (kvaware itself is fine there)": (
        {"routing": {"strategy": "kvaware"}, "invocation_path": "/completions", **KVAWARE_IMAGE}, "image",
        "is not a documented DPD image"),
}


def test_a_sagemaker_endpoint_needs_no_router_cidrs() -> None:
    # GIVEN an endpoint reached through a SageMaker endpoint (the operator's load balancer, in the VPC)
    endpoint = parse_endpoint(minimal(sagemaker_endpoint_name="llama"))
    # THEN no warning: the router NetworkPolicy admits the VPC's addresses (tests/k8s/test_charts.py)
    assert [w for w in endpoint.warnings() if w.path.startswith("router")] == []


@pytest.mark.parametrize("case", sorted(WARNINGS))
def test_doubtful_choices_are_warnings_not_errors(case: str) -> None:
    change, path, text = WARNINGS[case]
    endpoint = parse_endpoint(minimal(**change))
    found = endpoint.warnings()
    assert [w.path for w in found] == [path]
    assert text in found[0].message


def test_the_committed_endpoint_has_no_warnings() -> None:
    assert load_environment("dev").endpoints[0].warnings() == []


def test_threshold_zero_never_warns_about_max_model_len() -> None:
    assert parse_endpoint(minimal(max_model_len=1024, routing={"threshold": 0})).warnings() == []


# --- the config file: cross-checks against the environment and one-line errors ----------------------------------------

BAD_FILE_INPUT: dict[str, tuple[Mutation, str, str, str]] = {
    "unknown key": (
        lambda d: _endpoint(d).__setitem__("replica", 2),
        "endpoints[0].replica", "'replica'", "unknown key; allowed keys here: name, namespace, model"),
    "unknown instance group": (
        lambda d: _endpoint(d)["prefill"].__setitem__("instance_group", "prefil"),
        "endpoints[0].prefill.instance_group", "'prefil'", "is not an instance group of hyperpod.instance_groups; known: "
        "system, prefill, decode"),
    "instance group of the other role": (
        lambda d: _endpoint(d)["decode"].__setitem__("instance_group", "prefill"),
        "endpoints[0].decode.instance_group", "'prefill'", "is a 'prefill' group; a decode role needs a 'decode' group"),
    "instance group of another type": (
        lambda d: (_endpoint(d).__setitem__("instance_type", "ml.p5en.48xlarge"), _endpoint(d)["decode"].clear()),
        "endpoints[0].prefill.instance_group", "'prefill'",
        "runs ml.p5.48xlarge, but the endpoint's instance_type is ml.p5en.48xlarge"),
    "more prefill pods than the group holds": (
        lambda d: _endpoint(d)["prefill"].__setitem__("replicas", 2),
        "endpoints[0].prefill.replicas", "2", "needs 2 nodes (1 pod(s) of 8 GPUs per node), but instance group 'prefill' "
        "has count 1"),
    "topology outside the GPU AZ": (
        lambda d: _endpoint(d).__setitem__("topology", {"availability_zone": "us-west-2b"}),
        "endpoints[0].topology.availability_zone", "'us-west-2b'", "must be network.gpu_availability_zone (us-west-2a)"),
    "duplicate endpoint name": (
        lambda d: d["endpoints"].append({**copy.deepcopy(_endpoint(d)), "namespace": "other"}),
        "endpoints[1].name", "'llama-3-3-70b'", "duplicate endpoint name (also endpoints[0])"),
    "second endpoint in a namespace": (
        lambda d: d["endpoints"].append({**copy.deepcopy(_endpoint(d)), "name": "llama-b"}),
        "endpoints[1].namespace", "'llm-serving'", "one DPD endpoint per namespace"),
    "threshold below 0": (
        lambda d: _endpoint(d)["routing"].__setitem__("threshold", -5),
        "endpoints[0].routing.threshold", "-5", "must be 0 (always disaggregate) or a positive"),
    "two decoders": (
        lambda d: (_endpoint(d)["decode"].__setitem__("replicas", 2), _group(d, "decode").__setitem__("count", 2)),
        "endpoints[0].decode.replicas", "2", "supports 1 decoder per endpoint today"),
    "model source missing": (
        lambda d: _endpoint(d)["model"].pop("s3"),
        "endpoints[0].model", "", "set exactly one model source: 's3', 'fsx' or 'huggingface'"),
    "bucket name with upper case": (
        lambda d: _endpoint(d)["model"]["s3"].__setitem__("bucket", "Models"),
        "endpoints[0].model.s3.bucket", "'Models'", "must be a valid S3 bucket name"),
    "environment value as a YAML number": (
        lambda d: _endpoint(d).__setitem__("environment", {"VLLM_LOGGING_LEVEL": 10}),
        "endpoints[0].environment.VLLM_LOGGING_LEVEL", "10", "Input should be a valid string"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILE_INPUT))
def test_bad_endpoint_in_a_config_file_fails_with_one_line(case: str, write_config: Callable[..., Path]) -> None:
    mutate, path, value, allowed = BAD_FILE_INPUT[case]
    # GIVEN dev.yaml with one bad endpoint field
    config_dir = write_config(mutate)
    # WHEN it is loaded
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    # THEN one line names the file, the field path, the value and what is allowed
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert re.match(rf".*dev\.yaml: {re.escape(path)}: {re.escape(value)}", message), message
    assert allowed in message, message


def test_broken_instance_groups_are_reported_without_follow_up_endpoint_errors(
        write_config: Callable[..., Path]) -> None:
    def rename(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"][2]["name"] = "prefill"

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(rename))
    assert [i.path for i in raised.value.issues] == ["hyperpod.instance_groups[2].name"]


def test_endpoint_model_is_frozen() -> None:
    endpoint: EndpointConfig = parse_endpoint(minimal())
    with pytest.raises(Exception):
        endpoint.name = "other"  # type: ignore[misc]


# --- property: every accepted name yields valid operator object names --------------------------------------------------

_LABEL = st.from_regex(r"[a-z]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True)


@settings(max_examples=examples(60), deadline=None)
@given(name=_LABEL, namespace=_LABEL)
def test_accepted_names_give_valid_iec_container_and_router_service_names(name: str, namespace: str) -> None:
    # WHEN an endpoint with any DNS-label name and namespace is built
    try:
        endpoint = parse_endpoint(minimal(name=name, namespace=namespace))
    except ConfigError as error:
        # THEN a refusal is about the length of the router Service name only
        assert [i.path for i in error.issues] == ["name"] and "router Service" in str(error)
        assert len(f"{name}-xxxxxx-{namespace}-routing-service") > 63
        return
    # OR every name the operator derives from it is a valid DNS-1035 label
    for derived in (endpoint.resource_name, f"prefill-{endpoint.resource_name}", endpoint.router_service_name):
        assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", derived), derived


def test_model_size_and_kind_come_from_the_model_catalogue_when_not_given() -> None:
    # GIVEN endpoints naming catalogue models without parameters_billion
    small = parse_endpoint({**minimal(), "model": {**minimal()["model"], "name": "Llama-3.1-8B-Instruct"}})
    moe = parse_endpoint({**minimal(), "model": {**minimal()["model"], "name": "Qwen3-235B-A22B"}})
    large = parse_endpoint({**minimal(), "model": {**minimal()["model"], "name": "Llama-3.3-70B-Instruct"}})
    # THEN the 8B model and the MoE model get the "DPD will not pay off" warnings, the 70B dense model none
    assert [w.path for w in small.warnings()] == ["model.parameters_billion"]
    assert [(w.path, "mixture-of-experts" in w.message) for w in moe.warnings()] == [("model.name", True)]
    assert [w.path for w in large.warnings() if w.path.startswith("model")] == []
