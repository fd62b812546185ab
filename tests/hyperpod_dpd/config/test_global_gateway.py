"""global.yaml's own checks: botocore's bounds and patterns, one line per problem naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hyperpod_dpd.config.global_gateway import GlobalConfig, RoutingWeights

MEMBER = {"environment": "west", "endpoint": "llama"}


def _gateway(**fields: object) -> dict[str, object]:
    return {"name": "llama-global", "account": "111111111111", "region": "us-west-2", "members": [MEMBER], **fields}


def test_weights_are_bounded_by_botocore_and_named_as_the_api_names_them() -> None:
    assert RoutingWeights(kv_headroom=0.5, error_rate=0).api() == {"KVHeadroom": 0.5, "ErrorRate": 0.0}
    with pytest.raises(ValidationError):
        RoutingWeights(queue_depth=1.5)


def test_eleven_members_and_a_bad_name_are_refused() -> None:
    with pytest.raises(ValidationError):
        GlobalConfig.model_validate({"gateways": [_gateway(members=[MEMBER] * 11)]})
    with pytest.raises(ValidationError):
        GlobalConfig.model_validate({"gateways": [_gateway(name="-bad")]})


def test_an_id_shaped_name_a_foreign_role_and_an_endpoint_in_two_gateways_are_issues() -> None:
    config = GlobalConfig.model_validate({"gateways": [
        _gateway(name="abcdef012345", execution_role_arn="arn:aws:iam::222222222222:role/x"),
        _gateway(name="other")]})
    issues = {(i.path, i.message.split(" ")[0]) for i in config.issues()}
    assert issues == {("gateways[0].name", "must"), ("gateways[0].execution_role_arn", "must"),
                      ("gateways[1].members[0]", "already")}
