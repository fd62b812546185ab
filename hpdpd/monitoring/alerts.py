"""The DPD alerts of one environment, from the metric catalogue and the configuration.

* Prometheus rules (one group per endpoint, one for the nodes) for an Amazon Managed Prometheus rule groups
  namespace: :func:`rule_groups` / :func:`rules_yaml`.
* CloudWatch alarms on log metric filters (the decoder's buffer overflow, the health agent's events):
  :data:`LOG_ALARMS`.
* The alert manager definition that routes every Prometheus alert to the environment's SNS topic:
  :func:`alertmanager_definition`.

No CDK here; :mod:`hyperpod_dpd.infra.monitoring` turns these into resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import yaml

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.config.alerts import AlertsConfig, SloConfig
from hyperpod_dpd.monitoring.metrics import (
    METRICS,
    NAMESPACE,
    RESOURCE,
    STATUS,
    Matcher,
    Metric,
    fallback_ratio,
    quantile_ms,
    role,
    selector,
)

Severity = Literal["critical", "warning"]
WINDOW = "5m"


@dataclass(frozen=True)
class EndpointTarget:
    """What the alerts and the dashboard need of one endpoint: its IEC's name and namespace, and its objective."""

    name: str
    namespace: str
    resource_name: str
    slo: SloConfig

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        return Matcher(NAMESPACE, self.namespace), Matcher(RESOURCE, self.resource_name)


def endpoint_targets(config: EnvironmentConfig) -> tuple[EndpointTarget, ...]:
    return tuple(EndpointTarget(e.name, e.namespace, e.resource_name, e.slo) for e in config.endpoints)


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


def endpoint_rules(target: EndpointTarget, alerts: AlertsConfig) -> list[AlertRule]:
    """The DPD signals of one endpoint against its objective and the environment's thresholds."""
    m, slo = target.matchers, target.slo
    e2e, tpot, waiting, kv = METRICS["e2e_ttft"], METRICS["tpot"], METRICS["waiting"], METRICS["kv_retrieve"]
    who = f"{target.namespace}/{target.name}"
    return [
        AlertRule("DpdE2eTtftP99AboveSlo",
                  f"{quantile_ms(e2e, 0.99, *m, Matcher(STATUS, '2.*', '=~'), window=WINDOW)} > {slo.ttft_ms}",
                  "5m", "critical", f"{who}: P99 end-to-end TTFT above {slo.ttft_ms} ms",
                  f"P99 time to first token of {who} is {{{{ $value | printf \"%.0f\" }}}} ms (objective "
                  f"{slo.ttft_ms} ms). Check the prefill queue and KV transfer panels; scale prefill if it queues.",
                  (e2e,)),
        AlertRule("DpdTpotP99AboveSlo",
                  f"{quantile_ms(tpot, 0.99, *m, role('decode'), window=WINDOW)} > {slo.tpot_ms}",
                  "5m", "critical", f"{who}: P99 TPOT above {slo.tpot_ms} ms",
                  f"P99 time per output token on the decoder of {who} is {{{{ $value | printf \"%.1f\" }}}} ms "
                  f"(objective {slo.tpot_ms} ms). The decoder is saturated: check its queue and the buffer alarm.",
                  (tpot,)),
        AlertRule("DpdPrefillQueueHigh",
                  f"avg({selector(waiting, *m, role('prefill'))}) > {alerts.prefill_queue_depth}",
                  "5m", "warning", f"{who}: prefill queue above {alerts.prefill_queue_depth} per prefiller",
                  f"On average {{{{ $value | printf \"%.0f\" }}}} requests wait on each prefiller of {who}; "
                  "TTFT grows with the queue. Add prefill replicas (pdSpec.prefillSpec.replicas).",
                  (waiting,)),
        AlertRule("DpdKvTransferSlow",
                  f"{quantile_ms(kv, 0.99, *m, role('decode'), window=WINDOW)} > {alerts.kv_transfer_p99_ms}",
                  "10m", "warning", f"{who}: P99 KV transfer above {alerts.kv_transfer_p99_ms} ms",
                  f"The decoder of {who} takes {{{{ $value | printf \"%.0f\" }}}} ms (P99) to receive a KV cache. "
                  "Under 1 GB/s EFA is not in use: check the nodes' EFA devices and that both roles share one AZ.",
                  (kv,)),
        AlertRule("DpdFallbackRatioHigh",
                  f"{fallback_ratio(*m)} > {alerts.fallback_ratio:g}",
                  "30m", "warning", f"{who}: most requests skip the prefillers",
                  f"{{{{ $value | humanizePercentage }}}} of the requests of {who} stay under the routing threshold "
                  "and run prefill on the decoder. Lower pdSpec.routingThreshold, or serve this traffic colocated.",
                  (METRICS["finished"],)),
    ]


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
    """The Prometheus rule file of one environment (``groups[].rules[]``)."""
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
    """A CloudWatch alarm on one log metric: any matching line within ``period_minutes`` raises it."""

    metric: Metric
    severity: Severity
    description: str
    period_minutes: int = 5


LOG_ALARMS: tuple[LogAlarm, ...] = (
    LogAlarm(METRICS["buffer_overflow"], "warning",
             "A decoder logged 'Failed to allocate memory object, retrying...': its PD buffer is full and KV transfers "
             "wait. Raise pd_buffer_size, scale decode, or reduce concurrency (docs/monitoring.md)."),
    LogAlarm(METRICS["node_health_events"], "critical",
             "The HyperPod health-monitoring agent reported a node health event (GPU XID/ECC, NVLink, EFA); the node "
             "is rebooted or replaced. Read its SagemakerHealthMonitoringAgent log stream (docs/monitoring.md)."),
)


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
