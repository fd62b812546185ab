"""The handover row of preflight: a gitops environment whose deployed stacks still apply Kubernetes manifests that are
not retained would delete the live objects on its first gitops deploy. CloudFormation answers through botocore's
Stubber with the service model's real shapes (moto's GetTemplate cannot hold aws-cdk-lib's custom resources)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.config import EnvironmentConfig, load_environment
from hyperpod_dpd.ops.handover import MANIFEST_TYPE, handover_checks
from tests.paths import FIXTURE_CONFIG_DIR

GITOPS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "gitops" / "config"
REGION = "us-west-2"


@pytest.fixture(scope="module")
def gitops_env() -> EnvironmentConfig:
    return load_environment("dev", GITOPS_DIR)


@pytest.fixture
def cloudformation(aws_credentials: None) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("cloudformation", region_name=REGION)
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def _template(**resources: dict[str, Any]) -> str:
    return json.dumps({"Resources": resources})


def _manifest(retained: bool) -> dict[str, Any]:
    resource: dict[str, Any] = {"Type": MANIFEST_TYPE, "Properties": {"Manifest": "[]"}}
    if retained:
        resource["DeletionPolicy"] = "Retain"
    return resource


def _expect(stub: Stubber, stack: str, body: str | None) -> None:
    params = {"StackName": stack, "TemplateStage": "Original"}
    if body is None:
        stub.add_client_error("get_template", service_error_code="ValidationError",
                              service_message=f"Stack with id {stack} does not exist", http_status_code=400,
                              expected_params=params)
    else:
        stub.add_response("get_template", {"TemplateBody": body, "StagesAvailable": ["Original", "Processed"]},
                          params)


def test_manifests_a_gitops_deploy_would_delete_fail_with_the_handover_step(
        gitops_env: EnvironmentConfig, cloudformation: tuple[Any, Stubber]) -> None:
    client, stub = cloudformation
    # GIVEN the environment deployed in cdk mode: the platform's RBAC and the endpoint's manifest not retained, the
    # namespace retained
    _expect(stub, "hpdpd-dev-platform", _template(OperationsAccessRbac=_manifest(False), Bucket={"Type": "AWS::S3::Bucket"}))
    _expect(stub, "hpdpd-dev-endpoints", _template(Namespacellmserving=_manifest(True), Endpointllama=_manifest(False)))
    # WHEN preflight reads the deployed templates
    rows = {r.name: r for r in handover_checks(gitops_env, client)}
    # THEN each stack fails, naming the manifests whose objects kubectl would delete, with the handover as the fix
    platform, endpoints = rows["handover:hpdpd-dev-platform"], rows["handover:hpdpd-dev-endpoints"]
    assert platform.status == "fail" and "(OperationsAccessRbac)" in platform.detail
    assert endpoints.status == "fail" and "1 Kubernetes manifest(s)" in endpoints.detail
    assert "Endpointllama" in endpoints.detail and "Namespacellmserving" not in endpoints.detail
    assert "handover: true" in (endpoints.fix or "")


def test_retained_or_undeployed_stacks_pass(gitops_env: EnvironmentConfig,
                                            cloudformation: tuple[Any, Stubber]) -> None:
    client, stub = cloudformation
    # GIVEN a platform stack deployed with the handover (everything retained) and no endpoints stack yet
    _expect(stub, "hpdpd-dev-platform", _template(OperationsAccessRbac=_manifest(True)))
    _expect(stub, "hpdpd-dev-endpoints", None)
    # THEN nothing would be deleted
    rows = list(handover_checks(gitops_env, client))
    assert [r.status for r in rows] == ["pass", "pass"]
    assert "is not deployed" in rows[1].detail


def test_a_template_that_cannot_be_read_warns_and_never_passes(gitops_env: EnvironmentConfig,
                                                               cloudformation: tuple[Any, Stubber]) -> None:
    client, stub = cloudformation
    # GIVEN a deployed template that is not JSON
    _expect(stub, "hpdpd-dev-platform", "Resources:\n  X: {Type: AWS::S3::Bucket}\n")
    _expect(stub, "hpdpd-dev-endpoints", _template())
    rows = list(handover_checks(gitops_env, client))
    # THEN its row warns with the command to look at it
    assert rows[0].status == "warn" and "not a JSON object" in rows[0].detail
    assert rows[1].status == "pass"


def test_a_cdk_environment_has_no_handover_row(aws_credentials: None) -> None:
    # GIVEN an environment the endpoints stack delivers, WHEN the check runs, THEN it reads nothing
    client = boto3.client("cloudformation", region_name=REGION)
    with Stubber(client) as stub:
        assert list(handover_checks(load_environment("dev", FIXTURE_CONFIG_DIR), client)) == []
        stub.assert_no_pending_responses()
