"""The DPD alerts of one environment, from the metric catalogue and the configuration.

* Prometheus rules (one group per endpoint, one for the nodes) for an Amazon Managed Prometheus rule groups
  namespace: :func:`rule_groups` / :func:`rules_yaml`.
* CloudWatch alarms on log metric filters (the decoder's buffer overflow, the health agent's events, and the
  companion that fires when the container logs stop arriving): :func:`log_alarms`.
* The alert manager definition that routes every Prometheus alert to the environment's SNS topic:
  :func:`alertmanager_definition`.

No CDK here; :mod:`hyperpod_dpd.infra.monitoring` turns these into resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import yaml

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.config.alerts import CONTAINER_LOGS_MISSING_STEP_MINUTES, AlertsConfig, SloConfig
from hyperpod_dpd.errors import ConfigError, Issue
from hyperpod_dpd.monitoring.metrics import (
    METRICS,
    Matcher,
    Metric,
    fallback_ratio,
    quantile_ms,
    role,
    selector,
)
from hyperpod_dpd.monitoring.signals import (
    INVOCATIONS,
    POSTS,
    Role,
    endpoint_matchers,
    endpoint_resources,
    error_ratio,
    ttft_bound_ms,
    unobserved,
)

Severity = Literal["critical", "warning"]
WINDOW = "5m"
BLIND_WINDOW, BLIND_FOR = "10m", "15m"  # how long requests must flow unobserved before a "metrics missing" alert


@dataclass(frozen=True, kw_only=True)
class EndpointTarget:
    """What the alerts and the dashboard need of one endpoint: its name and namespace, the IEC name of the
    generation it renders now, its objective, and its index in ``endpoints`` (for error messages).

    The alerts select every generation (:attr:`resource_pattern`), not only ``resource_name``: the platform stack
    that holds them deploys before ``hpdpd rollout promote``, and the old generation keeps serving when a promotion
    is refused, fails its checks or times out.
    """

    name: str
    namespace: str
    resource_name: str
    slo: SloConfig
    index: int = 0

    @property
    def resource_pattern(self) -> str:
        return endpoint_resources(self.name)

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        return endpoint_matchers(self.name, self.namespace)


def endpoint_targets(config: EnvironmentConfig) -> tuple[EndpointTarget, ...]:
    return tuple(EndpointTarget(name=e.name, namespace=e.namespace, resource_name=e.resource_name, slo=e.slo, index=i)
                 for i, e in enumerate(config.endpoints))


@dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule; ``metrics`` are the catalogue entries its expression reads."""

    alert: str
    expr: str
    for_: str
    severity: Severity
    summary: str
    description: str
    metrics: tuple[Metric, ...]

    def to_rule(self, labels: dict[str, str]) -> dict[str, Any]:
        return {"alert": self.alert, "expr": self.expr, "for": self.for_,
                "labels": {"severity": self.severity, **labels},
                "annotations": {"summary": self.summary, "description": self.description}}


def _value(fmt: str) -> str:
    return f'{{{{ $value | printf "{fmt}" }}}}'


def endpoint_rules(target: EndpointTarget, alerts: AlertsConfig) -> list[AlertRule]:
    """The DPD signals of one endpoint (every generation of its IEC) against its objective and the environment's
    thresholds, and the alerts that say when a signal the others read is missing (:func:`companion_rules`)."""
    return signal_rules(target, alerts) + companion_rules(target)


