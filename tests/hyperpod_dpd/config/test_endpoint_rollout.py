"""``endpoints[].rollout`` and the SageMaker endpoint name of each IEC generation: what renders, what the drain is,
and bad input in one line naming file, field, value and what is allowed."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_rollout import DNS_TTL_SECONDS, SAGEMAKER_NAME_MAX, longest_request_seconds
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.errors import ConfigError
from tests.paths import ROOT

MINIMAL: dict[str, Any] = {
    "name": "llama",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "prefix": "llama", "region": "us-west-2"}},
    "instance_type": "ml.p5.48xlarge",
}


def endpoint(**changes: Any) -> Any:
    return parse_endpoint({**copy.deepcopy(MINIMAL), **changes}, source="test endpoint")


def refusal(**changes: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        endpoint(**changes)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message


def test_each_generation_renders_its_own_sagemaker_endpoint_name() -> None:
    # GIVEN a SageMaker endpoint name
    named = endpoint(sagemaker_endpoint_name="Llama-SM")
    # THEN it is the base of each generation's name, the configured generation's among them
    assert named.rendered_sagemaker_endpoint_name == f"Llama-SM-{named.generation}"
    assert named.sagemaker_endpoint_name_for("01d000") == "Llama-SM-01d000"
    # AND with the fixed name every generation keeps it; without a name there is no SageMaker endpoint
    same = endpoint(sagemaker_endpoint_name="Llama-SM", rollout={"fixed_sagemaker_endpoint_name": True})
    assert same.rendered_sagemaker_endpoint_name == "Llama-SM" == same.sagemaker_endpoint_name_for("01d000")
    assert endpoint().rendered_sagemaker_endpoint_name is None


def test_a_base_name_that_leaves_no_room_for_the_generation_is_refused() -> None:
    longest = "a" * (SAGEMAKER_NAME_MAX - 7)  # "-" and six hex digits make 63
    assert len(endpoint(sagemaker_endpoint_name=longest).rendered_sagemaker_endpoint_name) == SAGEMAKER_NAME_MAX
    message = refusal(sagemaker_endpoint_name=longest + "b")
    assert message.startswith(f"test endpoint: sagemaker_endpoint_name: '{longest}b': each IEC generation renders "
                              "'<name>-<generation>' (64 characters here")
    assert "use at most 56 characters, or set rollout.fixed_sagemaker_endpoint_name: true" in message
    # AND a fixed name may take all 63
    assert endpoint(sagemaker_endpoint_name=longest + "bcdefgh",
                    rollout={"fixed_sagemaker_endpoint_name": True}).rendered_sagemaker_endpoint_name == longest + "bcdefgh"


def test_two_endpoints_of_an_environment_cannot_share_a_sagemaker_name(write_config: Callable[..., Path]) -> None:
    def two(data: dict[str, Any]) -> None:
        first = data["endpoints"][0]
        first["sagemaker_endpoint_name"] = "llama-sm"
        second = copy.deepcopy(first) | {"name": "llama-b", "namespace": "llm-b", "sagemaker_endpoint_name": "LLAMA-SM"}
        data["endpoints"].append(second)

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(two))
    assert re.search(r"dev\.yaml: endpoints\[1\]\.sagemaker_endpoint_name: 'LLAMA-SM': also the name of endpoints\[0\] "
                     r"\(llama-3-3-70b\); SageMaker endpoint names are unique per account and Region, regardless of "
                     r"case$", str(raised.value))


@pytest.mark.parametrize(("changes", "seconds"), [
    ({"rollout": {"drain_seconds": 0}}, 0),  # explicit: cut open streams at the delete
    ({"rollout": {"drain_seconds": 900}, "max_model_len": 8192}, 900),  # explicit wins over derived
    # 8192 tokens at the 100 ms TPOT objective plus the 2 s TTFT objective = 821.2 s, up to 822, + the DNS TTL
    ({"max_model_len": 8192}, 822 + DNS_TTL_SECONDS),
    ({"max_model_len": 8192, "slo": {"tpot_ms": 20, "ttft_ms": 500}}, 165 + DNS_TTL_SECONDS),
    ({}, 13110 + DNS_TTL_SECONDS),  # no max_model_len: the catalogue's 131072-token context of Llama 3.3 70B
])
def test_the_drain_is_set_or_the_endpoints_longest_request(changes: dict[str, Any], seconds: int) -> None:
    assert endpoint(**changes).drain_seconds == seconds


def test_a_model_of_unknown_context_has_no_derived_drain() -> None:
    unknown = endpoint(model={"name": "house-model", "parameters_billion": 70,
                              "s3": {"bucket": "models-bucket", "region": "us-west-2"}})
    assert longest_request_seconds(unknown) is None and unknown.drain_seconds is None


@pytest.mark.parametrize(("rollout", "words"), [
    ({"drain_seconds": -1}, "rollout.drain_seconds: -1: Input should be greater than or equal to 0"),
    ({"drain_seconds": "60"}, "rollout.drain_seconds: '60': must be a whole number, not a string"),
    ({"drain_seconds": 86_401}, "rollout.drain_seconds: 86401: Input should be less than or equal to 86400"),
    ({"fixed_sagemaker_endpoint_name": 2}, "rollout.fixed_sagemaker_endpoint_name: 2: Input should be a valid "
                                           "boolean"),
    ({"drain": 60}, "rollout.drain: 'drain': unknown key; allowed keys here: drain_seconds, "
                    "fixed_sagemaker_endpoint_name"),
])
def test_bad_rollout_settings_fail_in_one_line(rollout: dict[str, Any], words: str) -> None:
    assert words in refusal(rollout=rollout)


def test_every_rollout_key_is_documented() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    for key in ("rollout.drain_seconds", "rollout.fixed_sagemaker_endpoint_name", "sagemaker_endpoint_name"):
        assert f"`{key}`" in text, key
