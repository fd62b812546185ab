"""DpdMonitoring: the SNS topic, the AMP rules and alert manager, the log metric filters and alarms (with the companion
that fires when the container logs stop arriving), and their wiring into every environment with endpoints through
build_platform."""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Match, Template

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.guardrails import apply_guardrails
from hyperpod_dpd.infra.monitoring import DpdMonitoring
from hyperpod_dpd.infra.observability import ObservabilityDestination
from hyperpod_dpd.monitoring.alerts import LOG_ALARMS, NO_ABSENCE_COMPANION
from hyperpod_dpd.monitoring.metrics import METRICS
from tests.paths import FIXTURE_CONFIG_DIR
from tests.validators import cfn_lint_findings, report_violations, validation_report

EMAIL, HOOK, LOG_GROUP = "oncall@example.com", "https://hooks.example.com/dpd", "/aws/containerinsights/hpdpd-dev/application"


def _config(base: dict[str, Any], **alerts: Any) -> EnvironmentConfig:
    data = copy.deepcopy(base)
    data["endpoints"][0]["slo"] = {"ttft_ms": 1200, "tpot_ms": 40}
    data["operator"]["observability"] = {"enabled": True, "logging": True}
    data["alerts"] = alerts
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)


def _synth(tmp: Path, build: Any) -> tuple[Template, dict[str, Any], list[Any]]:
    """One construct-level stack, synthesized with the guardrails; its template and their findings."""
    app = cdk.App(outdir=str(tmp))
    stack = cdk.Stack(app, "Scratch", env=cdk.Environment(account="111111111111", region="us-west-2"))
    build(stack, cdk.CfnParameter(stack, "ClusterArn").value_as_string)
    apply_guardrails(app)
    app.synth()
    template = json.loads((tmp / "Scratch.template.json").read_text())
    return Template.from_json(template), template, report_violations(validation_report(tmp))


@pytest.fixture(scope="module")
def with_workspace(base_configs, tmp_path_factory) -> tuple[Template, dict[str, Any], list[Any], EnvironmentConfig]:
    """The add-on's own workspace (created), e-mail and HTTPS subscribers, container logs shipped by the add-on."""
    config = _config(base_configs["dev"], emails=[EMAIL], https_endpoints=[HOOK])

    def build(stack: cdk.Stack, cluster_arn: str) -> None:
        destination = ObservabilityDestination(stack, "Destination", name="hpdpd-dev")
        DpdMonitoring(stack, "Monitoring", config=config, hyperpod_cluster_arn=cluster_arn, destination=destination)

    return (*_synth(tmp_path_factory.mktemp("with-workspace"), build), config)


@pytest.fixture(scope="module")
def without_workspace(base_configs, tmp_path_factory) -> tuple[Template, dict[str, Any], list[Any]]:
    """No observability add-on: CloudWatch alarms only, container logs in a group of the user's choice."""
    data = copy.deepcopy(base_configs["dev"])
    data["operator"]["observability"] = {"enabled": False}
    data["alerts"] = {"container_log_group": LOG_GROUP}
    config = parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)
    return _synth(tmp_path_factory.mktemp("without-workspace"),
                  lambda stack, arn: DpdMonitoring(stack, "Monitoring", config=config, hyperpod_cluster_arn=arn))


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _statements(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (policy,) = _of_type(template, "AWS::SNS::TopicPolicy").values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def _joined(value: Any) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_joined(v) for v in value["Fn::Join"][1])
    return json.dumps(value, sort_keys=True)


def test_topic_is_encrypted_with_a_rotating_key_and_refuses_plain_http(with_workspace) -> None:
    assertions, template, _, _ = with_workspace
    (topic_id,) = _of_type(template, "AWS::SNS::Topic")
    (key_id, key), = [(k, v) for k, v in _of_type(template, "AWS::KMS::Key").items() if k.startswith("MonitoringTopicKey")]
    assert template["Resources"][topic_id]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    deny = _statements(template)["AllowPublishThroughSSLOnly"]
    assert (deny["Effect"], deny["Principal"], deny["Condition"]) == (
        "Deny", "*", {"Bool": {"aws:SecureTransport": "false"}})
    # AND the alarms and the alert manager may use the key to publish, each for this account's own sources
    publishers = {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"]
                  if s.get("Sid") in ("AllowCloudWatchAlarms", "AllowAlertManager")}
    assert {s["Principal"]["Service"] for s in publishers.values()} == {"aps.amazonaws.com", "cloudwatch.amazonaws.com"}
    for statement in publishers.values():
        assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": "111111111111"}
    assert "alarm:*" in json.dumps(publishers["AllowCloudWatchAlarms"]["Condition"]["ArnLike"])
    assert "workspace/*" in json.dumps(publishers["AllowAlertManager"]["Condition"]["ArnLike"])