def signal_rules(target: EndpointTarget, alerts: AlertsConfig) -> list[AlertRule]:
    """The DPD signals of one endpoint against its objective and the environment's thresholds."""
    m, slo = target.matchers, target.slo
    ttfb, tpot, waiting = METRICS["ttfb"], METRICS["tpot"], METRICS["waiting"]
    store, finished = METRICS["kv_store"], METRICS["finished"]
    errors, calls = METRICS["errors"], METRICS["invocations"]
    who = f"{target.namespace}/{target.name}"
    return [
        AlertRule("DpdE2eTtftP99BoundAboveSlo", f"{ttft_bound_ms(*m, window=WINDOW)} > {slo.ttft_ms}",
                  "5m", "critical", f"{who}: upper bound of the P99 TTFT above {slo.ttft_ms} ms",
                  f"An upper bound of the P99 time to first token of {who} is {_value('%.0f')} ms (objective "
                  f"{slo.ttft_ms} ms): the P99.5 time to first byte of its prefill pods plus that of its decoder "
                  "(a disaggregated request is two hops; one under the routing threshold has only the second). The "
                  "client's P99 is at most this plus the router's own time. Check the prefill queue and KV transfer "
                  "panels; scale prefill if it queues.", (ttfb,)),
        AlertRule("DpdTpotP99AboveSlo",
                  f"{quantile_ms(tpot, 0.99, *m, role('decode'), window=WINDOW)} > {slo.tpot_ms}",
                  "5m", "critical", f"{who}: P99 TPOT above {slo.tpot_ms} ms",
                  f"P99 time per output token on the decoder of {who} is {_value('%.1f')} ms "
                  f"(objective {slo.tpot_ms} ms). The decoder is saturated: check its queue and the buffer alarm.",
                  (tpot,)),
        AlertRule("DpdPrefillQueueHigh",
                  f"avg({selector(waiting, *m, role('prefill'))}) > {alerts.prefill_queue_depth}",
                  "5m", "warning", f"{who}: prefill queue above {alerts.prefill_queue_depth} per prefiller",
                  f"On average {_value('%.0f')} requests wait on each prefiller of {who}; "
                  "TTFT grows with the queue. Add prefill replicas (pdSpec.prefillSpec.replicas).",
                  (waiting,)),
        AlertRule("DpdKvTransferSlow",
                  f"{quantile_ms(store, 0.99, *m, role('prefill'), window=WINDOW)} > {alerts.kv_transfer_p99_ms}",
                  "10m", "warning", f"{who}: P99 KV transfer above {alerts.kv_transfer_p99_ms} ms",
                  f"The prefillers of {who} take {_value('%.0f')} ms (P99) to hand a KV cache to the decoder "
                  "(lmcache:time_to_store: the decoder's buffer allocation and the NIXL write). Over EFA a full "
                  "16k-token cache per rank takes tens of ms, over TCP hundreds: check the nodes' EFA devices and "
                  "that both roles share one AZ; with the DecoderBufferOverflow alarm, the decoder's buffer is full.",
                  (store,)),
        AlertRule("DpdFallbackRatioHigh",
                  f"{fallback_ratio(*m)} > {alerts.fallback_ratio:g}",
                  "30m", "warning", f"{who}: most requests skip the prefillers",
                  f"{{{{ $value | humanizePercentage }}}} of the requests of {who} stay under the routing threshold "
                  "and run prefill on the decoder. Lower pdSpec.routingThreshold, or serve this traffic colocated.",
                  (finished,)),
        AlertRule("DpdRequestErrorsHigh", f"{error_ratio(*m, window=WINDOW)} > {alerts.error_ratio:g}",
                  "5m", "critical", f"{who}: more than {alerts.error_ratio * 100:g}% of the requests fail",
                  f"{{{{ $value | humanizePercentage }}}} of the requests of {who} failed over {WINDOW} "
                  "(model_errors_total of both roles against the requests that reached the decoder or failed on a "
                  "prefiller). The dashboard's request error panel shows which role fails; read that role's pod logs "
                  "and the status codes of model_errors_total.", (errors, calls)),
    ]


