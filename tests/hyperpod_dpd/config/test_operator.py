"""The operator section: versions from the catalogue, naming rules of the role and buckets, and its bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.errors import ConfigError


def test_defaults_are_the_newest_operator_and_the_documented_names(write_config: Callable[..., Path]) -> None:
    env = load_environment("staging", write_config(env="staging"))
    operator = env.operator
    assert (operator.version, operator.effective_addon_version) == ("3.7", "v1.8.0-eksbuild.1")
    assert operator.execution_role(env.hyperpod.cluster_name) == "SageMakerHyperPodInference-hpdpd-staging"
    assert operator.tls_bucket(env.account, env.region) == "hyperpod-tls-222222222222-us-west-2"
    assert operator.prerequisite_version("cert-manager") == "v1.18.2-eksbuild.2"
    assert operator.observability.enabled is False


def _operator(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.setdefault("operator", {}).update(values)


BAD_INPUT = {
    "unknown operator": (_operator(version="3.9"), "operator.version", "'3.9'", "must be a known operator release: 3.0"),
    "operator version as a number": (_operator(version=3.2), "operator.version", "3.2", "must be a quoted string"),
    "add-on older than its operator": (_operator(version="3.3", addon_version="v1.3.0-eksbuild.1"),
                                       "operator.addon_version", "'v1.3.0-eksbuild.1'", "is older than operator 3.3"),
    "prerequisite below its minimum": (_operator(prerequisite_versions={"aws-mountpoint-s3-csi-driver": "v1.13.0-eksbuild.1"}),
                                       "operator.prerequisite_versions.aws-mountpoint-s3-csi-driver", "'v1.13.0-eksbuild.1'",
                                       "is below the minimum the inference operator needs (v1.14.1-eksbuild.1)"),
    "unknown prerequisite": (_operator(prerequisite_versions={"ebs-csi": "v1.0.0-eksbuild.1"}),
                             "operator.prerequisite_versions.ebs-csi", "'ebs-csi'", "is not a prerequisite add-on; allowed:"),
    "TLS bucket without the hyperpod-tls prefix": (_operator(tls_bucket_name="inference-certs"), "operator.tls_bucket_name",
                                                    "'inference-certs'", "must start with 'hyperpod-tls-'"),
    "TLS bucket over S3's 63 characters": (_operator(tls_bucket_name="hyperpod-tls-" + "a" * 51), "operator.tls_bucket_name",
                                           "'hyperpod-tls-aaaa", "must be a valid S3 bucket name"),
    "TLS bucket with upper case": (_operator(tls_bucket_name="hyperpod-tls-Certs"), "operator.tls_bucket_name",
                                   "'hyperpod-tls-Certs'", "must be a valid S3 bucket name"),
    "execution role without the prefix": (_operator(execution_role_name="InferenceOperatorRole"), "operator.execution_role_name",
                                          "'InferenceOperatorRole'", "must start with 'SageMakerHyperPodInference'"),
    "model bucket in another region": (_operator(model_buckets=[{"name": "weights-eu", "region": "eu-west-1"}]),
                                       "operator.model_buckets[0].region", "'eu-west-1'", "must be the cluster's Region us-west-2"),
    "model bucket with a bad name": (_operator(model_buckets=[{"name": "Weights_Bucket"}]), "operator.model_buckets[0].name",
                                     "'Weights_Bucket'", "must be a valid S3 bucket name"),
    "workspace given as an id": (_operator(observability={"enabled": True, "prometheus_workspace_arn": "ws-0123"}),
                                 "operator.observability.prometheus_workspace_arn", "'ws-0123'",
                                 "must be an Amazon Managed Prometheus workspace ARN such as 'arn:aws:aps:"),
    "workspace of another account": (_operator(observability={"enabled": True, "prometheus_workspace_arn":
                                                              "arn:aws:aps:us-west-2:111111111111:workspace/ws-0123"}),
                                     "operator.observability.prometheus_workspace_arn",
                                     "'arn:aws:aps:us-west-2:111111111111:workspace/ws-0123'",
                                     "must be a workspace of the environment's account 222222222222 and Region us-west-2"),
    "workspace in another Region": (_operator(observability={"enabled": True, "prometheus_workspace_arn":
                                                             "arn:aws:aps:eu-west-1:222222222222:workspace/ws-0123"}),
                                    "operator.observability.prometheus_workspace_arn", "'arn:aws:aps:eu-west-1:",
                                    "must be a workspace of the environment's account 222222222222 and Region us-west-2"),
    "workspace in another partition": (_operator(observability={"enabled": True, "prometheus_workspace_arn":
                                                                "arn:aws-cn:aps:cn-north-1:222222222222:workspace/ws-0123"}),
                                       "operator.observability.prometheus_workspace_arn", "'arn:aws-cn:aps:cn-north-1:",
                                       "must be in partition 'aws' (the partition of us-west-2)"),
    "Grafana without observability": (_operator(observability={"grafana": True}), "operator.observability.grafana",
                                      "true", "needs observability.enabled: true"),
    "Grafana as a string": (_operator(observability={"enabled": True, "grafana": "yes please"}),
                            "operator.observability.grafana", "'yes please'", "valid boolean"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_operator_input_fails_with_one_line(case: str, write_config: Callable[..., Path]) -> None:
    mutate, path, value, allowed = BAD_INPUT[case]
    config_dir = write_config(mutate, env="staging")
    with pytest.raises(ConfigError) as raised:
        load_environment("staging", config_dir)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    assert f"staging.yaml: {path}: {value}" in message and allowed in message, message


def test_observability_writes_to_an_existing_workspace_of_the_environment(write_config: Callable[..., Path]) -> None:
    # GIVEN staging with observability on an existing workspace of its account and Region, and Grafana
    arn = "arn:aws:aps:us-west-2:222222222222:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef"
    config_dir = write_config(_operator(observability={"enabled": True, "prometheus_workspace_arn": arn, "grafana": True}),
                              env="staging")
    # WHEN loaded THEN the workspace id is known and Grafana is on; logging stays off
    observability = load_environment("staging", config_dir).operator.observability
    assert observability.prometheus_workspace_id == "ws-0123abcd-4567-89ef-0123-456789abcdef"
    assert (observability.grafana, observability.logging) == (True, False)


def test_grafana_is_refused_where_the_hyperpod_set_up_does_not_create_it() -> None:
    from types import SimpleNamespace

    from hyperpod_dpd.config.operator import Observability

    root = SimpleNamespace(account="222222222222", region="sa-east-1", partition="aws")
    (issue,) = Observability(enabled=True, grafana=True).issues(root, "operator.observability")
    assert issue.path == "operator.observability.grafana"
    assert "is not offered in sa-east-1 by the HyperPod set-up; allowed Regions: us-east-1" in issue.message