@pytest.mark.parametrize(("policy", "expected"), [(cdk.RemovalPolicy.RETAIN, "Retain"),
                                                  (cdk.RemovalPolicy.DESTROY, "Delete")])
def test_the_topic_is_kept_or_removed_with_its_key(base_configs, tmp_path: Path, policy: cdk.RemovalPolicy,
                                                   expected: str) -> None:
    # GIVEN the monitoring of an environment that retains its data (production) or destroys it (dev)
    config = _config(base_configs["dev"], emails=[EMAIL])

    def build(stack: cdk.Stack, cluster_arn: str) -> None:
        destination = ObservabilityDestination(stack, "Destination", name="hpdpd-dev", removal_policy=policy)
        DpdMonitoring(stack, "Monitoring", config=config, hyperpod_cluster_arn=cluster_arn, destination=destination,
                      removal_policy=policy)

    # WHEN it is synthesized with the guardrails
    _, template, violations = _synth(tmp_path, build)
    # THEN the topic follows the policy on deletion and replacement, as its key and the metrics' workspace do
    kept = {k: (v.get("DeletionPolicy"), v.get("UpdateReplacePolicy")) for k, v in template["Resources"].items()
            if v["Type"] in ("AWS::SNS::Topic", "AWS::KMS::Key", "AWS::APS::Workspace")}
    assert len(kept) == 4 and set(kept.values()) == {(expected, expected)}, kept
    # AND the guardrails and cfn-lint find nothing
    assert violations == []
    assert cfn_lint_findings({("scratch", "monitoring"): template}, {"scratch": "us-west-2"}) == []


