"""delivery: who applies an environment's in-cluster objects (cdk by default, or a GitOps controller), and its bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.delivery import DeliveryConfig
from hyperpod_dpd.errors import ConfigError
from tests.paths import ROOT

GITOPS_CONFIG_DIR = ROOT / "tests" / "fixtures" / "gitops" / "config"


def _delivery(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.setdefault("delivery", {}).update(values)


def test_an_environment_without_the_key_is_delivered_by_cdk(write_config: Callable[..., Path]) -> None:
    # GIVEN the fixture dev environment, which says nothing about delivery
    env = load_environment("dev", write_config())
    # THEN CDK delivers it, as before the key existed, and no handover is under way
    assert env.delivery == DeliveryConfig()
    assert (env.delivery.endpoints, env.delivery.gitops, env.delivery.handover) == ("cdk", False, False)


def test_the_gitops_fixture_is_delivered_by_a_controller() -> None:
    # GIVEN the GitOps fixture environment
    env = load_environment("dev", GITOPS_CONFIG_DIR)
    # THEN it is gitops, and the handover fixture is the cdk step before a switch
    assert env.delivery.endpoints == "gitops" and env.delivery.gitops
    handover = load_environment("handover", GITOPS_CONFIG_DIR)
    assert (handover.delivery.endpoints, handover.delivery.handover) == ("cdk", True)


def test_the_model_is_frozen_and_keyword_only() -> None:
    delivery = DeliveryConfig(endpoints="gitops")
    with pytest.raises(ValueError, match="frozen"):
        delivery.endpoints = "cdk"  # type: ignore[misc]


BAD_INPUT = {
    "unknown owner": (_delivery(endpoints="argo"), "delivery.endpoints", "'argo'", "'cdk' or 'gitops'"),
    "handover with gitops": (_delivery(endpoints="gitops", handover=True), "delivery.handover", "true",
                             "applies to 'endpoints: cdk' only"),
    "handover as a string": (_delivery(handover="yes"), "delivery.handover", "'yes'", "boolean"),
    "unknown key": (_delivery(out="deploy/k8s"), "delivery.out", "'out'", "unknown key; allowed keys here: endpoints, "
                                                                           "handover"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_delivery_is_one_line_naming_the_file_field_value_and_what_is_allowed(
        case: str, write_config: Callable[..., Path]) -> None:
    mutate, field, value, allowed = BAD_INPUT[case]
    # GIVEN a dev file with a bad delivery section
    config_dir = write_config(mutate)
    # WHEN it is loaded
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    # THEN one line names the file, the field path, the value and what is allowed
    (line,) = str(raised.value).splitlines()
    assert line.startswith(f"{config_dir / 'dev.yaml'}: {field}: {value}: "), line
    assert allowed in line
