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
    assert (operator.version, operator.effective_addon_version) == ("3.4", "v1.5.0-eksbuild.1")
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