def test_alert_manager_may_publish_for_its_own_workspace_only(with_workspace) -> None:
    _, template, _, _ = with_workspace
    (workspace_id,) = _of_type(template, "AWS::APS::Workspace")
    statement = _statements(template)["AllowAlertManager"]
    assert statement["Principal"] == {"Service": "aps.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sns:GetTopicAttributes", "sns:Publish"]
    assert _joined(statement["Condition"]["ArnEquals"]["aws:SourceArn"]).endswith(
        f':aps:us-west-2:111111111111:workspace/{json.dumps({"Fn::GetAtt": [workspace_id, "WorkspaceId"]}, sort_keys=True)}')
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": "111111111111"}
    alarms = _statements(template)["AllowCloudWatchAlarms"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert alarms["Condition"]["StringEquals"] == {"aws:SourceAccount": "111111111111"}


def test_rules_land_in_the_addon_workspace_with_the_endpoint_objective(with_workspace) -> None:
    _, template, _, config = with_workspace
    (workspace_id,) = _of_type(template, "AWS::APS::Workspace")
    (rules,) = _of_type(template, "AWS::APS::RuleGroupsNamespace").values()
    assert rules["Properties"]["Name"] == "hyperpod-dpd-hpdpd-dev"
    assert json.dumps({"Fn::GetAtt": [workspace_id, "WorkspaceId"]}, sort_keys=True) in _joined(rules["Properties"]["Workspace"])
    document = yaml.safe_load(rules["Properties"]["Data"])
    (endpoint,) = config.endpoints
    expressions = {r["alert"]: r["expr"] for g in document["groups"] for r in g["rules"]}
    assert expressions["DpdE2eTtftP99BoundAboveSlo"].endswith("> 1200")
    assert expressions["DpdTpotP99AboveSlo"].endswith("* 1000 > 40")
    # every generation of the endpoint's IEC: the rules deploy before a rollout promotes the rendered one
    assert f'resource_name=~"{endpoint.name}-[0-9a-f]{{6}}"' in expressions["DpdPrefillQueueHigh"]
    assert endpoint.resource_name not in rules["Properties"]["Data"]
    assert expressions["DpdRequestErrorsHigh"].endswith("> 0.05")  # alerts.error_ratio's default
    assert {"DpdKvTransferSlow", "DpdKvTransferMetricsMissing", "DpdTtftMetricsMissing", "DpdFallbackRatioHigh",
            "DpdRequestErrorsMetricsMissing", "GPUXidError", "GPUMemoryErrorDetected"} <= set(expressions)


def test_alert_manager_of_the_workspace_routes_to_the_topic(with_workspace) -> None:
    _, template, _, _ = with_workspace
    (topic_id,) = _of_type(template, "AWS::SNS::Topic")
    (workspace,) = _of_type(template, "AWS::APS::Workspace").values()
    definition = yaml.safe_load(_joined(workspace["Properties"]["AlertManagerDefinition"]))
    (receiver,) = yaml.safe_load(definition["alertmanager_config"])["receivers"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"] == {"Ref": topic_id}  # the topic's ARN once CloudFormation resolves the Ref
    assert sns["sigv4"] == {"region": "us-west-2"}


def test_log_metric_filters_watch_the_health_agent_and_the_decoder(with_workspace) -> None:
    _, template, _, _ = with_workspace
    filters = {f["Properties"]["MetricTransformations"][0]["MetricName"]: f["Properties"]
               for f in _of_type(template, "AWS::Logs::MetricFilter").values()}
    assert set(filters) == {"DecoderBufferOverflow", "NodeHealthEvents", "VllmLogLines"}
    assert filters["DecoderBufferOverflow"]["FilterPattern"] == '"Failed to allocate memory object"'
    assert filters["VllmLogLines"]["FilterPattern"] == '?"Avg prompt throughput" ?"GET /metrics"'
    assert filters["NodeHealthEvents"]["FilterPattern"] == '{ $.HealthMonitoringAgentDetectionEvent = "HealthEvent" }'
    for properties in filters.values():
        # the HyperPod cluster's own log group: /aws/sagemaker/Clusters/<name>/<id from the cluster ARN>
        group = properties["LogGroupName"]["Fn::Join"][1]
        assert group[0] == "/aws/sagemaker/Clusters/hpdpd-dev/"
        assert group[1] == {"Fn::Select": [1, {"Fn::Split": ["/", {"Ref": "ClusterArn"}]}]}
        assert properties["MetricTransformations"][0]["MetricNamespace"] == "HyperPodDPD/hpdpd-dev"


def test_each_log_metric_has_an_alarm_on_the_topic(with_workspace) -> None:
    assertions, template, _, _ = with_workspace
    (topic_id,) = _of_type(template, "AWS::SNS::Topic")
    alarms = {a["Properties"]["MetricName"]: a["Properties"] for a in _of_type(template, "AWS::CloudWatch::Alarm").values()}
    assert set(alarms) == {"DecoderBufferOverflow", "NodeHealthEvents", "VllmLogLines"}
    for name in ("DecoderBufferOverflow", "NodeHealthEvents"):  # a matching line raises them
        alarm = alarms[name]
        assert (alarm["Threshold"], alarm["Statistic"], alarm["Period"]) == (1, "Sum", 300)
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert (alarm["TreatMissingData"], alarm["EvaluationPeriods"]) == ("notBreaching", 1)
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


def _alarms_by_metric(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["Properties"]["MetricName"]: a["Properties"] for a in _of_type(template, "AWS::CloudWatch::Alarm").values()}


def _filters_by_metric(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["Properties"]["MetricTransformations"][0]["MetricName"]: f["Properties"]
            for f in _of_type(template, "AWS::Logs::MetricFilter").values()}


def test_container_logs_missing_companion_fires_when_no_vllm_line_arrives(with_workspace) -> None:
    # GIVEN an environment whose container logs the add-on ships (alerts.container_logs_missing_minutes at its default)
    _, template, _, _ = with_workspace
    alarms, filters = _alarms_by_metric(template), _filters_by_metric(template)
    companion, guarded = alarms["VllmLogLines"], alarms["DecoderBufferOverflow"]
    # THEN its filter counts vLLM's periodic lines in the very log group the buffer-overflow filter reads
    assert filters["VllmLogLines"]["LogGroupName"] == filters["DecoderBufferOverflow"]["LogGroupName"]
    assert filters["VllmLogLines"]["MetricTransformations"] == [
        {"MetricName": "VllmLogLines", "MetricNamespace": "HyperPodDPD/hpdpd-dev", "MetricValue": "1"}]
    # AND its alarm breaches on silence: fewer than one line, or no data at all, in each of 12 periods of 5 minutes
    assert (companion["Namespace"], companion["Statistic"], companion["Period"]) == ("HyperPodDPD/hpdpd-dev", "Sum", 300)
    assert (companion["Threshold"], companion["ComparisonOperator"]) == (1, "LessThanThreshold")
    assert (companion["EvaluationPeriods"], companion.get("DatapointsToAlarm", 12)) == (12, 12)
    assert companion["TreatMissingData"] == "breaching"
    # AND it notifies whoever the guarded alarm notifies, as a warning that names it
    assert companion["AlarmActions"] == guarded["AlarmActions"]
    assert companion["AlarmDescription"].startswith("[warning] dev: VllmLogsMissing: ")
    assert "60 min" in companion["AlarmDescription"] and "DecoderBufferOverflow" in companion["AlarmDescription"]


def test_companion_window_follows_the_configuration(base_configs, tmp_path: Path) -> None:
    # GIVEN a user's own container log group and a three-hour window
    data = copy.deepcopy(base_configs["dev"])
    data["operator"]["observability"] = {"enabled": False}
    data["alerts"] = {"container_log_group": LOG_GROUP, "container_logs_missing_minutes": 180}
    config = parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)
    # WHEN the monitoring is synthesized
    _, template, _ = _synth(tmp_path, lambda stack, arn: DpdMonitoring(stack, "Monitoring", config=config,
                                                                       hyperpod_cluster_arn=arn))
    # THEN the companion watches that group over 36 periods of 5 minutes
    assert _filters_by_metric(template)["VllmLogLines"]["LogGroupName"] == LOG_GROUP
    companion = _alarms_by_metric(template)["VllmLogLines"]
    assert (companion["Period"], companion["EvaluationPeriods"]) == (300, 36)
    assert "180 min" in companion["AlarmDescription"]


@pytest.mark.parametrize(("minutes", "message"), [
    (10, "Input should be greater than or equal to 15"),  # shorter than a few scrapes and stats intervals
    (62, "Input should be a multiple of 5"),  # whole 5-minute periods
    (1445, "Input should be less than or equal to 1440"),  # PutMetricAlarm: one day for periods under an hour
])
def test_a_window_cloudwatch_cannot_evaluate_is_a_one_line_error(base_configs, minutes: int, message: str) -> None:
    # GIVEN a window outside 15-1440 minutes in whole periods WHEN the file loads THEN one line names field and value
    data = copy.deepcopy(base_configs["dev"])
    data["alerts"] = {"container_logs_missing_minutes": minutes}
    with pytest.raises(ConfigError) as raised:
        parse_environment(data, name="dev", source="dev.yaml", base_dir=FIXTURE_CONFIG_DIR.parent)
    (line,) = [x for x in str(raised.value).splitlines() if "container_logs_missing_minutes" in x]
    assert line.startswith(f"dev.yaml: alerts.container_logs_missing_minutes: {minutes}: {message}")


def test_every_log_alarm_that_is_silent_without_data_has_a_companion(with_workspace) -> None:
    # GIVEN the synthesized alarms and filters WHEN an alarm treats missing data as healthy THEN another alarm, on a
    # filter of the same log group and with the same actions, treats missing data as breaching, unless the catalogue
    # says why no line can be expected there (NO_ABSENCE_COMPANION)
    _, template, _, _ = with_workspace
    alarms, filters = _alarms_by_metric(template), _filters_by_metric(template)
    group = {name: json.dumps(f["LogGroupName"], sort_keys=True) for name, f in filters.items()}
    for name, alarm in alarms.items():
        if alarm["TreatMissingData"] == "breaching" or name in NO_ABSENCE_COMPANION:
            continue
        companions = [other for o, other in alarms.items() if other["TreatMissingData"] == "breaching"
                      and group[o] == group[name] and other["AlarmActions"] == alarm["AlarmActions"]]
        assert companions, f"{name} stays green while its log group {group[name]} receives nothing"
    # AND the catalogue agrees: each companion guards an alarm of its own source, every exemption is a real alarm
    by_name = {a.name: a for a in LOG_ALARMS}
    for alarm in LOG_ALARMS:
        if alarm.absent:
            assert alarm.guards in by_name and by_name[alarm.guards].metric.source == alarm.metric.source
    assert set(NO_ABSENCE_COMPANION) <= set(by_name)


def test_companion_terms_are_in_the_lines_vllm_and_uvicorn_write() -> None:
    # GIVEN the lines as their upstream format strings render them (CloudWatch terms match case-sensitively):
    # vLLM's LoggingStatLogger.log (vllm/v1/metrics/loggers.py @ 005a810) and uvicorn's access formatter
    # (uvicorn/config.py @ 00cb13d, '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s')
    stats = logging.makeLogRecord({
        "msg": "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
               "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
        "args": (0, 0.0, 41.7, 3, 0, 12.5, 0.0)}).getMessage()
    access = logging.Formatter('%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s').format(
        logging.makeLogRecord({"levelprefix": "INFO:    ", "client_addr": "10.1.2.3:51234",
                               "request_line": "GET /metrics HTTP/1.1", "status_code": "200 OK"}))
    pattern = METRICS["vllm_log_lines"].log_pattern
    # WHEN the pattern is read as CloudWatch's "?term ?term" (any of the quoted terms)
    terms = re.findall(r'\?"([^"]+)"', pattern)
    assert pattern == " ".join(f'?"{t}"' for t in terms)
    # THEN each kind of line holds one of its terms, and the buffer-overflow line is not mistaken for either
    assert any(t in stats for t in terms) and any(t in access for t in terms)
    assert not any(t in "Failed to allocate memory object, retrying..." for t in terms)


def test_configured_subscribers_are_subscribed(with_workspace) -> None:
    assertions, _, _, _ = with_workspace
    assertions.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": EMAIL})
    assertions.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "https", "Endpoint": HOOK})
    assertions.has_output("*", {"Value": {"Ref": Match.string_like_regexp("MonitoringTopic")}})


