"""EndpointsStack: each endpoint's manifests are applied through the platform's kubectl provider, after the
inference add-on, and pass the same schema checks as the GitOps output."""

from __future__ import annotations

import json
from typing import Any

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.k8s.gitops import render_environment


def _manifests(synthesized) -> dict[str, dict[str, Any]]:
    """The endpoint charts' manifests (the stack also holds the operations RoleBinding of each namespace)."""
    applied = synthesized.resources("dev", "endpoints", "Custom::AWSCDK-EKS-KubernetesResource")
    return {k: v for k, v in applied.items() if k.startswith("Endpoint")}


def _namespaces(synthesized) -> dict[str, dict[str, Any]]:
    applied = synthesized.resources("dev", "endpoints", "Custom::AWSCDK-EKS-KubernetesResource")
    return {k: v for k, v in applied.items() if k.startswith("Namespace")}


def test_one_manifest_per_endpoint_with_the_same_objects_as_the_gitops_output(synthesized) -> None:
    (resource,) = _manifests(synthesized).values()
    (namespace,) = _namespaces(synthesized).values()
    # the endpoint's objects, plus its namespace applied on its own, are what the GitOps output holds
    applied = json.loads(resource["Properties"]["Manifest"]) + json.loads(namespace["Properties"]["Manifest"])
    written = render_environment(load_environment("dev"))["llama-3-3-70b"]

    def strip(objects: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
        """Compare kind, name and spec; CDK adds a prune label to every object it applies."""
        return sorted((o["kind"], o["metadata"]["name"], o.get("spec")) for o in objects)  # type: ignore[misc]

    assert strip(applied) == strip(written)
    kinds = sorted(o["kind"] for o in applied)
    assert "InferenceEndpointConfig" in kinds and "Service" in kinds and "PodDisruptionBudget" in kinds
    assert resource["Properties"]["Overwrite"] is True
    assert all(any(k.startswith("aws.cdk.eks/prune-") for k in o["metadata"]["labels"])
               for o in json.loads(resource["Properties"]["Manifest"]))


def test_an_endpoint_namespace_is_retained_and_never_pruned(synthesized) -> None:
    # GIVEN dev's endpoint in its own namespace
    (name, namespace), = _namespaces(synthesized).items()
    (objects,) = [json.loads(namespace["Properties"]["Manifest"])]
    # THEN the namespace is its own manifest: kept when it leaves the template, without a prune label or prune
    assert [o["kind"] for o in objects] == ["Namespace"]
    assert objects[0]["metadata"]["name"] == load_environment("dev").endpoints[0].namespace
    assert not any(k.startswith("aws.cdk.eks/prune-") for k in objects[0]["metadata"].get("labels", {}))
    assert namespace["DeletionPolicy"] == "Retain" and namespace["UpdateReplacePolicy"] == "Retain"
    assert "PruneLabel" not in namespace["Properties"]
    # AND the endpoint's objects carry no Namespace and are applied after it
    (endpoint,) = _manifests(synthesized).values()
    assert "Namespace" not in [o["kind"] for o in json.loads(endpoint["Properties"]["Manifest"])]
    assert name in endpoint["DependsOn"]


def test_endpoints_deploy_after_the_platform_stack_that_holds_the_inference_addon(synthesized) -> None:
    manifest = json.loads((synthesized.outdir / "assembly-dev" / "manifest.json").read_text())
    endpoints = next(a for a in manifest["artifacts"].values() if a.get("displayName") == "dev/Endpoints")
    assert any("Platform" in d for d in endpoints["dependencies"])
    assert synthesized.stack_names[("dev", "endpoints")] == "hpdpd-dev-endpoints"


def test_manifests_use_the_platforms_kubectl_provider_and_cluster(synthesized) -> None:
    (resource,) = _manifests(synthesized).values()
    props = resource["Properties"]
    assert "KubectlProvider" in props["ServiceToken"]["Fn::GetStackOutput"]["OutputName"]
    assert props["ClusterName"]["Fn::GetStackOutput"]["StackName"] == "hpdpd-dev-platform"


def test_environments_without_endpoints_keep_a_deployable_endpoints_stack(synthesized) -> None:
    # GIVEN fixture environments that declare no endpoint (staging, prod)
    for env in ("staging", "prod"):
        # THEN their endpoints stack holds only a placeholder, so removing a last endpoint deletes its objects
        resources = synthesized.template(env, "endpoints")["Resources"]
        assert [r["Type"] for r in resources.values()] == ["AWS::CloudFormation::WaitConditionHandle"]
