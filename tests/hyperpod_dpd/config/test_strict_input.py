"""Strict input: numbers are numbers (never booleans, quoted or octal-looking), names fit the limits of the services
that receive them, an absent key renders as ``missing`` and a null as ``null``, an unquoted account id is told to be
quoted, and an unknown instance type lists the types of its group's role. The refusals themselves are rows of
test_bad_input_matrix.py; this module holds the accepted forms and the properties that hold for every field."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_dpd.catalogue.instances import DPD_INSTANCE_TYPES, INSTANCE_TYPES, SYSTEM_INSTANCE_TYPES
from hyperpod_dpd.config import (
    InstanceGroup,
    base,
    eks,
    endpoints,
    environment,
    hyperpod,
    load_environment,
    network,
    operator,
    pipeline,
)
from hyperpod_dpd.config.base import Model
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.config.loader import read_yaml
from hyperpod_dpd.errors import MISSING, ConfigError, Issue, render_value
from tests.paths import FIXTURE_CONFIG_DIR

MODULES = (base, eks, endpoints, environment, hyperpod, network, operator, pipeline)


def _models() -> list[type[Model]]:
    found: list[type[Model]] = []
    pending = list(Model.__subclasses__())
    while pending:
        model = pending.pop()
        found.append(model)
        pending.extend(model.__subclasses__())
    return sorted({m for m in found if m.__module__.startswith("hyperpod_dpd.config.")}, key=lambda m: m.__qualname__)


NUMBER_FIELDS = [(model, name) for model in _models() for name in base.number_fields(model)]


def _field_errors(model: type[Model], name: str, value: Any) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as raised:
        model.model_validate({name: value})
    return [e for e in raised.value.errors(include_url=False) if e["loc"] == (name,)]


# -- numbers --------------------------------------------------------------------------------------------------------------

def test_every_number_field_of_the_configuration_is_found() -> None:
    # GIVEN every configuration model (all modules imported)
    found = {f"{m.__name__}.{n}" for m, n in NUMBER_FIELDS}
    # THEN the strict-number check knows the counts, sizes, replicas, thresholds, ports and fractions of every section
    assert {"InstanceGroup.count", "InstanceGroup.min_count", "InstanceGroup.ebs_volume_gb",
            "InstanceGroup.threads_per_core", "SystemNodeGroup.min_size", "CreateVpc.nat_gateways",
            "RoleConfig.replicas", "DecodeConfig.replicas", "AutoScalingConfig.max_replicas",
            "RoutingConfig.threshold", "RequestLimits.overflow_status_code", "EndpointConfig.gpu_memory_utilization",
            "EndpointConfig.pd_buffer_size", "PromotionConfig.wait_timeout_minutes",
            "DependenciesChart.timeout_minutes"} <= found
    assert len(found) >= 30


@pytest.mark.parametrize(("model", "name"), NUMBER_FIELDS, ids=[f"{m.__name__}.{n}" for m, n in NUMBER_FIELDS])
@pytest.mark.parametrize("flag", [True, False])
def test_no_number_field_takes_a_boolean(model: type[Model], name: str, flag: bool) -> None:
    # WHEN a YAML boolean (true/false, yes/no, on/off) is given where a number is expected
    (error,) = _field_errors(model, name, flag)
    # THEN that field alone is refused, saying why, instead of becoming 1 or 0
    assert "not a boolean" in error["msg"] and "YAML reads true/false, yes/no and on/off as booleans" in error["msg"]


@pytest.mark.parametrize(("model", "name"), NUMBER_FIELDS, ids=[f"{m.__name__}.{n}" for m, n in NUMBER_FIELDS])
def test_no_number_field_takes_a_quoted_number(model: type[Model], name: str) -> None:
    (error,) = _field_errors(model, name, "1")
    assert "not a string (write it without quotes)" in error["msg"]


def test_plain_yaml_numbers_and_quoted_strings_load(write_config: Callable[..., Path]) -> None:
    # GIVEN dev.yaml with plain integers for counts (0 for a parked group too), an integer where a fraction is allowed,
    # and quoted strings that look like numbers where the schema takes strings
    def mixed(data: dict[str, Any]) -> None:
        data["tags"]["cost-center"] = "1234"
        data["eks"]["system_node_group"] = {"min_size": 0, "desired_size": 1, "max_size": 2}
        group = data["hyperpod"]["instance_groups"][1]
        group.update(count=2, min_count=0, threads_per_core=2, labels={"tier": "1"})
        endpoint = data["endpoints"][0]
        endpoint.update(gpu_memory_utilization=1, environment={"VLLM_LOG_LEVEL": "0"})

    env = load_environment("dev", write_config(mixed))
    # THEN everything loads with the types the schema names
    group = env.hyperpod.instance_groups[1]
    assert (group.count, group.min_count, group.threads_per_core, group.labels) == (2, 0, 2, {"tier": "1"})
    assert env.tags["cost-center"] == "1234" and env.account == "111111111111" and env.eks.version == "1.35"
    assert env.eks.system_node_group is not None and env.eks.system_node_group.min_size == 0
    assert env.endpoints[0].gpu_memory_utilization == 1.0 and env.endpoints[0].environment == {"VLLM_LOG_LEVEL": "0"}


def _raw_dev(replace: str, by: str) -> str:
    text = (FIXTURE_CONFIG_DIR / "dev.yaml").read_text()
    assert text.count(replace) == 1, replace
    return text.replace(replace, by)


def _refusal(write_config: Callable[..., Path], raw: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(raw=raw))
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.split("dev.yaml: ", 1)[1]


@pytest.mark.parametrize("word", ["yes", "on", "true", "True"])
def test_a_yaml_word_that_means_true_is_not_a_count(write_config: Callable[..., Path], word: str) -> None:
    # GIVEN the decode group's count written as a YAML 1.1 boolean word
    raw = _raw_dev("      instance_type: ml.p5.48xlarge\n      count: 1\n      ebs_volume_gb: 500\n\n",
                   f"      instance_type: ml.p5.48xlarge\n      count: {word}\n      ebs_volume_gb: 500\n\n")
    # THEN it is refused, not read as 1
    assert _refusal(write_config, raw) == (
        "hyperpod.instance_groups[2].count: true: must be a whole number, not a boolean (YAML reads true/false, "
        "yes/no and on/off as booleans)")


def test_a_count_with_a_leading_zero_is_refused_as_ambiguous(write_config: Callable[..., Path]) -> None:
    # GIVEN count: 010, which YAML 1.1 reads as octal 8 and YAML 1.2 as 10
    raw = _raw_dev("      instance_type: ml.m7i.2xlarge\n      count: 2\n", "      instance_type: ml.m7i.2xlarge\n      count: 010\n")
    # THEN the line quotes what was written and says how YAML read it
    assert _refusal(write_config, raw) == (
        "hyperpod.instance_groups[0].count: 010: is ambiguous: YAML 1.1 reads 010 as the octal number 8; write the "
        "number without a leading zero")


# -- account ids ----------------------------------------------------------------------------------------------------------

def test_an_unquoted_account_id_that_yaml_reads_as_octal_is_quoted_back(write_config: Callable[..., Path]) -> None:
    # GIVEN account: 011111111111 unquoted (only digits 0-7 after a zero: YAML 1.1 reads it as an octal number)
    raw = _raw_dev('account: "111111111111"', "account: 011111111111")
    assert read_yaml(write_config(raw=raw) / "dev.yaml")["account"] == 0o11111111111
    # THEN the error shows what was written, what YAML made of it, and the quoted form to write instead
    assert _refusal(write_config, raw) == (
        'account: 011111111111: must be a 12-digit string; YAML reads the unquoted 011111111111 as the octal number '
        f'{0o11111111111}; quote it in YAML ("011111111111")')


def test_an_unquoted_twelve_digit_account_id_is_told_to_be_quoted(write_config: Callable[..., Path]) -> None:
    raw = _raw_dev('account: "111111111111"', "account: 111111111111")
    assert _refusal(write_config, raw) == 'account: 111111111111: must be a 12-digit string; quote it in YAML ("111111111111")'


def test_an_unquoted_account_id_with_an_eight_or_nine_after_the_zero_is_a_string_already(
        write_config: Callable[..., Path]) -> None:
    # GIVEN 012345678901 unquoted: not an octal number, so YAML 1.1 keeps it a string and it is a valid account id
    raw = _raw_dev('account: "111111111111"', "account: 012345678901")
    assert load_environment("dev", write_config(raw=raw)).account == "012345678901"


def test_a_pipeline_account_written_as_a_number_is_told_to_be_quoted() -> None:
    with pytest.raises(ValidationError, match=re.escape('must be a 12-digit string; quote it in YAML ("444444444444")')):
        pipeline.PipelineConfig.model_validate({"account": 444444444444})


# -- names ----------------------------------------------------------------------------------------------------------------

def _group(name: str) -> InstanceGroup:
    return InstanceGroup.model_validate({"name": name, "role": "prefill", "instance_type": "ml.p5.48xlarge", "count": 1})


@given(st.from_regex(r"\A[a-zA-Z0-9](-{0,3}[a-zA-Z0-9]){0,90}\Z"))
def test_a_hyperpod_style_name_is_accepted_exactly_when_it_has_at_most_63_characters(name: str) -> None:
    # GIVEN any name of the HyperPod pattern, hyphen runs included
    if len(name) <= 63:
        assert _group(name).name == name
    else:
        with pytest.raises(ValidationError, match=f"has {len(name)} characters; must be a HyperPod instance group name"):
            _group(name)


@given(st.from_regex(r"\A[0-9A-Za-z][A-Za-z0-9_-]{0,130}\Z"))
def test_an_eks_cluster_name_is_accepted_exactly_when_it_has_at_most_100_characters(name: str) -> None:
    if len(name) <= 100:
        assert eks.EksConfig(cluster_name=name).cluster_name == name
    else:
        with pytest.raises(ValidationError, match=f"has {len(name)} characters; must be an EKS cluster name"):
            eks.EksConfig(cluster_name=name)


@pytest.mark.parametrize("name", ["a", "a" * 63, "a--b", "A1-b2", "x" + "-y" * 31])
def test_valid_instance_group_names_at_and_below_the_limit_are_accepted(name: str) -> None:
    assert _group(name).name == name


@pytest.mark.parametrize("name", ["-a", "a-", "a_b", ""])
def test_instance_group_names_out_of_pattern_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="must be a HyperPod instance group name"):
        _group(name)


def test_eks_cluster_names_take_underscores_like_eks_does() -> None:
    assert eks.EksConfig(cluster_name="hpdpd_dev-1").cluster_name == "hpdpd_dev-1"


def test_a_sagemaker_endpoint_name_of_63_characters_with_hyphens_is_accepted() -> None:
    # GIVEN a fixed name (a per-generation name adds '-<generation>', see tests/hyperpod_dpd/config/test_endpoint_rollout.py)
    name = "s" + "-e" * 31
    endpoint = parse_endpoint({"name": "llama", "namespace": "llm", "instance_type": "ml.p5.48xlarge",
                               "model": {"name": "m", "s3": {"bucket": "weights", "region": "us-west-2"}},
                               "sagemaker_endpoint_name": name, "rollout": {"fixed_sagemaker_endpoint_name": True}})
    assert (endpoint.sagemaker_endpoint_name, len(name)) == (name, 63)


# -- rendering of values --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "rendered"), [
    (MISSING, "missing"), (None, "null"), (True, "true"), (False, "false"), ("null", "'null'"), (0, "0"),
    ([None, True, "a"], "[null, true, 'a']"), ((1, None), "[1, null]"), ({"k": None}, "{'k': null}"),
])
def test_values_render_as_the_yaml_author_wrote_them(value: Any, rendered: str) -> None:
    assert render_value(value) == rendered


def test_no_error_line_says_none(write_config: Callable[..., Path]) -> None:
    # GIVEN a file with a missing key, a null value and a boolean count at once
    def three(data: dict[str, Any]) -> None:
        del data["hyperpod"]["cluster_name"]
        data["eks"]["cluster_name"] = None
        data["hyperpod"]["instance_groups"][1]["count"] = True

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(three))
    lines = str(raised.value).splitlines()
    # THEN each is one line; the missing key says 'missing', the null says 'null', and no line says None or True
    assert [line.split("dev.yaml: ", 1)[1].split(": ")[:2] for line in lines] == [
        ["eks.cluster_name", "null"], ["hyperpod.cluster_name", "missing"], ["hyperpod.instance_groups[1].count", "true"]]
    assert not any(": None:" in line or ": True:" in line for line in lines)


def test_an_issue_about_an_unset_optional_field_says_missing_and_an_explicit_null_says_null() -> None:
    unset = InstanceGroup(name="g", role="prefill", instance_type="ml.p5.48xlarge", count=1)
    explicit = InstanceGroup(name="g", role="prefill", instance_type="ml.p5.48xlarge", count=1, training_plan_arn=None)
    assert Issue("p", unset.given("training_plan_arn"), "m").render() == "p: missing: m"
    assert Issue("p", explicit.given("training_plan_arn"), "m").render() == "p: null: m"


# -- instance types -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("role", "allowed"), [("prefill", DPD_INSTANCE_TYPES), ("decode", DPD_INSTANCE_TYPES),
                                               ("system", SYSTEM_INSTANCE_TYPES)])
def test_an_unknown_instance_type_lists_exactly_the_types_of_the_groups_role(role: str, allowed: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        InstanceGroup.model_validate({"name": "g", "role": role, "instance_type": "ml.x9.huge", "count": 1})
    (error,) = raised.value.errors(include_url=False)
    listed = error["msg"].rsplit("allowed: ", 1)[1].split(", ")
    # THEN the list is the role's types, in catalogue order, and nothing of the other roles
    assert listed == list(allowed)
    assert len(listed) < len(INSTANCE_TYPES)


def test_a_known_type_of_the_wrong_role_lists_the_roles_types(write_config: Callable[..., Path]) -> None:
    def cpu_decode(data: dict[str, Any]) -> None:
        data["hyperpod"]["instance_groups"][2]["instance_type"] = "ml.m7i.2xlarge"
        del data["endpoints"]

    with pytest.raises(ConfigError) as raised:
        load_environment("dev", write_config(cpu_decode))
    assert str(raised.value).endswith(
        "hyperpod.instance_groups[2].instance_type: 'ml.m7i.2xlarge': a decode group needs a DPD-capable EFA GPU type; "
        "allowed: " + ", ".join(DPD_INSTANCE_TYPES))


def test_every_configuration_module_takes_part_in_the_field_properties() -> None:
    """Guards _models(): the models of every configuration module are among those the properties above walk."""
    assert {m.__name__ for m in MODULES if m is not base} <= {m.__module__ for m in _models()}