@pytest.mark.parametrize("fixture", ["with_workspace", "without_workspace"])
def test_guardrails_and_cfn_lint_find_nothing(fixture: str, request: pytest.FixtureRequest) -> None:
    _, template, violations = request.getfixturevalue(fixture)[:3]
    assert violations == []
    assert cfn_lint_findings({("scratch", "monitoring"): template}, {"scratch": "us-west-2"}) == []


def test_without_the_addon_only_the_cloudwatch_alarms_exist(without_workspace) -> None:
    _, template, _ = without_workspace
    assert _of_type(template, "AWS::APS::RuleGroupsNamespace") == {}
    assert set(_statements(template)) == {"AllowPublishThroughSSLOnly", "AllowCloudWatchAlarms"}
    (key,) = _of_type(template, "AWS::KMS::Key").values()
    services = [s["Principal"]["Service"] for s in key["Properties"]["KeyPolicy"]["Statement"]
                if isinstance(s["Principal"], dict) and "Service" in s["Principal"]]
    assert services == ["cloudwatch.amazonaws.com"]
    groups = {f["Properties"]["MetricTransformations"][0]["MetricName"]: f["Properties"]["LogGroupName"]
              for f in _of_type(template, "AWS::Logs::MetricFilter").values()}
    assert groups["DecoderBufferOverflow"] == groups["VllmLogLines"] == LOG_GROUP  # alerts.container_log_group
    assert len(_of_type(template, "AWS::CloudWatch::Alarm")) == 3


