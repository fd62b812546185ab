"""DpdMonitoring: an environment's DPD alerts as resources, built from :mod:`hyperpod_dpd.monitoring`.

* An SNS topic for every alert, encrypted with its own KMS key (rotation on) and refusing non-TLS requests, with
  the configured e-mail and HTTPS subscriptions.
* With the observability add-on (its Amazon Managed Prometheus workspace, infra/observability.py): the Prometheus
  rules (``AWS::APS::RuleGroupsNamespace``) and, on a workspace the toolkit created, the alert manager definition
  that routes them to the topic. The topic policy lets ``aps.amazonaws.com`` publish for that one workspace only
  (``aws:SourceArn``/``aws:SourceAccount``), as AMP's alert-receiver documentation asks
  (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-AMPpermission.html).
* CloudWatch Logs metric filters, each with an alarm on the topic: the HyperPod health-monitoring agent's events in
  the cluster's log group ``/aws/sagemaker/Clusters/<name>/<id>`` (always), and the decoder's ``Failed to allocate
  memory object`` lines in the container log group (the cluster's when the add-on ships logs, or
  ``alerts.container_log_group``). Both fire on a matching line and treat no data as healthy, so the container log
  group also gets the fail-safe ``VllmLogsMissing``: a filter counting vLLM's periodic lines and an alarm that treats
  missing data as breaching, which fires when none arrives for ``alerts.container_logs_missing_minutes``.

The HyperPod service creates the cluster log group while it creates the cluster; the filters refer to the cluster's
ARN, so CloudFormation creates them after the cluster.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.inference_operator import InferenceOperator
from hyperpod_dpd.infra.observability import ObservabilityDestination
from hyperpod_dpd.monitoring.alerts import LogAlarm, alertmanager_definition, log_alarms, rules_yaml
from hyperpod_dpd.monitoring.metrics import Source, cloudwatch_namespace

CLUSTER_LOG_GROUP_PREFIX = "/aws/sagemaker/Clusters"


def cluster_log_group_name(cluster_name: str, cluster_arn: str) -> str:
    """``/aws/sagemaker/Clusters/<name>/<id>``: where HyperPod writes its lifecycle and health-agent logs (the id is
    the last part of the cluster's ARN)."""
    cluster_id = cdk.Fn.select(1, cdk.Fn.split("/", cluster_arn))
    return f"{CLUSTER_LOG_GROUP_PREFIX}/{cluster_name}/{cluster_id}"


class DpdMonitoring(Construct):
    """The alerts of one environment's DPD endpoints (see the module docstring for what is created when).

    Args:
        config: the environment; its endpoints' ``slo`` and its ``alerts`` section give thresholds and subscribers.
            No default.
        hyperpod_cluster_arn: the HyperPod cluster's ARN (``HyperPodCluster.cluster_arn``; its id names the cluster
            log group). No default.
        destination: the observability add-on's Prometheus destination, or None without the add-on (then only the
            CloudWatch log alarms exist: the Prometheus metrics go nowhere). Default: None.
        removal_policy: of the topic and its KMS key. Default: destroy.

    Attributes: ``topic``, ``key``, ``rules`` (None without a destination), ``alarms`` (by alarm name:
    ``DecoderBufferOverflow``, ``VllmLogsMissing``, ``NodeHealthEvents``), ``metric_filters`` and ``log_groups`` (by
    metric name).
    """

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, hyperpod_cluster_arn: str,
                 destination: ObservabilityDestination | None = None,
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY) -> None:
        rules = rules_yaml(config) if destination is not None else None  # validated before anything joins the tree
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        cluster_name = config.hyperpod.cluster_name
        self.key = kms.Key(self, "TopicKey", enable_key_rotation=True, removal_policy=removal_policy,
                           description=f"Encrypts the DPD alert topic of {config.name}")
        # CloudWatch alarms (and AMP's alert manager, with a workspace) encrypt what they publish with this key, each
        # bound to its own sources: "Add the aws:SourceAccount and aws:SourceArn condition keys to the KMS resource
        # policy ... Refer to service specific documentation" (SNS developer guide, "Managing Amazon SNS encryption
        # keys and costs", enabling compatibility between AWS event sources and encrypted topics, step 3; the keys
        # are "not supported for EventBridge-to-encrypted topics", and no EventBridge rule publishes here).
        publishers = {"cloudwatch.amazonaws.com": ("AllowCloudWatchAlarms", "ArnLike", arn(self, "cloudwatch", "alarm:*"))}
        if destination is not None:  # any workspace of this account and Region: the workspace's own ARN would close
            # a cycle (its alert manager names the topic, the topic its key); the topic policy names the one workspace
            publishers["aps.amazonaws.com"] = ("AllowAlertManager", "ArnLike", arn(self, "aps", "workspace/*"))
        for principal, (sid, operator, source) in publishers.items():
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid=sid, actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
                principals=[iam.ServicePrincipal(principal)],
                conditions={operator: {"aws:SourceArn": source}, "StringEquals": {"aws:SourceAccount": stack.account}}))
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True,
                               display_name=f"hyperpod-dpd {config.name} alerts")
        self.topic.apply_removal_policy(removal_policy)  # retain: production keeps its topic, as it keeps the key
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowCloudWatchAlarms", actions=["sns:Publish"], resources=[self.topic.topic_arn],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            conditions={"ArnLike": {"aws:SourceArn": arn(self, "cloudwatch", "alarm:*")},
                        "StringEquals": {"aws:SourceAccount": stack.account}}))
        for email in config.alerts.emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        for url in config.alerts.https_endpoints:
            self.topic.add_subscription(subscriptions.UrlSubscription(url, protocol=sns.SubscriptionProtocol.HTTPS))

        self.rules: aps.CfnRuleGroupsNamespace | None = None
        if destination is not None and rules is not None:
            self._prometheus(config, destination, rules)

        self.log_groups: dict[str, str] = {}
        self.metric_filters: dict[str, logs.MetricFilter] = {}
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        cluster_logs = cluster_log_group_name(cluster_name, hyperpod_cluster_arn)
        container_logs = config.alerts.container_log_group or (
            cluster_logs if config.operator.observability.enabled and config.operator.observability.logging else None)
        sources = {Source.HEALTH_AGENT_LOG: cluster_logs, Source.CONTAINER_LOG: container_logs}
        for alarm in log_alarms(config.alerts):
            group = sources[alarm.metric.source]
            if group is not None:
                self._log_alarm(alarm, group, cloudwatch_namespace(cluster_name), config.name)
        cdk.CfnOutput(self, "AlertTopicArn", value=self.topic.topic_arn,
                      description=f"SNS topic of the DPD alerts of {config.name} (docs/monitoring.md)")

    def _prometheus(self, config: EnvironmentConfig, destination: ObservabilityDestination, rules: str) -> None:
        """The rules in the add-on's workspace, and the routing of its alerts to the topic."""
        stack = cdk.Stack.of(self)
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowAlertManager", actions=["sns:Publish", "sns:GetTopicAttributes"],
            resources=[self.topic.topic_arn], principals=[iam.ServicePrincipal("aps.amazonaws.com")],
            conditions={"ArnEquals": {"aws:SourceArn": destination.workspace_arn},
                        "StringEquals": {"aws:SourceAccount": stack.account}}))
        self.rules = aps.CfnRuleGroupsNamespace(
            self, "Rules", name=f"hyperpod-dpd-{config.hyperpod.cluster_name}", workspace=destination.workspace_arn,
            data=rules, tags=[cdk.CfnTag(key="environment", value=config.name)])
        if destination.workspace is not None:  # an imported workspace keeps the alert manager its owner set up
            destination.workspace.alert_manager_definition = alertmanager_definition(
                self.topic.topic_arn, stack.region, subject=f"hyperpod-dpd {config.name}")

    def _log_alarm(self, alarm: LogAlarm, log_group_name: str, namespace: str, environment: str) -> None:
        metric = alarm.metric
        assert metric.log_pattern is not None
        group = logs.LogGroup.from_log_group_name(self, f"{metric.name}LogGroup", log_group_name)
        self.log_groups[metric.name] = log_group_name
        self.metric_filters[metric.name] = logs.MetricFilter(
            self, f"{metric.name}Filter", log_group=group, filter_pattern=logs.FilterPattern.literal(metric.log_pattern),
            metric_namespace=namespace, metric_name=metric.name, metric_value="1")
        period = cdk.Duration.minutes(alarm.period_minutes)
        # A metric filter publishes nothing for a period without a matching line: "no data" is healthy for an alarm
        # on a line that should not appear, and the very failure for a companion on lines that should. Without
        # DatapointsToAlarm, every one of the evaluation periods must breach (an M-of-N alarm with M = N).
        if alarm.absent:
            comparison = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
            missing = cloudwatch.TreatMissingData.BREACHING
        else:
            comparison = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
            missing = cloudwatch.TreatMissingData.NOT_BREACHING
        self.alarms[alarm.name] = cloudwatch.Alarm(
            self, f"{alarm.name}Alarm", threshold=1, evaluation_periods=alarm.evaluation_periods,
            metric=cloudwatch.Metric(namespace=namespace, metric_name=metric.name, statistic="Sum", period=period),
            comparison_operator=comparison, treat_missing_data=missing,
            alarm_description=f"[{alarm.severity}] {environment}: {alarm.description}")
        self.alarms[alarm.name].add_alarm_action(cw_actions.SnsAction(self.topic))


def build_monitoring(scope: Construct, *, config: EnvironmentConfig, hyperpod: HyperPodCluster,
                     inference_operator: InferenceOperator,
                     removal_policy: cdk.RemovalPolicy) -> DpdMonitoring | None:
    """The environment's :class:`DpdMonitoring` as ``Monitoring`` under ``scope``; None without endpoints or with
    ``alerts.enabled: false``."""
    if not config.endpoints or not config.alerts.enabled:
        return None
    return DpdMonitoring(scope, "Monitoring", config=config, hyperpod_cluster_arn=hyperpod.cluster_arn,
                         destination=inference_operator.observability_destination, removal_policy=removal_policy)
