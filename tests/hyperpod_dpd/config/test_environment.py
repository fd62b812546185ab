"""The environment as a whole: production rules, the DPD version gate, model buckets and region checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.errors import ConfigError


def test_dev_declares_a_dpd_endpoint_on_an_operator_that_supports_it() -> None:
    env = load_environment("dev")
    assert [e.name for e in env.endpoints] == ["llama-3-3-70b"]
    assert env.operator.release.dpd


def test_model_buckets_include_every_bucket_an_endpoint_loads_from(write_config: Callable[..., Path]) -> None:
    def extra(data: dict[str, Any]) -> None:
        endpoint = dict(data["endpoints"][0], name="second", namespace="team-b")
        endpoint["model"] = dict(endpoint["model"], s3={"bucket": "team-weights", "prefix": "x", "region": "us-west-2"})
        data["endpoints"].append(endpoint)
        # (a node pair per endpoint: two endpoints cannot share the one prefill and one decode node)
        data["hyperpod"]["instance_groups"] = [{**g, "count": 2} if g["name"] in ("prefill", "decode") else g
                                               for g in data["hyperpod"]["instance_groups"]]

    env = load_environment("dev", write_config(extra))
    assert [(b.name, b.create) for b in env.model_buckets] == [
        ("hpdpd-models-111111111111-us-west-2", True), ("team-weights", False)]


def _one_line(config_dir: Path, env: str = "dev") -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment(env, config_dir)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message


def test_dpd_endpoint_on_an_operator_below_3_2_is_refused_with_the_version_to_set(write_config) -> None:
    message = _one_line(write_config(lambda d: d["operator"].__setitem__("version", "3.1.3")))
    assert message.endswith(
        "dev.yaml: operator.version: '3.1.3': DPD endpoints (pdSpec) need inference operator 3.2 or newer; set "
        "operator.version to '3.2' or later (add-on amazon-sagemaker-hyperpod-inference v1.3.0-eksbuild.1 or newer)")


def test_an_old_operator_is_fine_without_dpd_endpoints(write_config) -> None:
    def colocated(data: dict[str, Any]) -> None:
        data["operator"]["version"] = "3.1.3"
        del data["endpoints"]

    assert load_environment("dev", write_config(colocated)).operator.version == "3.1.3"


def test_endpoint_model_in_another_region_is_refused(write_config) -> None:
    message = _one_line(write_config(lambda d: d["endpoints"][0]["model"]["s3"].__setitem__("region", "us-east-1")))
    assert "dev.yaml: endpoints[0].model.s3.region: 'us-east-1': must be the cluster's Region us-west-2" in message


@pytest.mark.parametrize(("mutate", "path", "rule"), [
    (lambda d: d.__setitem__("removal_policy", "destroy"), "removal_policy", "must be 'retain' when production is true"),
    (lambda d: d.__setitem__("termination_protection", False), "termination_protection", "must be true when production"),
    (lambda d: d["eks"].update(endpoint_access="public_and_private", public_access_cidrs=["0.0.0.0/0"]),
     "eks.public_access_cidrs", "a production API endpoint must be private or restricted"),
])
def test_production_enforces_retention_protection_and_a_closed_endpoint(write_config, mutate, path: str, rule: str) -> None:
    message = _one_line(write_config(mutate, env="prod"), env="prod")
    assert f"prod.yaml: {path}: " in message and rule in message
