"""DisaggregatedEndpoint: every prop and default, the DPD variables, per-role resources and node selectors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoints import EndpointConfig
from hyperpod_dpd.errors import ConfigError, ConfigWarning
from hyperpod_dpd.k8s.endpoint import DisaggregatedEndpoint

Manifest = dict[str, Any]
TOKEN_ARN = "arn:aws:acm:us-west-2:111111111111:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab"


def _iec(synth: Callable[..., list[Manifest]], endpoint: EndpointConfig,
         after: Callable[[DisaggregatedEndpoint], None] | None = None) -> Manifest:
    def build(chart: cdk8s.Chart) -> None:
        construct = DisaggregatedEndpoint(chart, "Endpoint", endpoint=endpoint)
        if after:
            after(construct)

    [manifest] = synth(build)
    return manifest


@pytest.fixture(scope="module")
def defaults(synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> Manifest:
    """Only the required props."""
    return _iec(synth, make_endpoint())


@pytest.fixture(scope="module")
def dev_iec(synth: Callable[..., list[Manifest]]) -> Manifest:
    env = load_environment("dev")
    return _iec(synth, env.endpoints[0].in_zone(env.network.gpu_availability_zone))


FULL: dict[str, Any] = {
    "namespace": "llm",
    "model": {"name": "Llama-3.3-70B-Instruct", "version": "3.3", "prefetch": True,
              "huggingface": {"model_id": "meta-llama/Llama-3.3-70B-Instruct", "revision": "a" * 40,
                              "token_secret": {"name": "hf-token", "key": "token"}}},
    "image": "lmcache/vllm-openai:v0.4.3",
    "tensor_parallel_size": 4,
    "max_model_len": 32768,
    "gpu_memory_utilization": 0.8,
    "prefill": {"replicas": 2, "instance_group": "prefill", "node_selector": {"team": "llm"},
                "args": ["--max-num-seqs", "16"],
                "autoscaling": {"min_replicas": 1, "max_replicas": 4, "polling_interval_seconds": 15,
                                "cooldown_seconds": 120, "scale_down_stabilization_seconds": 600,
                                "cloudwatch": {"metric_name": "PrefillQueue", "namespace": "HyperPod/DPD",
                                               "dimensions": {"Endpoint": "llama"}, "target_value": 8,
                                               "statistic": "Maximum", "period_seconds": 60}}},
    "decode": {"instance_group": "decode", "args": ["--max-num-seqs", "32"], "max_unavailable": 0,
               "autoscaling": {"min_replicas": 1, "max_replicas": 1, "prometheus": {
                   "query": "sum(vllm:num_requests_waiting)", "target_value": 20, "metric_type": "Value",
                   "server_address": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd"}}},
    "routing": {"threshold": 0, "strategy": "roundrobin"},
    "pd_buffer_size": 17179869184,
    "l1_cache": False,
    "environment": {"HF_HOME": "/tmp/hf_home"},  # noqa: S108 - the documented scratch location
    "args": ["--enable-prefix-caching"],
    "invocation_path": "v1/completions",
    "health_check_path": "/healthz",
    "sagemaker_endpoint_name": "llama-70b",
    "topology": {"availability_zone": "us-west-2a", "placement_group": "dpd-pg"},
    "request_limits": {"max_concurrent_requests": 64, "max_queue_size": 128, "overflow_status_code": 503},
    "metrics": {"enabled": True, "scrape_interval_seconds": 30},
    "tls": {"certificate_output_s3_uri": "s3://hyperpod-tls-111111111111-us-west-2/llama",
            "acm_certificate_arn": TOKEN_ARN, "domain_name": "llama.example.com", "hosted_zone_id": "Z0123456789ABC"},
    "router": {"allowed_cidrs": ["10.192.0.0/16"]},
}


@pytest.fixture(scope="module")
def full(synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> Manifest:
    """Every prop set, plus args added after construction (they must still land: the spec is produced lazily)."""

    def add(construct: DisaggregatedEndpoint) -> None:
        construct.add_args("worker", "--disable-log-requests")
        construct.add_args("decode", "--gpu-memory-utilization", "0.7")

    return _iec(synth, make_endpoint(**FULL), add)


# --- defaults ----------------------------------------------------------------------------------------------------------

def test_defaults_produce_a_named_dpd_iec(defaults: Manifest, make_endpoint: Callable[..., EndpointConfig]) -> None:
    endpoint = make_endpoint()
    assert defaults["apiVersion"] == "inference.sagemaker.aws.amazon.com/v1"
    assert defaults["kind"] == "InferenceEndpointConfig"
    assert defaults["metadata"] == {
        "name": endpoint.resource_name, "namespace": "default",
        "labels": {"hyperpod-dpd/endpoint": "llama", "hyperpod-dpd/generation": endpoint.generation}}
    spec = defaults["spec"]
    assert spec["modelName"] == "Llama-3.3-70B-Instruct"
    assert spec["instanceType"] == "ml.p5.48xlarge"
    assert spec["invocationEndpoint"] == "v1/chat/completions"
    assert spec["modelSourceConfig"] == {"modelSourceType": "s3", "modelLocation": "llama",
                                         "s3Storage": {"bucketName": "models-bucket", "region": "us-west-2"}}
    assert "endpointName" not in spec and "tlsConfig" not in spec and "dnsConfig" not in spec


def test_defaults_enable_prefix_aware_routing_l1_cache_metrics_and_vllm_health(defaults: Manifest) -> None:
    spec = defaults["spec"]
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    assert spec["kvCacheSpec"] == {"enableL1Cache": True}
    assert spec["loadBalancer"] == {"healthCheckPath": "/health"}
    assert spec["metrics"] == {"enabled": True, "modelMetrics": {"port": 8000}}


def test_defaults_pd_spec_threshold_topology_and_one_replica_per_role(defaults: Manifest) -> None:
    pd = defaults["spec"]["pdSpec"]
    assert pd["routingThreshold"] == 4096
    assert pd["topologySpec"] == {"sameAZ": True}
    assert (pd["prefillSpec"]["replicas"], pd["decodingSpec"]["replicas"]) == (1, 1)
    assert "autoScalingSpec" not in pd
    assert "args" not in pd["prefillSpec"] and "args" not in pd["decodingSpec"]


def test_dpd_environment_variables_are_set_for_both_roles(defaults: Manifest) -> None:
    assert defaults["spec"]["worker"]["environmentVariables"] == [
        {"name": "PD_BUFFER_SIZE", "value": "8589934592"},
        {"name": "LMCACHE_SAVE_DECODE_CACHE", "value": "False"},
        {"name": "PYTHONHASHSEED", "value": "0"},
    ]


def test_each_role_requests_every_gpu_and_half_the_host_by_default(defaults: Manifest) -> None:
    expected = {"cpu": "96", "memory": "1024Gi", "nvidia.com/gpu": "8"}
    pd = defaults["spec"]["pdSpec"]
    for role in ("prefillSpec", "decodingSpec"):
        assert pd[role]["resources"] == {"requests": expected, "limits": expected}
    assert defaults["spec"]["worker"]["resources"] == {"requests": expected, "limits": expected}


def test_each_role_selects_hyperpod_nodes_of_its_role(defaults: Manifest) -> None:
    pd = defaults["spec"]["pdSpec"]
    assert pd["prefillSpec"]["nodeSelector"] == {"hyperpod-dpd/role": "prefill"}
    assert pd["decodingSpec"]["nodeSelector"] == {"hyperpod-dpd/role": "decode"}


def test_default_worker_block_is_what_the_schema_requires(defaults: Manifest) -> None:
    worker = defaults["spec"]["worker"]
    assert worker["image"] == "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1"
    assert worker["modelInvocationPort"] == {"name": "http", "containerPort": 8000}
    assert worker["modelVolumeMount"] == {"name": "model-weights", "mountPath": "/opt/ml/model"}
    assert worker["args"] == ["--model", "/opt/ml/model", "--host", "0.0.0.0", "--port", "8000",  # noqa: S104
                              "--tensor-parallel-size", "8", "--gpu-memory-utilization", "0.75"]
    assert "requestLimits" not in worker


# --- the committed dev endpoint ----------------------------------------------------------------------------------------

def test_dev_endpoint_is_pinned_to_the_gpu_az_and_its_instance_groups(dev_iec: Manifest) -> None:
    pd = dev_iec["spec"]["pdSpec"]
    assert pd["topologySpec"] == {"sameAZ": True, "availabilityZone": "us-west-2a"}
    assert pd["prefillSpec"]["nodeSelector"] == {"hyperpod-dpd/role": "prefill", "hyperpod-dpd/instance-group": "prefill"}
    assert pd["decodingSpec"]["nodeSelector"] == {"hyperpod-dpd/role": "decode", "hyperpod-dpd/instance-group": "decode"}
    assert dev_iec["spec"]["worker"]["args"][-4:] == ["--max-model-len", "16384", "--gpu-memory-utilization", "0.75"]


# --- every prop --------------------------------------------------------------------------------------------------------

def test_model_source_from_hugging_face_with_token_revision_version_and_prefetch(full: Manifest) -> None:
    spec = full["spec"]
    assert spec["modelVersion"] == "3.3"
    assert spec["modelSourceConfig"] == {
        "modelSourceType": "huggingface", "prefetchEnabled": True,
        "huggingFaceModel": {"modelId": "meta-llama/Llama-3.3-70B-Instruct", "commitSHA": "a" * 40,
                             "tokenSecretRef": {"name": "hf-token", "key": "token"}}}


def test_tensor_parallel_size_sets_the_gpus_and_host_share_of_each_pod(full: Manifest) -> None:
    expected = {"cpu": "48", "memory": "512Gi", "nvidia.com/gpu": "4"}
    for role in ("prefillSpec", "decodingSpec"):
        assert full["spec"]["pdSpec"][role]["resources"]["requests"] == expected
    assert full["spec"]["worker"]["args"][6:12] == ["--tensor-parallel-size", "4", "--max-model-len", "32768",
                                                    "--gpu-memory-utilization", "0.8"]


def test_worker_image_args_and_environment(full: Manifest) -> None:
    worker = full["spec"]["worker"]
    assert worker["image"] == "lmcache/vllm-openai:v0.4.3"
    assert worker["args"][-2:] == ["--enable-prefix-caching", "--disable-log-requests"]
    assert worker["environmentVariables"] == [
        {"name": "PD_BUFFER_SIZE", "value": "17179869184"},
        {"name": "LMCACHE_SAVE_DECODE_CACHE", "value": "False"},
        {"name": "PYTHONHASHSEED", "value": "0"},
        {"name": "HF_HOME", "value": "/tmp/hf_home"},  # noqa: S108
    ]
    assert worker["requestLimits"] == {"maxConcurrentRequests": 64, "maxQueueSize": 128, "overflowStatusCode": 503}


def test_per_role_replicas_args_and_node_selectors(full: Manifest) -> None:
    pd = full["spec"]["pdSpec"]
    assert pd["prefillSpec"]["replicas"] == 2
    assert pd["prefillSpec"]["args"] == ["--max-num-seqs", "16"]
    assert pd["decodingSpec"]["args"] == ["--max-num-seqs", "32", "--gpu-memory-utilization", "0.7"]
    assert pd["prefillSpec"]["nodeSelector"] == {"team": "llm", "hyperpod-dpd/role": "prefill",
                                                 "hyperpod-dpd/instance-group": "prefill"}


def test_per_role_autoscaling_with_cloudwatch_and_prometheus_triggers(full: Manifest,
                                                                       make_endpoint: Callable[..., EndpointConfig]) -> None:
    name = make_endpoint(**FULL).resource_name
    scaling = full["spec"]["pdSpec"]["autoScalingSpec"]
    assert scaling["prefillAutoScaling"] == {
        "minReplicaCount": 1, "maxReplicaCount": 4, "pollingInterval": 15, "cooldownPeriod": 120,
        "scaleDownStabilizationTime": 600,
        "cloudWatchTrigger": {"name": f"{name}-prefill", "namespace": "HyperPod/DPD", "metricName": "PrefillQueue",
                              "metricStat": "Maximum", "targetValue": 8, "metricType": "Average",
                              "metricCollectionPeriod": 60, "dimensions": [{"name": "Endpoint", "value": "llama"}]}}
    assert scaling["decodingAutoScaling"] == {
        "minReplicaCount": 1, "maxReplicaCount": 1,
        "prometheusTrigger": {"name": f"{name}-decode", "query": "sum(vllm:num_requests_waiting)", "targetValue": 20,
                              "metricType": "Value",
                              "serverAddress": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd"}}


def test_routing_threshold_strategy_topology_and_cache(full: Manifest) -> None:
    spec = full["spec"]
    assert spec["pdSpec"]["routingThreshold"] == 0
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "roundrobin"}
    assert spec["pdSpec"]["topologySpec"] == {"sameAZ": True, "availabilityZone": "us-west-2a", "placementGroup": "dpd-pg"}
    assert spec["kvCacheSpec"] == {"enableL1Cache": False}


def test_exposure_sagemaker_endpoint_tls_custom_domain_metrics_and_health(full: Manifest) -> None:
    spec = full["spec"]
    # the SageMaker endpoint is named per generation: two generations side by side must not share one name
    assert spec["endpointName"] == f"llama-70b-{full['metadata']['labels']['hyperpod-dpd/generation']}"
    assert spec["invocationEndpoint"] == "v1/completions"
    assert spec["loadBalancer"] == {"healthCheckPath": "/healthz"}
    assert spec["metrics"] == {"enabled": True, "metricsScrapeIntervalSeconds": 30, "modelMetrics": {"port": 8000}}
    assert spec["tlsConfig"] == {"tlsCertificateOutputS3Uri": "s3://hyperpod-tls-111111111111-us-west-2/llama",
                                 "customCertificateConfig": {"acmArn": TOKEN_ARN, "domainName": "llama.example.com"}}
    assert spec["dnsConfig"] == {"hostedZoneId": "Z0123456789ABC"}
    assert full["metadata"]["namespace"] == "llm"


def test_a_fixed_sagemaker_endpoint_name_is_rendered_as_configured(
        synth: Callable[..., list[Manifest]], make_endpoint: Callable[..., EndpointConfig]) -> None:
    # GIVEN an endpoint that opts out of per-generation SageMaker names
    endpoint = make_endpoint(sagemaker_endpoint_name="llama-70b", rollout={"fixed_sagemaker_endpoint_name": True})
    # WHEN its IEC is rendered
    spec = _iec(synth, endpoint)["spec"]
    # THEN every generation carries the configured name itself
    assert spec["endpointName"] == "llama-70b" == endpoint.sagemaker_endpoint_name_for("0ld000")


def test_fsx_source_and_disabled_metrics(synth: Callable[..., list[Manifest]],
                                         make_endpoint: Callable[..., EndpointConfig]) -> None:
    manifest = _iec(synth, make_endpoint(
        model={"name": "llama", "fsx": {"file_system_id": "fs-0123456789abcdef0", "path": "models/llama",
                                        "mount_name": "abcdef", "dns_name": "fs.example.com"}},
        metrics={"enabled": False}))
    assert manifest["spec"]["modelSourceConfig"] == {
        "modelSourceType": "fsx", "modelLocation": "models/llama",
        "fsxStorage": {"fileSystemId": "fs-0123456789abcdef0", "dnsName": "fs.example.com", "mountName": "abcdef"}}
    assert manifest["spec"]["metrics"] == {"enabled": False}


# --- construct contract ------------------------------------------------------------------------------------------------

def test_the_generated_l1_is_the_default_child_named_resource(make_endpoint: Callable[..., EndpointConfig]) -> None:
    chart = cdk8s.Testing.chart()
    construct = DisaggregatedEndpoint(chart, "Endpoint", endpoint=make_endpoint())
    assert construct.node.default_child is construct.resource
    assert construct.resource.node.id == "Resource"
    assert cdk8s.ApiObject.of(construct).name == construct.name == make_endpoint().resource_name
    assert construct.namespace == "default"


def test_invalid_props_fail_before_joining_the_tree(make_endpoint: Callable[..., EndpointConfig]) -> None:
    # GIVEN an endpoint changed without validation (model_copy skips pydantic)
    bad = make_endpoint().model_copy(update={"tensor_parallel_size": 3})
    chart = cdk8s.Testing.chart()
    # WHEN it is used
    with pytest.raises(ConfigError, match=r"^endpoint llama: tensor_parallel_size: 3: must divide the 8 GPUs"):
        DisaggregatedEndpoint(chart, "Endpoint", endpoint=bad)
    # THEN nothing was added to the chart
    assert chart.node.children == []


def test_add_args_refuses_flags_derived_from_typed_fields(make_endpoint: Callable[..., EndpointConfig]) -> None:
    construct = DisaggregatedEndpoint(cdk8s.Testing.chart(), "Endpoint", endpoint=make_endpoint())
    with pytest.raises(ConfigError, match=r"prefill\.args\[1\]: '--port': is set by hyperpod-dpd"):
        construct.add_args("prefill", "--max-num-seqs=8", "--port", "9000")


@pytest.mark.parametrize(("changes", "text"), [
    ({"model": {"name": "Llama-3.1-8B", "parameters_billion": 8, "s3": {"bucket": "models-bucket", "region": "us-west-2"}}},
     "endpoint llama: model.parameters_billion: 8.0: DPD pays off for dense models of 70B+ parameters"),
    ({"max_model_len": 2048}, "endpoint llama: max_model_len: 2048: is below routing.threshold (4096)"),
])
def test_doubtful_props_are_reported_by_the_endpoint_not_again_at_construction(
        make_endpoint: Callable[..., EndpointConfig], changes: dict[str, Any], text: str) -> None:
    # GIVEN an endpoint with one doubtful choice: its warning is the endpoint's (shown once where the configuration
    # is loaded, and as a CDK annotation: tests/stacks/test_warnings.py)
    endpoint = make_endpoint(**changes)
    [rendered] = [w.render("endpoint llama") for w in endpoint.warnings()]
    assert rendered.startswith(text)
    # WHEN the construct renders it THEN no Python warning repeats it on every render
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        DisaggregatedEndpoint(cdk8s.Testing.chart(), "Endpoint", endpoint=endpoint)


def test_the_dev_endpoint_constructs_without_warnings() -> None:
    endpoint = load_environment("dev").endpoints[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        DisaggregatedEndpoint(cdk8s.Testing.chart(), "Endpoint", endpoint=endpoint)


def test_an_immutable_change_renders_a_new_iec_name(synth: Callable[..., list[Manifest]],
                                                    make_endpoint: Callable[..., EndpointConfig],
                                                    defaults: Manifest) -> None:
    changed = _iec(synth, make_endpoint(pd_buffer_size=34359738368))
    assert changed["metadata"]["name"] != defaults["metadata"]["name"]
    assert changed["metadata"]["labels"]["hyperpod-dpd/endpoint"] == defaults["metadata"]["labels"]["hyperpod-dpd/endpoint"]
