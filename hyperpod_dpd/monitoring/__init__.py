"""Alarms and dashboards as code for the DPD endpoints: one metric catalogue (:mod:`.metrics`), from which the
Prometheus alert rules and CloudWatch log alarms (:mod:`.alerts`) and the Grafana dashboard (:mod:`.dashboard`) are
built, with the expressions over several series they share (:mod:`.signals`: the two-hop TTFT bound, every
generation of an endpoint, "metrics missing") and offline checks of both (:mod:`.validation`). No CDK imports:
:mod:`hyperpod_dpd.infra.monitoring` deploys the alerts, ``python -m hyperpod_dpd.monitoring.export`` writes the
dashboards. See docs/monitoring.md.
"""

from hyperpod_dpd.monitoring.metrics import METRICS, Metric, Source

__all__ = ["METRICS", "Metric", "Source"]
