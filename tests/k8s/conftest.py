"""Fixtures of the cdk8s tests: endpoints from plain data, and synthesis of one construct in a fresh chart."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import cdk8s
import pytest

from hyperpod_dpd.config.endpoints import EndpointConfig, parse_endpoint

BASE_ENDPOINT: dict[str, Any] = {
    "name": "llama",
    "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket", "prefix": "llama", "region": "us-west-2"}},
    "instance_type": "ml.p5.48xlarge",
}

Manifest = dict[str, Any]


@pytest.fixture(scope="session")
def make_endpoint() -> Callable[..., EndpointConfig]:
    """An endpoint built in Python: the minimal required fields, with top-level fields replaced by ``changes``."""

    def make(**changes: Any) -> EndpointConfig:
        data = copy.deepcopy(BASE_ENDPOINT)
        data.update(changes)
        return parse_endpoint(data, source="test endpoint")

    return make


@pytest.fixture(scope="session")
def synth() -> Callable[[Callable[[cdk8s.Chart], Any]], list[Manifest]]:
    """Build constructs into a fresh test chart with ``build(chart)`` and return the chart's manifests."""

    def run(build: Callable[[cdk8s.Chart], Any]) -> list[Manifest]:
        chart = cdk8s.Testing.chart()
        build(chart)
        return list(cdk8s.Testing.synth(chart))

    return run


def by_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def named(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [m for m in by_kind(manifests, kind) if m["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {[m['metadata']['name'] for m in by_kind(manifests, kind)]}"
    return found[0]


@pytest.fixture(scope="session")
def find() -> Callable[[list[Manifest], str, str], Manifest]:
    return named
