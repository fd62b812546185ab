"""Preflight of a global gateway's member against botocore's EC2, SageMaker and Service Quotas models (Stubber)."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.global_gateway import GlobalConfig
from hyperpod_dpd.ops import global_preflight
from tests.paths import ROOT

CONFIG = ROOT / "tests" / "fixtures" / "global"
GATEWAYS = GlobalConfig.model_validate({"gateways": [{
    "name": "llama-global", "account": "111111111111", "region": "us-west-2",
    "members": [{"environment": "west", "endpoint": "llama-3-3-70b"}, {"environment": "east", "endpoint": "llama-3-3-70b"}]}]})


class Clients:
    def __init__(self) -> None:
        session = botocore.session.get_session()
        self.made = {(s, r): session.create_client(s, region_name=r, aws_access_key_id="t", aws_secret_access_key="t")
                     for s in ("ec2", "sagemaker", "service-quotas") for r in ("us-east-1", "us-west-2")}
        self.stubs = {k: Stubber(c) for k, c in self.made.items()}
        for stub in self.stubs.values():
            stub.activate()

    def client(self, service: str) -> Any:
        return self.made[(service, "us-east-1")]  # the environment's Region (east)

    def new_client(self, service: str, *, region: str | None = None) -> Any:
        return self.made[(service, region or "us-east-1")]


def _run(opt_in: str, quotas: list[dict[str, Any]], existing: int) -> dict[str, Any]:
    env = load_environment("east", CONFIG)
    clients = Clients()
    clients.stubs[("ec2", "us-east-1")].add_response(
        "describe_regions", {"Regions": [{"RegionName": "us-east-1", "OptInStatus": opt_in}]},
        {"RegionNames": ["us-east-1"], "AllRegions": True})
    clients.stubs[("service-quotas", "us-west-2")].add_response(
        "list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
    clients.stubs[("sagemaker", "us-west-2")].add_response("list_global_inference_gateways", {
        "GlobalInferenceGatewaySummaries": [
            {"Arn": f"arn:aws:sagemaker:us-west-2:111111111111:global-inference-gateway/{i:012d}",
             "Id": f"{i:012d}", "Name": f"other-{i}", "Status": "ACTIVE"} for i in range(existing)]}, {})
    checks = global_preflight.global_checks(env, GATEWAYS, clients)
    for stub in clients.stubs.values():
        stub.assert_no_pending_responses()
    return {c.name: c for c in checks}


def test_a_member_in_a_standard_region_within_quota_passes() -> None:
    quota = [{"QuotaName": "Global inference gateways per Region", "QuotaCode": "L-TEST", "Value": 5.0}]
    checks = _run("opt-in-not-required", quota, existing=2)
    assert {n: c.status for n, c in checks.items()} == {
        "global-region:llama-global": "pass", "global-lb-subnets:llama-global": "pass",
        "global-quota:llama-global": "pass"}
    assert checks["global-quota:llama-global"].detail == "3 of 5 global inference gateways in us-west-2"


def test_an_opt_in_region_and_a_full_quota_fail_and_an_unlisted_quota_warns() -> None:
    quota = [{"QuotaName": "Global inference gateways per Region", "QuotaCode": "L-TEST", "Value": 2.0}]
    checks = _run("opted-in", quota, existing=2)
    assert checks["global-region:llama-global"].status == "fail"
    assert "opt-in Region" in checks["global-region:llama-global"].detail
    assert checks["global-quota:llama-global"].status == "fail"
    unlisted = _run("opt-in-not-required", [], existing=0)
    assert unlisted["global-quota:llama-global"].status == "warn"
    assert "could not be confirmed" in unlisted["global-quota:llama-global"].detail


@pytest.mark.parametrize("env_name", ["west"])
def test_an_environment_of_no_gateway_has_no_check(env_name: str) -> None:
    other = GlobalConfig.model_validate({"gateways": [{
        "name": "g", "account": "111111111111", "region": "us-west-2",
        "members": [{"environment": "east", "endpoint": "llama-3-3-70b"}]}]})
    assert global_preflight.global_checks(load_environment(env_name, CONFIG), other, Clients()) == []
