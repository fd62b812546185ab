"""global.yaml's own checks: botocore's bounds and patterns, one line per problem naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hyperpod_dpd.config.global_gateway import GlobalConfig, RoutingWeights, read_global
from hyperpod_dpd.errors import ConfigError

MEMBER = {"environment": "west", "endpoint": "llama"}


def _gateway(**fields: object) -> dict[str, object]:
    return {"name": "llama-global", "account": "111111111111", "region": "us-west-2", "members": [MEMBER], **fields}


def test_weights_are_bounded_by_botocore_and_named_as_the_api_names_them() -> None:
    weights = RoutingWeights(kv_headroom=0.5, queue_depth=0.5, region_proximity=0, error_rate=0)
    assert weights.api() == {"KVHeadroom": 0.5, "QueueDepth": 0.5, "RegionProximity": 0.0, "ErrorRate": 0.0}
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


@pytest.mark.parametrize(("weights", "expected"), [
    ({"kv_headroom": 0.5, "error_rate": 0.5}, "2 of the 4 weights given, queue_depth, region_proximity missing"),
    ({"kv_headroom": 0.4, "queue_depth": 0.4, "region_proximity": 0.4, "error_rate": 0.4}, "sum to 1.6"),
])
def test_weights_are_all_four_summing_to_one_or_none(weights: dict[str, float], expected: str) -> None:
    # GIVEN a gateway whose weights the API would refuse ("Specify all four weights or none ... sum to 1.0, within
    # 0.001")
    # WHEN global.yaml is read
    with pytest.raises(ValidationError) as raised:
        GlobalConfig.model_validate({"gateways": [_gateway(weights=weights)]})
    # THEN it is refused on the weights field, saying what is wrong and what is allowed
    error = next(e for e in raised.value.errors() if e["loc"] == ("gateways", 0, "weights"))
    assert expected in error["msg"]
    assert "give all four" in error["msg"] or "within 0.001" in error["msg"]


def test_four_weights_within_the_api_tolerance_and_no_weights_are_accepted() -> None:
    # GIVEN four weights summing to 1.0005 (within the API's 0.001), and a gateway with none
    near = RoutingWeights(kv_headroom=0.25, queue_depth=0.25, region_proximity=0.25, error_rate=0.2505)
    # THEN both are accepted; none sends no weights (SageMaker's defaults)
    assert set(near.api()) == {"KVHeadroom", "QueueDepth", "RegionProximity", "ErrorRate"}
    assert RoutingWeights().api() == {}


def test_a_bad_weight_in_global_yaml_is_one_message_naming_the_file_and_field(tmp_path: Path) -> None:
    # GIVEN a global.yaml whose only gateway has a partial set of weights
    (tmp_path / "global.yaml").write_text(
        "gateways:\n  - name: llama-global\n    account: '111111111111'\n    region: us-west-2\n"
        "    weights: {kv_headroom: 0.5, error_rate: 0.5}\n    members:\n      - {environment: west, endpoint: llama}\n")
    # WHEN it is read
    with pytest.raises(ConfigError) as raised:
        read_global(tmp_path)
    # THEN one line names the file, the field path, the value and what is allowed (no second line about the list
    # being empty because its only item failed)
    lines = str(raised.value).splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 'global.yaml'}: gateways[0].weights: ") and "give all four" in lines[0]
