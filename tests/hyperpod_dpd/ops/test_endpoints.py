"""Reading the environment's endpoints and the names the operator gives them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from hyperpod_dpd.config import parse_environment
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.endpoints import configured_endpoints, iec_name, router_url, select_endpoints
from tests.paths import ROOT


def test_an_environment_without_endpoints_has_none(base_configs: dict[str, dict[str, Any]]) -> None:
    # GIVEN an environment file that declares no endpoints WHEN it is loaded THEN it has none
    data = copy.deepcopy(base_configs["dev"])
    data.pop("endpoints", None)
    assert configured_endpoints(parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)) == ()


def test_endpoints_are_read_in_order(make_endpoint: Callable[..., Any]) -> None:
    first, second = make_endpoint(name="a"), make_endpoint(name="b")
    assert configured_endpoints(SimpleNamespace(endpoints=[first, second])) == (first, second)


def test_the_iec_name_carries_the_generation_when_there_is_one(make_endpoint: Callable[..., Any]) -> None:
    assert iec_name(make_endpoint(name="llama")) == "llama"
    generated = make_endpoint(name="llama", resource_name="llama-1a2b3c")
    assert iec_name(generated) == "llama-1a2b3c"
    assert router_url(generated) == ("http://llama-1a2b3c-default-routing-service.hyperpod-inference-system"
                                     ".svc.cluster.local:443/v1/chat/completions")


def test_endpoints_are_selected_by_name_or_iec_name(make_endpoint: Callable[..., Any]) -> None:
    endpoints = (make_endpoint(name="a"), make_endpoint(name="b", resource_name="b-9f9f9f"))
    assert select_endpoints(endpoints, None) == endpoints
    assert select_endpoints(endpoints, "b-9f9f9f") == (endpoints[1],)
    with pytest.raises(HpdpdError, match="no endpoint named 'c' in the environment; endpoints: a, b"):
        select_endpoints(endpoints, "c")
