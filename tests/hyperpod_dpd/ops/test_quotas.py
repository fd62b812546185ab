"""Finding "<type> for cluster usage" quotas by listing (moto has no SageMaker quotas: botocore Stubber)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.stub import Stubber

from hyperpod_dpd.ops.quotas import cluster_quotas, quota_name


def _quota(name: str, value: float, code: str) -> dict[str, Any]:
    return {"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaName": name, "QuotaCode": code,
            "Value": value}


def test_the_applied_quota_is_found_across_pages_by_name(aws_credentials: None) -> None:
    client = boto3.client("service-quotas", region_name="us-west-2")
    with Stubber(client) as stub:
        # GIVEN the quota on the second page, spelled with other case and spacing
        stub.add_response("list_service_quotas",
                          {"Quotas": [_quota("ml.p5.48xlarge for training job usage", 4, "L-T1")], "NextToken": "t"},
                          {"ServiceCode": "sagemaker"})
        stub.add_response("list_service_quotas",
                          {"Quotas": [_quota("ML.P5.48xlarge  for cluster usage", 2, "L-C1")]},
                          {"ServiceCode": "sagemaker", "NextToken": "t"})
        # WHEN the cluster quota of ml.p5.48xlarge is looked up
        found = cluster_quotas(client, ["ml.p5.48xlarge"])
        stub.assert_no_pending_responses()
    # THEN the cluster-usage quota matched, not the training-job one
    quota = found["ml.p5.48xlarge"]
    assert quota is not None and (quota.code, quota.value, quota.applied) == ("L-C1", 2.0, True)
    assert quota_name("ml.p5.48xlarge") == "ml.p5.48xlarge for cluster usage"


def test_a_quota_never_adjusted_falls_back_to_its_default(aws_credentials: None) -> None:
    client = boto3.client("service-quotas", region_name="us-west-2")
    with Stubber(client) as stub:
        stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        stub.add_response("list_aws_default_service_quotas",
                          {"Quotas": [_quota("ml.m7i.2xlarge for cluster usage", 10, "L-D1")]},
                          {"ServiceCode": "sagemaker"})
        found = cluster_quotas(client, ["ml.m7i.2xlarge", "ml.p6-b200.48xlarge"])
    default = found["ml.m7i.2xlarge"]
    assert default is not None and default.value == 10 and not default.applied
    assert found["ml.p6-b200.48xlarge"] is None