def test_bad_rules_fail_before_any_resource_is_made(base_configs, monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.infra import monitoring
    from hyperpod_dpd.monitoring.validation import MonitoringError

    def broken(_config: EnvironmentConfig) -> str:
        raise MonitoringError("Prometheus rule file", ["groups/0: unclosed '('"])

    monkeypatch.setattr(monitoring, "rules_yaml", broken)
    stack = cdk.Stack(cdk.App(), "Broken", env=cdk.Environment(account="111111111111", region="us-west-2"))
    destination = ObservabilityDestination(stack, "Destination", name="hpdpd-dev")
    with pytest.raises(MonitoringError, match="unclosed"):
        DpdMonitoring(stack, "Monitoring", config=_config(base_configs["dev"]), hyperpod_cluster_arn="arn",
                      destination=destination)
    assert stack.node.try_find_child("Monitoring") is None


# -- the environments, as make synth builds them -----------------------------------------------------------------------

def test_every_environment_with_endpoints_gets_the_alerts(synthesized) -> None:
    # GIVEN the fixture environments (dev has an endpoint and the add-on; prod has no endpoint)
    dev = synthesized.template("dev", "platform")
    (rules,) = _of_type(dev, "AWS::APS::RuleGroupsNamespace").values()
    document = yaml.safe_load(rules["Properties"]["Data"])
    expressions = {r["alert"]: r["expr"] for g in document["groups"] for r in g["rules"]}
    # THEN dev's platform stack carries the rules at the default objective, the topic, the filter and the alarm
    assert expressions["DpdE2eTtftP99BoundAboveSlo"].endswith("> 2000")
    assert expressions["DpdTpotP99AboveSlo"].endswith("> 100")
    assert len(_of_type(dev, "AWS::SNS::Topic")) == 1
    assert {f["Properties"]["MetricTransformations"][0]["MetricName"]
            for f in _of_type(dev, "AWS::Logs::MetricFilter").values()} == {"NodeHealthEvents"}
    # AND an environment without endpoints has none of it
    prod = synthesized.template("prod", "platform")
    assert not _of_type(prod, "AWS::SNS::Topic") and not _of_type(prod, "AWS::Logs::MetricFilter")
