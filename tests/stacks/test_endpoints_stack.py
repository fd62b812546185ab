"""EndpointsStack: each endpoint's manifests are applied through the platform's kubectl provider, after the
inference add-on, and pass the same schema checks as the GitOps output; with delivery.endpoints gitops no stack holds
a manifest of what the GitOps tree carries, and delivery.handover retains every one of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.infra.platform import HANDOVER_PROPERTY
from hyperpod_dpd.k8s.gitops import render_environment
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly


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


# -- delivery: gitops (no manifest for what the GitOps tree carries) and the handover step before it --------------------

GITOPS_CONFIG_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "gitops" / "config"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"


@pytest.fixture(scope="module")
def delivered(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synthesized:
    """The GitOps fixture environments (dev: gitops; handover: cdk with delivery.handover), synthesized once."""
    from hyperpod_dpd.stacks.application import build_app

    outdir = tmp_path_factory.mktemp("cdk.out.delivery")
    app, _ = build_app(config_dir=GITOPS_CONFIG_DIR, outdir=str(outdir), context=cdk_context)
    app.synth()
    return read_assembly(outdir)


def test_gitops_mode_synthesizes_an_endpoints_stack_with_no_endpoint_object(delivered: Synthesized) -> None:
    # GIVEN dev of the GitOps fixture: one endpoint, delivery.endpoints gitops
    assert load_environment("dev", GITOPS_CONFIG_DIR).endpoints
    # THEN its endpoints stack holds only the placeholder: no manifest, no namespace, no RoleBinding
    resources = delivered.template("dev", "endpoints")["Resources"]
    assert [r["Type"] for r in resources.values()] == ["AWS::CloudFormation::WaitConditionHandle"]


def test_gitops_mode_applies_no_rbac_or_karpenter_manifest_but_keeps_what_a_controller_cannot_create(
        delivered: Synthesized) -> None:
    # GIVEN dev of the GitOps fixture, with an operations role and an autoscaled prefill group
    platform = delivered.template("dev", "platform")["Resources"]
    applied = delivered.resources("dev", "platform", KUBERNETES_RESOURCE)
    kinds = {o.get("kind") for r in applied.values() for o in json.loads(r["Properties"]["Manifest"])}
    # THEN the platform stack applies neither the operations RBAC nor the Karpenter node classes and pools
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "RoleBinding", "HyperpodNodeClass", "NodePool"}, kinds
    assert not [k for k in applied if "Karpenter" in k or "OperationsAccessRbac" in k]
    # AND the same fixture delivered by CDK does apply them (the handover environment)
    cdk_kinds = {o.get("kind") for r in delivered.resources("handover", "platform", KUBERNETES_RESOURCE).values()
                 for o in json.loads(r["Properties"]["Manifest"])}
    assert {"ClusterRole", "ClusterRoleBinding", "RoleBinding", "HyperpodNodeClass", "NodePool"} <= cdk_kinds
    # AND the operations role's EKS access entry, the inference add-on and HyperPod's AutoScaling stay with CDK
    entries = [r["Properties"] for r in platform.values() if r["Type"] == "AWS::EKS::AccessEntry"
               and r["Properties"].get("KubernetesGroups") == ["hyperpod-dpd-operations"]]
    assert [e["PrincipalArn"] for e in entries] == ["arn:aws:iam::111111111111:role/PlatformOperations"]
    assert any(r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-inference"
               for r in platform.values())
    (cluster,) = [r for r in platform.values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert cluster["Properties"]["AutoScaling"]["AutoScalerType"] == "Karpenter"


def test_cdk_mode_with_the_same_objects_still_applies_them(delivered: Synthesized) -> None:
    # GIVEN the handover fixture: the same shape as GitOps dev, delivered by CDK
    endpoints = delivered.resources("handover", "endpoints", KUBERNETES_RESOURCE)
    platform = delivered.resources("handover", "platform", KUBERNETES_RESOURCE)
    # THEN CDK applies the endpoint, its namespace and RoleBinding, the operations RBAC and the Karpenter objects
    assert sorted(next(p for p in ("Endpoint", "Namespace", "Operations") if k.startswith(p)) for k in endpoints) == [
        "Endpoint", "Namespace", "Operations"]
    assert any("Karpenter" in k for k in platform) and any("OperationsAccessRbac" in k for k in platform)


def test_handover_retains_every_manifest_that_gitops_would_remove(delivered: Synthesized, synthesized) -> None:
    # GIVEN the handover fixture (delivery.handover: true)
    handed = {**delivered.resources("handover", "endpoints", KUBERNETES_RESOURCE),
              **{k: v for k, v in delivered.resources("handover", "platform", KUBERNETES_RESOURCE).items()
                 if "Karpenter" in k or "OperationsAccessRbac" in k}}
    assert len(handed) == 5, sorted(handed)
    for logical_id, resource in handed.items():
        # THEN each is kept when it leaves the template: CloudFormation never asks the handler to kubectl delete
        assert resource["DeletionPolicy"] == "Retain" and resource["UpdateReplacePolicy"] == "Retain", logical_id
        if not logical_id.startswith("Namespace"):  # retained already; its properties stay as they were
            # AND the deploy that retains it is a real update of the resource, which keeps its physical id
            assert resource["Properties"][HANDOVER_PROPERTY] == "retain", logical_id
    # AND without handover (the shared fixture's dev) the endpoint manifest is deleted with its objects, as before
    (endpoint,) = _manifests(synthesized).values()
    assert endpoint["DeletionPolicy"] == "Delete" and HANDOVER_PROPERTY not in endpoint["Properties"]
