"""The Grafana dashboard of one environment's DPD endpoints, built from the metric catalogue.

Panels follow the DPD page's dashboard ("Observability": E2E TTFT, Prefill TTFT, Prefill/Decode Queue, Prefill Time,
Decode Latency (TPOT), KV Transfer Time, DPD Routing Counts), plus the decoder's KV load time, the request error
ratio, the GPU faults and the three CloudWatch log metrics the alarms watch. Queries come from the same builders as the
alert rules (:mod:`hyperpod_dpd.monitoring.metrics`, :mod:`hyperpod_dpd.monitoring.signals`), with the endpoint picked
by the ``$endpoint`` variable: its values are endpoint names and every query matches ``resource_name=~"$endpoint-<hex>"``,
so every generation of the endpoint's IEC is shown (Grafana's Prometheus data source escapes a multi-value variable's
regular-expression characters, so the variable holds names, never patterns). Like AWS's inference dashboard, the data
source is a ``$datasource`` variable (the Amazon Managed Prometheus data source); the log metrics use a
``$cloudwatch`` variable. No CDK here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.monitoring.alerts import WINDOW, EndpointTarget, endpoint_targets
from hyperpod_dpd.monitoring.metrics import (
    HOSTNAME,
    METRICS,
    RESOURCE,
    Matcher,
    Metric,
    cloudwatch_namespace,
    fallback_ratio,
    quantile_ms,
    rate_sum,
    role,
    selector,
)
from hyperpod_dpd.monitoring.signals import (
    GENERATION_PATTERN,
    HOP_QUANTILE,
    error_ratio,
    hop_error_ratio,
    hop_quantile_ms,
    ttft_bound_ms,
)

SCHEMA_VERSION = 39  # Grafana 10.4 and newer (AWS's inference dashboard is at 39 too)
PROMETHEUS = {"type": "prometheus", "uid": "${datasource}"}
CLOUDWATCH = {"type": "cloudwatch", "uid": "${cloudwatch}"}
ENDPOINT = Matcher(RESOURCE, f"$endpoint-{GENERATION_PATTERN}", "=~")


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    """One time-series panel: what it reads (``metrics``, all from the catalogue) and how it shows it."""

    title: str
    description: str
    unit: str
    metrics: tuple[Metric, ...]
    queries: tuple[Query, ...] = ()
    threshold: float | None = None
    datasource: Literal["prometheus", "cloudwatch"] = "prometheus"
    width: int = 8


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[PanelSpec, ...] = field(default_factory=tuple)


def _strictest(targets: Sequence[EndpointTarget], attribute: str) -> float | None:
    values = [getattr(t.slo, attribute) for t in targets]
    return float(min(values)) if values else None


def rows(config: EnvironmentConfig) -> tuple[Row, ...]:
    """What the dashboard shows, in order (``rows(config)[i].panels[j].metrics`` is what a test checks)."""
    targets = endpoint_targets(config)
    ttfb, ttft, tpot, prefill_time = METRICS["ttfb"], METRICS["ttft"], METRICS["tpot"], METRICS["prefill_time"]
    waiting, store, load, finished = METRICS["waiting"], METRICS["kv_store"], METRICS["kv_retrieve"], METRICS["finished"]
    errors, calls = METRICS["errors"], METRICS["invocations"]
    xid, ecc, ecc_lifetime = METRICS["xid"], METRICS["ecc_dbe_volatile"], METRICS["ecc_dbe_aggregate"]

    def p(metric: Metric, *matchers: Matcher) -> tuple[Query, ...]:
        return tuple(Query(quantile_ms(metric, q, ENDPOINT, *matchers, window=WINDOW), f"P{int(q * 100)}")
                     for q in (0.5, 0.9, 0.99))

    bound = (f"Upper bound of the client's P99 time to first token: P{HOP_QUANTILE * 100:g} of the prefill pods' "
             f"time to first byte plus that of the decoder (the router's two hops; no pod sees the client's TTFT). "
             f"{ttfb.description}. The decoder's own engine TTFT (vLLM) is drawn for comparison with its hop. "
             "Red line: the strictest endpoint objective (slo.ttft_ms).")
    return (
        Row("Latency against the objective", (
            PanelSpec("E2E TTFT (upper bound of the P99)", bound, "ms", (ttfb, ttft), (
                Query(ttft_bound_ms(ENDPOINT, window=WINDOW), "P99 bound"),
                Query(hop_quantile_ms("prefill", 0.99, ENDPOINT, window=WINDOW), "prefill hop P99"),
                Query(hop_quantile_ms("decode", 0.99, ENDPOINT, window=WINDOW), "decode hop P99"),
                # what the decoder's engine measures itself, to compare with the decode hop's first byte
                Query(quantile_ms(ttft, 0.99, ENDPOINT, role("decode"), window=WINDOW), "decoder engine TTFT P99")),
                _strictest(targets, "ttft_ms"), width=12),
            PanelSpec("Decode latency (TPOT)", tpot.description + ". Red line: the strictest slo.tpot_ms.",
                      "ms", (tpot,), p(tpot, role("decode")), _strictest(targets, "tpot_ms"), width=12),
            PanelSpec("Prefill TTFT", ttft.description, "ms", (ttft,), p(ttft, role("prefill"))),
            PanelSpec("Prefill time", prefill_time.description, "ms", (prefill_time,), p(prefill_time, role("prefill"))),
            PanelSpec("KV transfer time (prefiller's store)", store.description + ". Red line: alerts.kv_transfer_p99_ms.",
                      "ms", (store,), p(store, role("prefill")), float(config.alerts.kv_transfer_p99_ms)),
            PanelSpec("Decoder KV load time (local copy, not the fabric)", load.description, "ms", (load,),
                      p(load, role("decode"))),
        )),
        Row("Queues, routing and errors", (
            PanelSpec("Prefill queue", waiting.description + " (per prefiller).", "short", (waiting,),
                      (Query(f"sum by (pod_name) ({selector(waiting, ENDPOINT, role('prefill'))})", "{{pod_name}}"),),
                      float(config.alerts.prefill_queue_depth)),
            PanelSpec("Decode queue", waiting.description + " (the decoder).", "short", (waiting,),
                      (Query(f"sum by (pod_name) ({selector(waiting, ENDPOINT, role('decode'))})", "{{pod_name}}"),)),
            PanelSpec("DPD routing", finished.description + ".", "reqps", (finished,), (
                Query(rate_sum(finished, ENDPOINT, role("prefill"), window=WINDOW), "disaggregated"),
                Query(f"clamp_min({rate_sum(finished, ENDPOINT, role('decode'), window=WINDOW)} - "
                      f"{rate_sum(finished, ENDPOINT, role('prefill'), window=WINDOW)}, 0)", "under threshold"))),
            PanelSpec("Fallback ratio", "Share of requests under the routing threshold (decoder-only prefill).",
                      "percentunit", (finished,), (Query(fallback_ratio(ENDPOINT), "fallback"),),
                      config.alerts.fallback_ratio),
            PanelSpec("Request error ratio",
                      "Share of the client's requests that failed: model_errors_total of both roles over the requests "
                      "that reached the decoder or failed on a prefiller (a disaggregated request is two invocations). "
                      "Each role's own share of failed invocations shows which one fails. Red line: alerts.error_ratio.",
                      "percentunit", (errors, calls), (
                          Query(error_ratio(ENDPOINT, window=WINDOW), "failed requests"),
                          Query(hop_error_ratio("prefill", ENDPOINT, window=WINDOW), "prefill invocations failed"),
                          Query(hop_error_ratio("decode", ENDPOINT, window=WINDOW), "decode invocations failed")),
                      config.alerts.error_ratio),
        )),
        Row("Nodes and logs", (
            PanelSpec("GPU XID errors", xid.description, "short", (xid,),
                      (Query(f"max by ({HOSTNAME}, gpu) ({selector(xid)})", "{{Hostname}} GPU {{gpu}}"),)),
            PanelSpec("GPU double-bit ECC errors", f"{ecc.description}; and new ones over its lifetime (1 h).",
                      "short", (ecc, ecc_lifetime), (
                          Query(f"max by ({HOSTNAME}, gpu) ({selector(ecc)})", "{{Hostname}} GPU {{gpu}} since load"),
                          Query(f"max by ({HOSTNAME}, gpu) (increase({selector(ecc_lifetime)}[1h]))",
                                "{{Hostname}} GPU {{gpu}} new (1 h)"))),
            PanelSpec("Decoder buffer overflows", METRICS["buffer_overflow"].description, "short",
                      (METRICS["buffer_overflow"],), datasource="cloudwatch"),
            PanelSpec("Node health events", METRICS["node_health_events"].description, "short",
                      (METRICS["node_health_events"],), datasource="cloudwatch"),
            PanelSpec("vLLM log lines (container logs arriving)", METRICS["vllm_log_lines"].description, "short",
                      (METRICS["vllm_log_lines"],), datasource="cloudwatch"),
        )),
    )


def _field_config(spec: PanelSpec) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": spec.unit, "color": {"mode": "palette-classic"}}
    if spec.threshold is not None:
        defaults["thresholds"] = {"mode": "absolute", "steps": [{"color": "green", "value": None},
                                                                {"color": "red", "value": spec.threshold}]}
        defaults["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return {"defaults": defaults, "overrides": []}


def _targets(spec: PanelSpec, namespace: str, region: str) -> list[dict[str, Any]]:
    if spec.datasource == "cloudwatch":
        (metric,) = spec.metrics
        return [{"refId": "A", "datasource": CLOUDWATCH, "queryMode": "Metrics", "namespace": namespace,
                 "metricName": metric.name, "statistic": "Sum", "period": "300", "dimensions": {},
                 "matchExact": True, "region": region}]
    return [{"refId": chr(ord("A") + i), "datasource": PROMETHEUS, "expr": q.expr, "legendFormat": q.legend}
            for i, q in enumerate(spec.queries)]


def dashboard(config: EnvironmentConfig) -> dict[str, Any]:
    """The dashboard JSON of one environment (validated by the caller: :func:`render`)."""
    namespace = cloudwatch_namespace(config.hyperpod.cluster_name)
    panels: list[dict[str, Any]] = []
    next_id, y = 1, 0
    for row in rows(config):
        panels.append({"type": "row", "id": next_id, "title": row.title, "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        next_id, y, x, tallest = next_id + 1, y + 1, 0, 0
        for spec in row.panels:
            if x + spec.width > 24:
                x, y = 0, y + tallest
            panels.append({
                "type": "timeseries", "id": next_id, "title": spec.title, "description": spec.description,
                "datasource": CLOUDWATCH if spec.datasource == "cloudwatch" else PROMETHEUS,
                "gridPos": {"h": 8, "w": spec.width, "x": x, "y": y},
                "fieldConfig": _field_config(spec),
                "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                            "tooltip": {"mode": "multi", "sort": "desc"}},
                "targets": _targets(spec, namespace, config.region)})
            next_id, x, tallest = next_id + 1, x + spec.width, 8
        y += tallest
    names = [t.name for t in endpoint_targets(config)]
    # The uid is what an import overwrites: it follows stack_name_prefix, so a renamed environment keeps its dashboard.
    return {
        "uid": config.stack_prefix[:40], "title": f"HyperPod DPD: {config.name}",
        "description": f"DPD endpoints of {config.name} (HyperPod cluster {config.hyperpod.cluster_name}); "
                       "generated by hyperpod-dpd from its metric catalogue. Edit the code, not this JSON.",
        "tags": ["hyperpod", "dpd", "hyperpod-dpd", config.name], "editable": True, "graphTooltip": 1,
        "timezone": "browser", "refresh": "30s", "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "templating": {"list": [
            {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus"},
            {"type": "datasource", "name": "cloudwatch", "label": "CloudWatch", "query": "cloudwatch"},
            # "All" is one group, so "$endpoint-<hex>" applies the generation suffix to every name.
            {"type": "custom", "name": "endpoint", "label": "Endpoint (every generation of its IEC)",
             "query": ",".join(names), "multi": True, "includeAll": True, "allValue": f"({'|'.join(names)})",
             "current": {"text": "All", "value": "$__all"}},
        ]},
        "panels": panels,
    }


def render(config: EnvironmentConfig) -> dict[str, Any]:
    """:func:`dashboard`, checked against Grafana's dashboard schema and the PromQL checks."""
    from hyperpod_dpd.monitoring.validation import check_dashboard

    document = dashboard(config)
    check_dashboard(document)
    return document
