"""``hpdpd verify``'s autoscaling rows: ``autoscaling:prefill`` / ``autoscaling:decode`` for a role with a Prometheus
trigger, and the pod count an autoscaled role is held to.

KEDA reads a trigger query that returns no series as 0 (its Prometheus scaler's ``ignoreNullValues`` defaults to
``true``, keda.sh "Prometheus" scaler; the IEC's ``prometheusTrigger`` cannot change it, CRD in k8s/crds/), so a
query over a missing series keeps the role at ``min_replicas`` and nothing fails. The row runs the trigger's own
query on the trigger's server (its ``server_address``, else ``--prometheus``) and warns when it returns no series, or
more than one ("query must return a vector/scalar single element response", the same KEDA page). CloudWatch
triggers are not read here (config warns on them: hyperpod_dpd.config.endpoint_autoscaling_checks).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.ops.checks import Check
from hyperpod_dpd.ops.metrics import MetricsError, Prometheus

NO_SERIES_CAUSE = ("the query's metric or labels match nothing on this server (a name or label typo, another "
                   "namespace or generation, the observability add-on or the endpoint's metrics.enabled off, or "
                   "another workspace); KEDA reads it as 0")


def expected_pods(endpoint: Any, role: str) -> int:
    """The pods a role must have Running: its ``autoscaling.min_replicas`` (KEDA may scale it down to that), else its
    ``replicas``."""
    config = endpoint.role(role)
    return config.autoscaling.min_replicas if config.autoscaling is not None else int(config.replicas)


def trigger_checks(endpoint: Any, prometheus: Prometheus | None) -> list[Check]:
    """One ``autoscaling:<role>`` row per role with a Prometheus trigger."""
    rows: list[Check] = []
    for role in DPD_ROLES:
        scaling = endpoint.role(role).autoscaling
        if scaling is None or scaling.prometheus is None:
            continue
        rows.append(_trigger_check(role, scaling, prometheus))
    return rows


def _trigger_check(role: str, scaling: Any, prometheus: Prometheus | None) -> Check:
    name, trigger = f"autoscaling:{role}", scaling.prometheus
    floor = f"{role} stays at min_replicas {scaling.min_replicas}"
    if prometheus is None:
        return Check(name=name, status="warn", detail="trigger query not run: pass --prometheus (or set "
                     "HPDPD_PROMETHEUS_URL) to check that it returns a series",
                     cause=f"a query without series reads as 0 and {floor}")
    server = dataclasses.replace(prometheus, url=trigger.server_address) if trigger.server_address else prometheus
    try:
        answer = server.query(trigger.query)
    except MetricsError as exc:
        return Check(name=name, status="warn", detail=f"trigger query failed: {exc.reason}",
                     cause=f"KEDA's query of the same server may fail too, and then {floor} or where it is")
    values = [v for _, v in answer if not math.isnan(v)]
    if not answer:
        return Check(name=name, status="warn", detail=f"trigger query returns no series on {server.url}: {floor}",
                     cause=NO_SERIES_CAUSE)
    if len(answer) > 1:
        return Check(name=name, status="warn", detail=f"trigger query returns {len(answer)} series; KEDA needs one "
                     "(aggregate it, e.g. sum(...))", cause="KEDA fails every poll and the role is not scaled")
    if not values:
        return Check(name=name, status="warn", detail="trigger query returns NaN (no samples in its window)",
                     cause=f"KEDA cannot use NaN and {floor} or where it is")
    per = "per pod" if trigger.metric_type == "Average" else "in total"
    return Check(name=name, status="pass", detail=f"trigger query returns {values[0]:g} (target {trigger.target_value:g} "
                 f"{per}; {scaling.min_replicas}-{scaling.max_replicas} replicas)")
