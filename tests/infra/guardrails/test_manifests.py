"""DPD manifest rules read the IECs that CDK applies, and fire on a broken hash seed, image or GPU request."""

from __future__ import annotations

import json
from typing import Any

from hyperpod_dpd.infra.guardrails.rules.manifests import endpoint_configs
from tests.infra.guardrails.conftest import first, run


def _edit(stage: Any, change: Any) -> None:
    resource = first(stage, "Custom::AWSCDK-EKS-KubernetesResource", "Endpoint")  # the endpoint chart, not the RBAC
    objects = json.loads(resource["Properties"]["Manifest"])
    iec = next(o for o in objects if o["kind"] == "InferenceEndpointConfig")
    change(iec)
    resource["Properties"]["Manifest"] = json.dumps(objects)


def test_dev_endpoint_is_found_and_compliant(view) -> None:
    stage = view("dev")
    assert [o["metadata"]["name"].rsplit("-", 1)[0] for _, _, o in endpoint_configs(stage)] == ["llama-3-3-70b"]
    assert [f for rule in ("HPDPD-K8S1", "HPDPD-K8S2", "HPDPD-K8S3") for f in run(rule, stage)] == []


def test_hash_seed_other_than_zero_fires_k8s1(view) -> None:
    stage = view("dev")

    def seed(iec: dict[str, Any]) -> None:
        for variable in iec["spec"]["worker"]["environmentVariables"]:
            if variable["name"] == "PYTHONHASHSEED":
                variable["value"] = "42"
    _edit(stage, seed)
    (finding,) = run("HPDPD-K8S1", stage)
    assert "PYTHONHASHSEED is '42'" in finding.detail


def test_per_role_image_fires_k8s2(view) -> None:
    stage = view("dev")
    _edit(stage, lambda iec: iec["spec"]["pdSpec"]["decodingSpec"].__setitem__("image", "other:latest"))
    (finding,) = run("HPDPD-K8S2", stage)
    assert finding.location.endswith("pdSpec.decodingSpec") and "'image'" in finding.detail


def test_role_without_gpu_request_fires_k8s3(view) -> None:
    stage = view("dev")
    _edit(stage, lambda iec: iec["spec"]["pdSpec"]["prefillSpec"]["resources"]["requests"].pop("nvidia.com/gpu"))
    (finding,) = run("HPDPD-K8S3", stage)
    assert finding.location.endswith("pdSpec.prefillSpec.resources.requests")