def companion_rules(target: EndpointTarget) -> list[AlertRule]:
    """One "metrics missing" alert per series an alert of the rule file reads that may not exist (an alert on a
    missing series never fires): requests flow on the pods, the series is not there. The evidence that requests flow
    is ``vllm:request_success_total``, itself watched from the pods' successful POSTs (DpdFallbackRatioMetricsMissing).
    The node alerts' DCGM series are watched from the endpoint's traffic: its pods serving means its GPUs exist.
    tests/hyperpod_dpd/monitoring/test_alert_guards.py checks that every series read is watched."""
    m, who = target.matchers, f"{target.namespace}/{target.name}"
    ttfb, tpot, waiting = METRICS["ttfb"], METRICS["tpot"], METRICS["waiting"]
    store, finished, calls = METRICS["kv_store"], METRICS["finished"], METRICS["invocations"]
    xid, vol, agg = METRICS["xid"], METRICS["ecc_dbe_volatile"], METRICS["ecc_dbe_aggregate"]

    def routing(hop: Role) -> str:  # vllm:request_success_total is watched here, so successful POSTs show the requests
        return unobserved(hop, finished, *m, requests=ttfb, request_evidence=INVOCATIONS, window=BLIND_WINDOW)

    return [
        AlertRule("DpdTtftMetricsMissing",
                  f"{unobserved('prefill', ttfb, *m, evidence=INVOCATIONS[1:], window=BLIND_WINDOW)} or "
                  f"{unobserved('decode', ttfb, *m, evidence=INVOCATIONS[1:], window=BLIND_WINDOW)}",
                  BLIND_FOR, "warning", f"{who}: TTFT alert blind on the {{{{ $labels.role }}}} pods",
                  f"The {{{{ $labels.role }}}} pods of {who} finish requests but export no model_ttfb_milliseconds "
                  "for them: DpdE2eTtftP99BoundAboveSlo cannot see that hop. Check the endpoint's metrics "
                  "(metrics.enabled) and that the observability add-on scrapes the pods' proxy.",
                  (finished, ttfb)),
        AlertRule("DpdKvTransferMetricsMissing",
                  unobserved("prefill", store, *m, window=BLIND_WINDOW),
                  BLIND_FOR, "warning", f"{who}: KV transfer alert blind",
                  f"The prefillers of {who} finish requests but observe no lmcache:time_to_store: DpdKvTransferSlow "
                  "cannot see the KV transfer. The image's LMCache may not export it (unconfirmed for the "
                  "operator's images), or its metrics are not scraped; check the prefill pods' /metrics.",
                  (finished, store)),
        AlertRule("DpdRequestErrorsMetricsMissing",
                  unobserved("decode", calls, *m, evidence=POSTS, window=BLIND_WINDOW),
                  BLIND_FOR, "warning", f"{who}: request error alert blind",
                  f"The decoder of {who} finishes requests but counts no model_invocations_total POSTs: "
                  "DpdRequestErrorsHigh has no requests to divide by. Check the endpoint's metrics (metrics.enabled) "
                  "and that the observability add-on scrapes the pods' proxy.", (finished, calls)),
        AlertRule("DpdTpotMetricsMissing", unobserved("decode", tpot, *m, window=BLIND_WINDOW),
                  BLIND_FOR, "warning", f"{who}: TPOT alert blind",
                  f"The decoder of {who} finishes requests but observes no vllm:request_time_per_output_token_seconds: "
                  "DpdTpotP99AboveSlo cannot see the decode latency. vLLM registers this per-request histogram only "
                  "since vllm-project/vllm #24015 (older releases have the per-token "
                  "vllm:time_per_output_token_seconds instead): check the vLLM version of the decode image, and that "
                  "the observability add-on scrapes the decode pods' /metrics.", (finished, tpot)),
        AlertRule("DpdPrefillQueueMetricsMissing",
                  unobserved("prefill", waiting, *m, seen="exists", window=BLIND_WINDOW),
                  BLIND_FOR, "warning", f"{who}: prefill queue alert blind",
                  f"The prefillers of {who} finish requests but export no vllm:num_requests_waiting: "
                  "DpdPrefillQueueHigh cannot see their queue. vLLM registers it with vllm:request_success_total, so a "
                  "scrape that keeps only some vllm: metrics (a metric allowlist or relabelling rule) drops it; "
                  "check the prefill pods' /metrics and the scrape's metric selection.", (finished, waiting)),
        AlertRule("DpdFallbackRatioMetricsMissing",
                  f"{routing('prefill')} or {routing('decode')}",
                  BLIND_FOR, "warning", f"{who}: routing alert blind on the {{{{ $labels.role }}}} pods",
                  f"The {{{{ $labels.role }}}} pods of {who} answer requests (successful POSTs in "
                  "model_ttfb_milliseconds) but export no vllm:request_success_total: DpdFallbackRatioHigh cannot see "
                  "the routing, and the other MetricsMissing alerts of these pods, which read it to know that requests "
                  "flow, are blind too. Check that the observability add-on scrapes the vLLM metrics of the pods' "
                  "model container.", (ttfb, finished)),
        AlertRule("DpdGpuXidMetricsMissing",
                  unobserved("decode", xid, *m, seen="exists", anywhere=True, window=BLIND_WINDOW),
                  BLIND_FOR, "warning", f"{who}: GPU XID alert blind",
                  f"The decoder of {who} finishes requests on its GPUs but the workspace has no DCGM_FI_DEV_XID_ERRORS "
                  "series: GPUXidError cannot see any GPU. Check that the observability add-on's accelerated compute "
                  "metrics (the DCGM exporter) are on and scraped.", (finished, xid)),
        AlertRule("DpdGpuEccMetricsMissing",
                  unobserved("decode", (vol, agg), *m, seen="exists", anywhere=True, window=BLIND_WINDOW),
                  BLIND_FOR, "warning", f"{who}: GPU ECC alert blind",
                  f"The decoder of {who} finishes requests on its GPUs but the workspace has neither "
                  "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL nor DCGM_FI_DEV_ECC_DBE_AGG_TOTAL: GPUMemoryErrorDetected cannot see "
                  "a double-bit ECC error. NVIDIA's default counter list for the DCGM exporter leaves the ECC fields "
                  "commented out: enable them in the exporter's counters; until then only the NodeHealthEvents alarm "
                  "(the health-monitoring agent) reports them.", (finished, vol, agg)),
    ]


