"""Charts of every environment: schema-valid for the CRD and the cluster's Kubernetes, labelled, pinned, snapshotted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cdk8s
import jsonschema
import kubernetes_validate
import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, load_all
from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.k8s.charts import EndpointChart, NamespaceChart, add_environment_charts
from hyperpod_dpd.k8s.validation import crd_schemas

Manifest = dict[str, Any]
CRD = Path(__file__).resolve().parents[2] / "k8s" / "crds" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
MODEL = {"name": "Llama-3.3-70B-Instruct", "parameters_billion": 70,
         "s3": {"bucket": "models-bucket", "prefix": "Llama-3.3-70B-Instruct", "region": "us-west-2"}}

# Environments without endpoints in their file get one in Python, so every environment renders something.
PYTHON_ENDPOINTS: dict[str, dict[str, Any]] = {
    "staging": {"name": "llama-staging", "namespace": "llm", "model": MODEL, "instance_type": "ml.p5en.48xlarge",
                "max_model_len": 16384, "routing": {"strategy": "session"},
                "prefill": {"replicas": 2, "instance_group": "prefill"}, "decode": {"instance_group": "decode"}},
    "prod": {"name": "llama-prod", "namespace": "llm", "model": {**MODEL, "s3": {**MODEL["s3"], "region": "us-east-1"}},
             "instance_type": "ml.p6-b200.48xlarge", "max_model_len": 32768, "routing": {"strategy": "roundrobin"},
             "pd_buffer_size": 17179869184,
             "prefill": {"replicas": 3, "instance_group": "prefill", "max_unavailable": 1},
             "decode": {"instance_group": "decode", "max_unavailable": 0},
             "router": {"client_namespaces": ["apps"], "allowed_cidrs": ["10.192.0.0/16"],
                        "ingress": {"host": "llm.example.com", "scheme": "internal"}}},
}


@pytest.fixture(scope="module")
def environments() -> dict[str, EnvironmentConfig]:
    return {env.name: env for env in load_all()}


@pytest.fixture(scope="module")
def charts(environments: dict[str, EnvironmentConfig]) -> dict[str, list[EndpointChart]]:
    built = {}
    for name, env in environments.items():
        extra = [parse_endpoint(PYTHON_ENDPOINTS[name])] if name in PYTHON_ENDPOINTS else []
        # the fixture and example endpoints are warning-free (a warning here would hide among the tests' own)
        assert [w.render(name) for e in (*env.endpoints, *extra) for w in e.warnings()] == []
        built[name] = add_environment_charts(cdk8s.App(), env, extra_endpoints=extra)
    return built


@pytest.fixture(scope="module")
def rendered(charts: dict[str, list[EndpointChart]]) -> dict[str, dict[str, list[Manifest]]]:
    return {env: {chart.node.id: chart.to_json() for chart in env_charts} for env, env_charts in charts.items()}


@pytest.fixture(scope="module")
def crd_validator() -> jsonschema.Draft7Validator:
    crd = yaml.safe_load(CRD.read_text())
    [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return jsonschema.Draft7Validator(v1["schema"]["openAPIV3Schema"])


def _all(rendered: dict[str, dict[str, list[Manifest]]]) -> list[tuple[str, Manifest]]:
    return [(env, m) for env, charts in rendered.items() for manifests in charts.values() for m in manifests]


def test_every_environment_renders_one_chart_per_endpoint(rendered: dict[str, dict[str, list[Manifest]]]) -> None:
    assert {env: sorted(charts) for env, charts in rendered.items()} == {
        "dev": ["llama-3-3-70b"], "prod": ["llama-prod"], "staging": ["llama-staging"]}
    kinds = sorted(m["kind"] for m in rendered["prod"]["llama-prod"])
    assert kinds == ["InferenceEndpointConfig", "Ingress", "Namespace", "NetworkPolicy", "NetworkPolicy",
                     "PodDisruptionBudget", "PodDisruptionBudget", "Service"]


def test_every_custom_resource_matches_the_crd_schema(rendered: dict[str, dict[str, list[Manifest]]],
                                                      crd_validator: jsonschema.Draft7Validator) -> None:
    resources = [(env, m) for env, m in _all(rendered) if m["kind"] == "InferenceEndpointConfig"]
    assert len(resources) == 3
    for env, manifest in resources:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in crd_validator.iter_errors(manifest)]
        assert errors == [], (env, manifest["metadata"]["name"])


def test_every_core_object_passes_kubernetes_validate_strict(rendered: dict[str, dict[str, list[Manifest]]],
                                                             environments: dict[str, EnvironmentConfig]) -> None:
    core = [(env, m) for env, m in _all(rendered) if m["kind"] != "InferenceEndpointConfig"]
    assert len(core) == 19  # per endpoint: its Namespace, client Service, 2 NetworkPolicies, 2 PDBs (+ prod's Ingress)
    for env, manifest in core:
        kubernetes_validate.validate(manifest, environments[env].eks.version, strict=True)


def test_every_object_is_labelled_with_its_endpoint(rendered: dict[str, dict[str, list[Manifest]]]) -> None:
    for _, charts in rendered.items():
        for name, manifests in charts.items():
            for manifest in manifests:
                labels = manifest["metadata"]["labels"]
                assert labels["app.kubernetes.io/managed-by"] == "hyperpod-dpd"
                assert labels["hyperpod-dpd/endpoint"] == name


def test_endpoints_are_pinned_to_their_environments_gpu_az(rendered: dict[str, dict[str, list[Manifest]]],
                                                           environments: dict[str, EnvironmentConfig]) -> None:
    for env, manifest in _all(rendered):
        if manifest["kind"] == "InferenceEndpointConfig":
            topology = manifest["spec"]["pdSpec"]["topologySpec"]
            assert topology == {"sameAZ": True, "availabilityZone": environments[env].network.gpu_availability_zone}


def test_dev_manifests_match_the_snapshot(rendered: dict[str, dict[str, list[Manifest]]], snapshot: Any) -> None:
    assert rendered["dev"]["llama-3-3-70b"] == snapshot


def test_app_synthesis_writes_validated_files(tmp_path: Path, environments: dict[str, EnvironmentConfig]) -> None:
    app = cdk8s.App(outdir=str(tmp_path))
    add_environment_charts(app, environments["dev"])
    app.synth()
    [written] = list(tmp_path.glob("*.k8s.yaml"))
    kinds = [doc["kind"] for doc in yaml.safe_load_all(written.read_text())]
    assert kinds[:2] == ["Namespace", "InferenceEndpointConfig"] and len(kinds) == 7


@pytest.mark.parametrize(("extra", "expected"), [
    ({"prefill": {"instance_group": "gpu"}, "namespace": "other"},
     "environment dev: endpoints[1].prefill.instance_group: 'gpu': is not an instance group"),
    ({"name": "llama-3-3-70b", "namespace": "other"},
     "environment dev: endpoints[1].name: 'llama-3-3-70b': duplicate endpoint name (also endpoints[0])"),
    ({"topology": {"availability_zone": "us-west-2b"}, "namespace": "other"},
     "environment dev: endpoints[1].topology.availability_zone: 'us-west-2b': must be network.gpu_availability_zone"),
])
def test_python_endpoints_are_cross_checked_against_the_environment(
        environments: dict[str, EnvironmentConfig], make_endpoint: Callable[..., EndpointConfig],
        extra: dict[str, Any], expected: str) -> None:
    app = cdk8s.App()
    with pytest.raises(ConfigError) as raised:
        add_environment_charts(app, environments["dev"], extra_endpoints=[make_endpoint(**extra)])
    assert str(raised.value).startswith(expected), str(raised.value)
    assert app.charts == []


def test_a_chart_owns_its_non_default_namespace_and_leaves_default_alone(environments: dict[str, EnvironmentConfig]) -> None:
    # GIVEN dev's endpoint in its own namespace, and the same endpoint moved to "default"
    own = add_environment_charts(cdk8s.App(), environments["dev"])[0]
    endpoint = environments["dev"].endpoints[0].model_copy(update={"namespace": "default"})
    shared = add_environment_charts(cdk8s.App(), environments["dev"].model_copy(update={"endpoints": (endpoint,)}))[0]
    # THEN only the first renders a (cluster-scoped, un-namespaced) Namespace object, first in apply order
    first = own.to_json()[0]
    assert (first["kind"], first["metadata"]["name"], "namespace" in first["metadata"]) == ("Namespace", "llm-serving", False)
    assert "Namespace" not in [m["kind"] for m in shared.to_json()]


# Endpoints that between them make the charts emit every kind they can: both Ingress classes, the kvaware port rules,
# no policies, a namespace the chart may not declare (default) and one it declares.
VARIANTS: dict[str, dict[str, Any]] = {
    "alb": {"namespace": "llm", "router": {"allowed_cidrs": ["10.192.0.0/16"], "ingress": {
        "host": "llama.example.com", "certificate_arn": "arn:aws:acm:us-west-2:111111111111:certificate/abc-123"}}},
    "nginx": {"router": {"allowed_cidrs": ["10.0.0.0/8"], "ingress": {
        "host": "llama.internal.example.com", "class_name": "nginx", "tls_secret_name": "llama-tls"}}},
    "kvaware": {"namespace": "kv", "routing": {"strategy": "kvaware"}, "invocation_path": "v1/completions",
                "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-dpd:0.19.1",
                "image_versions": {"vllm": "0.19.1", "lmcache": "0.4.3"}},
    "no-policies": {"namespace": "open", "router": {"network_policy": False}},
}
CHART_KINDS = {"Namespace", "InferenceEndpointConfig", "Service", "NetworkPolicy", "PodDisruptionBudget", "Ingress"}


def test_every_kind_the_charts_emit_passes_its_schema_in_every_variant(
        make_endpoint: Callable[..., EndpointConfig], environments: dict[str, EnvironmentConfig],
        crd_validator: jsonschema.Draft7Validator) -> None:
    # GIVEN one chart per variant and a namespace chart, for the dev cluster's Kubernetes version
    version = environments["dev"].eks.version
    app = cdk8s.App()
    charts: list[cdk8s.Chart] = [EndpointChart(app, name, endpoint=make_endpoint(**changes), kubernetes_version=version)
                                 for name, changes in VARIANTS.items()]
    charts.append(NamespaceChart(app, "Namespace-retained", namespace="retained", kubernetes_version=version))
    # WHEN they render
    manifests = [m for chart in charts for m in chart.to_json()]
    # THEN they cover every kind the charts can emit, and each manifest passes its own schema, checked here directly:
    # the CRD's openAPIV3Schema for the IEC, kubernetes-validate strict for the core kinds
    assert {m["kind"] for m in manifests} == CHART_KINDS
    for manifest in manifests:
        if manifest["kind"] == "InferenceEndpointConfig":
            assert [e.message for e in crd_validator.iter_errors(manifest)] == [], manifest["metadata"]["name"]
        else:
            assert (manifest["apiVersion"], manifest["kind"]) not in crd_schemas()  # not mistaken for a custom resource
            kubernetes_validate.validate(manifest, version, strict=True)
    ingresses = sorted(m["spec"]["ingressClassName"] for m in manifests if m["kind"] == "Ingress")
    assert ingresses == ["alb", "nginx"]
