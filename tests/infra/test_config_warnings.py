"""The configuration's warnings as CDK annotations in a consumer's app (infra/config_warnings.py): on the construct
each concerns, once, acknowledgeable like any annotation, so a consumer's ``cdk synth`` shows them. One synthesis."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.infra import HyperPodDpdPlatform, availability_zone_context
from hyperpod_dpd.infra.config_warnings import ID_PREFIX, warning_id
from tests.paths import ROOT

WARNINGS_DIR = ROOT / "tests" / "fixtures" / "warnings"  # eks.version, no log group, no subscriber, max_model_len
ACKNOWLEDGED = "hpdpd:config:eks.version"


@pytest.fixture(scope="module")
def config() -> Any:
    return load_environment("dev", WARNINGS_DIR)


def _app(config: Any, outdir: str | None = None) -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App(outdir=outdir, context=availability_zone_context(config))
    return app, cdk.Stack(app, "Serving", env=cdk.Environment(account=config.account, region=config.region))


@pytest.fixture(scope="module")
def synthesized(config: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[HyperPodDpdPlatform, dict[str, list[str]]]:
    # GIVEN a consumer's stack with the platform, and one warning acknowledged on it (the consumer read it and agrees)
    app, stack = _app(config, str(tmp_path_factory.mktemp("consumer")))
    platform = HyperPodDpdPlatform(stack, "Dpd", config=config)
    cdk.Annotations.of(platform).acknowledge_warning(ACKNOWLEDGED, "the cluster runs 1.35 on purpose")
    # WHEN the app synthesizes THEN the assembly holds the stack's warning annotations, by construct path
    messages = app.synth().get_stack_artifact(stack.artifact_id).messages
    found: dict[str, list[str]] = {}
    for message in messages:
        if message.level == cdk.cx_api.SynthesisMessageLevel.WARNING and ID_PREFIX in str(message.entry.data):
            found.setdefault(message.id, []).append(str(message.entry.data))
    return platform, found


def test_each_warning_is_on_the_construct_it_concerns_once(config: Any, synthesized: Any) -> None:
    platform, found = synthesized
    endpoint = config.endpoints[0].name
    expected = {w.path: w for w in environment_warnings(config)}
    # THEN the environment's logging and subscriber warnings are on the platform construct, the endpoint's on its
    # manifest
    assert set(found) == {"/Serving/Dpd", f"/Serving/Dpd/Endpoint-{endpoint}"}, found
    assert found["/Serving/Dpd"] == [f"{expected[path].render(config.source)} [ack: {warning_id(path)}]"
                                     for path in ("operator.observability.logging", "alerts.emails")]
    assert found[f"/Serving/Dpd/Endpoint-{endpoint}"] == [
        f"{expected['endpoints[0].max_model_len'].render(config.source)} [ack: hpdpd:config:max_model_len]"]
    assert set(platform.endpoint_manifests) == {endpoint}


def test_an_acknowledged_warning_is_gone(synthesized: Any) -> None:
    _, found = synthesized
    # THEN the acknowledged eks.version warning is in no stack of the assembly (cdk synth does not show it)
    assert not any(ACKNOWLEDGED in data for messages in found.values() for data in messages)


def test_without_endpoint_manifests_an_endpoint_warning_goes_on_the_platform(config: Any) -> None:
    # GIVEN the platform without the endpoints' manifests (endpoints=False: the consumer applies them some other way)
    _, stack = _app(config)
    platform = HyperPodDpdPlatform(stack, "Dpd", config=config, endpoints=False)
    # THEN every warning is on the platform construct itself, the endpoint's included, none lost (no synthesis
    # needed: annotations are the construct's metadata)
    data = [str(m.data) for m in platform.node.metadata if m.type == "aws:cdk:warning"]
    assert sorted(d.rpartition(" [ack: ")[0] for d in data) == sorted(
        w.render(config.source) for w in environment_warnings(config))


@pytest.mark.parametrize(("path", "ack"), [
    ("eks.version", "hpdpd:config:eks.version"),
    ("endpoints[3].max_model_len", "hpdpd:config:max_model_len"),  # stable when endpoints are reordered
    ("endpoints[0].routing.strategy", "hpdpd:config:routing.strategy"),
])
def test_the_acknowledgement_id_is_the_field_path_inside_its_owner(path: str, ack: str) -> None:
    assert warning_id(path) == ack
