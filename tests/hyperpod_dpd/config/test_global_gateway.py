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


def test_a_role_of_another_partition_is_an_issue() -> None:
    # GIVEN a gateway in us-west-2 (partition aws) with a role of aws-cn in its account
    config = GlobalConfig.model_validate({"gateways": [
        _gateway(execution_role_arn="arn:aws-cn:iam::111111111111:role/x")]})
    # THEN one issue names the field and the partition it must be in
    (issue,) = config.issues()
    assert issue.path == "gateways[0].execution_role_arn" and "partition aws" in issue.message


def test_a_name_is_used_once_in_the_file_whatever_its_region() -> None:
    # GIVEN one name in two Regions (SageMaker allows it; the stage global-<name> would be built twice)
    config = GlobalConfig.model_validate({"gateways": [
        _gateway(), _gateway(region="us-east-1", members=[{"environment": "east", "endpoint": "llama"}])]})
    # THEN the second is one issue naming the stage and the stack
    (issue,) = config.issues()
    assert issue.path == "gateways[1].name" and "global-llama-global" in issue.message


def test_a_gateway_whose_stage_is_an_environments_is_an_issue() -> None:
    from hyperpod_dpd.config.global_gateway import global_issues

    # GIVEN an environment file global-llama-global.yaml next to the gateway llama-global
    config = GlobalConfig.model_validate({"gateways": [_gateway()]})
    # THEN one issue on the gateway's name (the member, not loaded here, is not checked)
    (issue,) = global_issues(config, ["west", "global-llama-global"], {})
    assert issue.path == "gateways[0].name" and "environment global-llama-global" in issue.message