def _unreachable(config: EnvironmentConfig) -> list[Issue]:
    """Thresholds no alert could ever cross: histogram_quantile never reports above a histogram's highest finite
    bucket (prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile)."""
    checks: list[tuple[str, int, Metric]] = [("alerts.kv_transfer_p99_ms", config.alerts.kv_transfer_p99_ms,
                                               METRICS["kv_store"])]
    checks += [(f"endpoints[{t.index}].slo.tpot_ms", t.slo.tpot_ms, METRICS["tpot"]) for t in endpoint_targets(config)]
    issues = []
    for path, threshold_ms, metric in checks:
        ceiling = metric.highest_bucket
        ceiling_ms = ceiling * 1000 if ceiling is not None and metric.unit == "s" else ceiling
        if ceiling_ms is not None and threshold_ms >= ceiling_ms:
            issues.append(Issue(path, threshold_ms, f"must be below {ceiling_ms:g}, the highest bucket of "
                                f"{metric.name}: a P99 cannot be seen above it, so the alert could never fire"))
    if config.alerts.fallback_ratio >= 1:  # the share of requests under the threshold is at most 1
        issues.append(Issue("alerts.fallback_ratio", config.alerts.fallback_ratio,
                            "must be below 1: the share of requests under the routing threshold never exceeds 1, so "
                            "DpdFallbackRatioHigh could never fire"))
    return issues


def node_rules() -> list[AlertRule]:
    """GPU faults from the DCGM exporter, named and written as AWS's own HyperPod alert rules write them."""
    xid, vol, agg = METRICS["xid"], METRICS["ecc_dbe_volatile"], METRICS["ecc_dbe_aggregate"]
    return [
        AlertRule("GPUXidError", f"{selector(xid)} > 0", "0m", "critical", "GPU XID error detected",
                  "GPU {{ $labels.gpu }} experienced XID error {{ $value }} on node {{ $labels.Hostname }}; "
                  "the health-monitoring agent reboots or replaces the node.", (xid,)),
        AlertRule("GPUMemoryErrorDetected",
                  f"{selector(vol)} > 0 or {selector(agg)} > {selector(agg)} offset 5m", "0m", "critical",
                  "GPU ECC double-bit error detected",
                  "GPU {{ $labels.gpu }} on node {{ $labels.Hostname }} has detected ECC double-bit errors.",
                  (vol, agg)),
    ]


def rule_groups(config: EnvironmentConfig) -> dict[str, Any]:
    """The Prometheus rule file of one environment (``groups[].rules[]``); a threshold no alert could cross is a
    :class:`ConfigError` naming the field."""
    issues = _unreachable(config)
    if issues:
        raise ConfigError(config.source, issues)
    common = {"environment": config.name, "hyperpod_cluster": config.hyperpod.cluster_name}
    groups = [{"name": f"hyperpod-dpd-{t.name}",
               "rules": [r.to_rule({**common, "endpoint": t.name, "namespace": t.namespace})
                         for r in endpoint_rules(t, config.alerts)]}
              for t in endpoint_targets(config)]
    groups.append({"name": "hyperpod-dpd-nodes", "rules": [r.to_rule(common) for r in node_rules()]})
    return {"groups": groups}


def rules_yaml(config: EnvironmentConfig) -> str:
    """The rule file as AMP's ``RuleGroupsNamespace.Data`` takes it, validated first."""
    from hyperpod_dpd.monitoring.validation import check_rule_file

    document = rule_groups(config)
    check_rule_file(document)
    return yaml.safe_dump(document, sort_keys=False, width=1000)


def all_rules(config: EnvironmentConfig) -> list[AlertRule]:
    return [r for t in endpoint_targets(config) for r in endpoint_rules(t, config.alerts)] + node_rules()


