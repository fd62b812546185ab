"""Namespaces an endpoint may not take (hyperpod_dpd.catalogue.namespaces): Kubernetes' own (``kube-*``,
``default``) and those of the add-ons the platform installs. Each is refused in one line naming the field, the value
and why; an environment's endpoint must name a namespace of its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.catalogue.namespaces import RESERVED_NAMESPACES, reserved_namespace
from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE, OBSERVABILITY_NAMESPACE
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.errors import ConfigError

ENDPOINT: dict[str, Any] = {
    "name": "llama", "instance_type": "ml.p5.48xlarge",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "region": "us-west-2"}},
}


def _refusal(config_dir: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.split("dev.yaml: ", 1)[1]


def _namespace(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"][0]["namespace"] = value
    return mutate


@pytest.mark.parametrize(("namespace", "why"), [
    ("kube-system", "the prefix 'kube-' belongs to Kubernetes' system namespaces"),
    ("kube-public", "the prefix 'kube-' belongs to Kubernetes' system namespaces"),
    ("kube-node-lease", "the prefix 'kube-' belongs to Kubernetes' system namespaces"),
    ("kube-llm", "the prefix 'kube-' belongs to Kubernetes' system namespaces"),
    (INFERENCE_NAMESPACE, "the HyperPod Inference Operator's namespace"),
    (OBSERVABILITY_NAMESPACE, "the HyperPod observability add-on's namespace"),
    ("aws-hyperpod", "the namespace the HyperPod dependencies chart creates"),
    ("cert-manager", "the cert-manager add-on's namespace"),
])
def test_a_reserved_namespace_is_refused_in_one_line(write_config: Callable[..., Path], namespace: str,
                                                     why: str) -> None:
    # GIVEN dev's endpoint moved into a namespace Kubernetes or an add-on owns
    # WHEN the environment loads
    message = _refusal(write_config(_namespace(namespace)))
    # THEN one line names the field, the value, why it is reserved and what to use instead
    assert message.startswith(f"endpoints[0].namespace: '{namespace}': is reserved: {why}"), message
    assert message.endswith("an endpoint needs a namespace of its own (its chart declares it), such as 'llm-serving'")


def test_the_default_namespace_is_refused_for_an_environment_endpoint(write_config: Callable[..., Path]) -> None:
    message = _refusal(write_config(_namespace("default")))
    assert message.startswith("endpoints[0].namespace: 'default': an environment's endpoint needs a namespace of its "
                              "own, such as 'llm-serving' (not Kubernetes' default namespace"), message


def test_an_environment_endpoint_without_a_namespace_is_told_to_name_one(write_config: Callable[..., Path]) -> None:
    # GIVEN dev's endpoint without a namespace key
    message = _refusal(write_config(lambda d: d["endpoints"][0].pop("namespace")))
    # THEN the value is "missing" (the key was left out), not the default it would have had
    assert message.startswith("endpoints[0].namespace: missing: an environment's endpoint needs a namespace of its "
                              "own"), message


def test_a_namespace_of_its_own_is_accepted(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(_namespace("team-llm")))
    assert env.endpoints[0].namespace == "team-llm" and reserved_namespace("team-llm") is None


@pytest.mark.parametrize("namespace", ["kube-system", INFERENCE_NAMESPACE, "cert-manager"])
def test_an_endpoint_built_in_python_refuses_a_reserved_namespace(namespace: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_endpoint({**ENDPOINT, "namespace": namespace}, source="my endpoint")
    assert str(raised.value).startswith(f"my endpoint: namespace: '{namespace}': is reserved: ")


def test_an_endpoint_built_in_python_alone_keeps_the_default_namespace() -> None:
    # GIVEN an endpoint built without an environment (a chart of the user's own)
    endpoint = parse_endpoint(ENDPOINT)
    # THEN it keeps Kubernetes' default namespace, which its chart never declares (tests/k8s/test_namespace_ownership)
    assert endpoint.namespace == "default" and "default" in RESERVED_NAMESPACES
