"""``hpdpd verify``'s ``metrics-scope`` row: does the Prometheus workspace hold this endpoint's series from one cluster?

The SLO alerts (:mod:`hyperpod_dpd.monitoring.alerts`), the dashboard, the canary's and the rollout's checks and the
fabric measurement select an endpoint's series by ``namespace`` and ``resource_name`` only, as AWS's own HyperPod
inference dashboard does within one cluster. Two clusters writing to one workspace (an existing workspace given as
``operator.observability.prometheus_workspace_arn`` to several environments) with the same namespace and endpoint
name (the sample environments promote one endpoint under one name) would have every one of those queries mix their
series: a quantile over both clusters' histograms hides one cluster's breach behind the other's traffic.

HyperPod labels every inference metric with ``cluster_id`` (HyperPod inference observability page, "Metric
dimensions"; AWS's inference dashboard selects ``model_invocations_total{cluster_id="$cluster_id", ...}`` with
``cluster_id`` taken from ``kube_node_info`` of the chosen ``cluster_name``: aws/sagemaker-hyperpod-cluster-setup
@ b920fcf ``eks/cloudformation/resources/grafana-lambda-function/lambda_function/dashboards/templates/
inference.json``). The row counts the distinct values of that label among the endpoint's series; it does not need
to know which value is this cluster's. Several values fail the row (the alerts cannot work as configured); series
without the label, or no series at all, cannot tell and warn.
"""

from __future__ import annotations

from typing import Any

from hyperpod_dpd.monitoring.metrics import CLUSTER_ID, METRICS, selector
from hyperpod_dpd.monitoring.signals import endpoint_matchers
from hyperpod_dpd.ops.checks import Check
from hyperpod_dpd.ops.metrics import MetricsError, Prometheus

NAME = "metrics-scope"
# the series every endpoint alert reads one of: its proxies' invocations and its engines' finished requests
SCOPE_METRICS = ("invocations", "finished")
UNLABELLED = "(no cluster_id label)"


def scope_query(endpoint: Any) -> str:
    """One sample per ``cluster_id`` among the series of every generation of the endpoint."""
    matchers = endpoint_matchers(endpoint.name, endpoint.namespace)
    union = " or ".join(selector(METRICS[key], *matchers, part="count") for key in SCOPE_METRICS)
    return f"count by ({CLUSTER_ID}) ({union})"


def scope_check(endpoint: Any, prometheus: Prometheus) -> Check:
    """The ``metrics-scope`` row of one endpoint against ``prometheus``."""
    where = f"{endpoint.namespace}/{endpoint.name}"
    try:
        answer = prometheus.query(scope_query(endpoint))
    except MetricsError as exc:
        return Check(name=NAME, status="warn", detail=f"scope query failed: {exc.reason}",
                     cause="whether other clusters write this endpoint's series to the workspace is unknown")
    clusters = sorted({labels.get(CLUSTER_ID) or UNLABELLED for labels, _ in answer})
    if not clusters:
        return Check(name=NAME, status="warn", detail=f"no series of {where} on {prometheus.url}",
                     cause="the endpoint's metrics do not reach this server (the observability add-on or the "
                           "endpoint's metrics.enabled off, or another workspace); the SLO alerts see nothing either")
    labelled = [c for c in clusters if c != UNLABELLED]
    if len(clusters) > 1:
        return Check(name=NAME, status="fail",
                     detail=f"the workspace holds series of {where} from {len(clusters)} clusters "
                            f"(cluster_id {', '.join(clusters)}): the SLO alerts, the dashboard and the rollout's "
                            "checks select by namespace and name, so they mix the clusters",
                     fix="give each cluster its own workspace (leave operator.observability.prometheus_workspace_arn "
                         "unset and the toolkit creates one), or a namespace or endpoint name no other cluster uses "
                         "in this workspace")
    if not labelled:
        return Check(name=NAME, status="warn", detail=f"the series of {where} carry no {CLUSTER_ID} label",
                     cause="not the HyperPod observability add-on's series; whether other clusters write them "
                           "cannot be told, and the alerts would mix them")
    return Check(name=NAME, status="pass", detail=f"series of {where} come from one cluster ({CLUSTER_ID} "
                 f"{labelled[0]})")