@dataclass(frozen=True)
class LogAlarm:
    """A CloudWatch alarm on one log metric, on the environment's SNS topic.

    By default any matching line within ``period_minutes`` raises it and no line is healthy (missing data does not
    breach). With ``absent``, it is the fail-safe companion of the alarm named in ``guards``: it fires when the
    metric counts no line in each of ``evaluation_periods`` periods in a row (missing data breaches), the sign that
    the log lines the guarded alarm reads do not arrive. ``name``: the alarm's name in the toolkit (default the
    metric's).
    """

    metric: Metric
    severity: Severity
    description: str
    period_minutes: int = 5
    absent: bool = False
    evaluation_periods: int = 1
    guards: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.metric.name)
        if self.absent != (self.guards is not None):
            raise ValueError(f"{self.name}: an absence alarm names the alarm it guards, and only it does")


BUFFER_OVERFLOW_ALARM = LogAlarm(
    METRICS["buffer_overflow"], "warning",
    "A decoder logged 'Failed to allocate memory object, retrying...': its PD buffer is full and KV transfers wait. "
    "Raise pd_buffer_size, scale decode, or reduce concurrency (docs/monitoring.md).")
NODE_HEALTH_ALARM = LogAlarm(
    METRICS["node_health_events"], "critical",
    "The HyperPod health-monitoring agent reported a node health event (GPU XID/ECC, NVLink, EFA); the node is "
    "rebooted or replaced. Read its SagemakerHealthMonitoringAgent log stream (docs/monitoring.md).")
# Log alarms left without an absence companion, and why none can tell their logs missing from healthy.
NO_ABSENCE_COMPANION = {
    NODE_HEALTH_ALARM.name: "the health-monitoring agent's stream in the HyperPod cluster's own log group: HyperPod "
                            "documents only its detection events, no line it writes while every node is healthy, so "
                            "an absence alarm would fire on every healthy cluster",
}


def container_logs_missing_alarm(alerts: AlertsConfig) -> LogAlarm:
    """``VllmLogsMissing``: no vLLM line in the container log group for ``alerts.container_logs_missing_minutes``
    (5-minute periods, every one without a line). Without it a broken log pipeline (the add-on's logging off or
    failing, a wrong ``alerts.container_log_group``) would leave ``DecoderBufferOverflow`` green for ever."""
    minutes = alerts.container_logs_missing_minutes
    return LogAlarm(
        METRICS["vllm_log_lines"], "warning",
        f"VllmLogsMissing: no vLLM stats or metrics-scrape line reached the container log group for {minutes} min, "
        f"so {BUFFER_OVERFLOW_ALARM.name} cannot fire. Check operator.observability.logging or "
        "alerts.container_log_group and the log collector; an idle decoder whose scrapes are not access-logged is "
        "silent too: raise alerts.container_logs_missing_minutes (docs/monitoring.md, 'Container logs missing').",
        period_minutes=CONTAINER_LOGS_MISSING_STEP_MINUTES, absent=True,
        evaluation_periods=minutes // CONTAINER_LOGS_MISSING_STEP_MINUTES, guards=BUFFER_OVERFLOW_ALARM.name,
        name="VllmLogsMissing")


def log_alarms(alerts: AlertsConfig) -> tuple[LogAlarm, ...]:
    """The CloudWatch log alarms of an environment with these ``alerts`` settings."""
    return BUFFER_OVERFLOW_ALARM, container_logs_missing_alarm(alerts), NODE_HEALTH_ALARM


LOG_ALARMS: tuple[LogAlarm, ...] = log_alarms(AlertsConfig())  # at the defaults (the metrics do not depend on them)


def alertmanager_definition(topic_arn: str, region: str, subject: str = "hyperpod-dpd") -> str:
    """The AMP alert manager definition that sends every alert to one SNS topic (AMP supports SNS receivers only;
    ``sigv4.region`` is required). ``topic_arn`` and ``region`` may be CDK tokens."""
    receiver = {"name": "sns", "sns_configs": [{
        "topic_arn": topic_arn, "sigv4": {"region": region},
        "subject": f"{subject}: {{{{ .CommonLabels.alertname }}}} {{{{ .CommonLabels.endpoint }}}}",
        "attributes": {"severity": "{{ .CommonLabels.severity }}"}}]}
    config = {"route": {"receiver": "sns", "group_by": ["alertname", "environment", "endpoint"],
                        "group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"},
              "receivers": [receiver]}
    inner = yaml.safe_dump(config, sort_keys=False, width=1000)
    return "alertmanager_config: |\n" + "".join(f"  {line}\n" for line in inner.splitlines())
