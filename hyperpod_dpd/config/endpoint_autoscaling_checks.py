"""What a DPD endpoint's autoscaling (``prefill.autoscaling`` / ``decode.autoscaling``) can and cannot do, checked
before anything renders.

KEDA turns a trigger whose query finds no series into a metric of 0, so a query over a missing series keeps the
role at ``min_replicas`` without any error anywhere:

* the Prometheus scaler's ``ignoreNullValues`` defaults to ``true`` ("ignoring the empty value list from
  Prometheus"; keda.sh, "Prometheus" scaler, from 2.10 to the latest page) and the IEC's
  ``prometheusTrigger`` has no field to turn it off (CRD ``spec.pdSpec.autoScalingSpec.*.prometheusTrigger``, k8s/crds/);
* the CloudWatch trigger's ``minValue`` "used in case of empty response from CloudWatch" defaults to 0 (same CRD).

So every Prometheus query is read here against the metric catalogue (:mod:`hyperpod_dpd.monitoring.metrics`, each
metric with its upstream source): a metric no HyperPod DPD endpoint exports, or a selector that matches none of this
endpoint's series (another namespace, another generation, no pod of the endpoint), is an error; a metric or label the
catalogue does not know, a query that also counts other endpoints or the other role, a trigger the toolkit cannot
see the series of, are warnings. ``hpdpd verify --prometheus`` runs each trigger query on the live endpoint
(hyperpod_dpd.ops.verify_autoscaling) and warns when it returns no series.

The operator runs one decoder per endpoint (``MAX_DECODE_REPLICAS``, DPD page), so a decoder that would autoscale
above it is refused once, on ``decode.autoscaling.max_replicas``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.operator import DPD_ROLES, MAX_DECODE_REPLICAS
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoint_fields import GENERATION_LENGTH
from hyperpod_dpd.errors import Issue
from hyperpod_dpd.monitoring.metrics import (
    METRICS,
    NAMESPACE,
    POD,
    RESOURCE,
    VLLM_NIXL_CONNECTOR,
    Metric,
    cloudwatch_namespace,
)
from hyperpod_dpd.monitoring.validation import (
    FUNCTIONS,
    GROUPING_KEYWORDS,
    KEYWORDS,
    promql_problems,
    promql_tokens,
)

if TYPE_CHECKING:
    from hyperpod_dpd.catalogue.operator import DpdRole
    from hyperpod_dpd.config.endpoint_fields import EndpointFields

# Registered only by vLLM's own NixlConnector; a HyperPod DPD endpoint runs LMCacheConnectorV1 with LMCache's PD
# backend, so these series never exist there (catalogue entries kv_bytes and kv_transfer_time, VLLM_NIXL_CONNECTOR).
ABSENT_ON_DPD = ("kv_bytes", "kv_transfer_time")
# An operator-created pod of role R: "<R>-<iec>-..." (DPD page, "What the operator creates"), here with a Deployment's
# ReplicaSet hash and pod suffix. A pod_name pattern pins the endpoint when it refuses the pods of "<name>-other", an
# endpoint whose name starts with this one's (pod_name=~"prefill-llama-.*" also matches endpoint llama-small's pods).
_POD_TAIL = "-5d8f7c9b4-x2x4z"
UNKNOWN_FUNCTION = "unknown function"  # the one lexical finding of promql_problems that may be a newer PromQL function
KEDA_EMPTY = ("KEDA reads a query without series as 0 (the Prometheus scaler's ignoreNullValues defaults to true and "
              "the IEC cannot change it), so the role would stay at min_replicas")
# An AMP workspace URL as the CRD's serverAddress pattern admits it, with its Region and workspace id.
AMP_URL = re.compile(r"https://aps-workspaces\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/workspaces/"
                     r"(?P<id>ws-[a-zA-Z0-9-]+)")
CLOUDWATCH_EMPTY = ("KEDA reads an empty CloudWatch answer as the trigger's minValue (CRD default 0), so the role "
                    "would stay at min_replicas while the metric is missing")


@dataclass(frozen=True)
class Selector:
    """One vector selector of a query: its metric name (None for ``{...}`` alone) and its label matchers."""

    name: str | None
    matchers: tuple[tuple[str, str, str], ...] = ()  # (label, op, value)

    def metrics(self) -> list[Metric]:
        """The catalogue's Prometheus metrics it selects, by its name and its positive ``__name__`` matchers."""
        names = [(op, v) for label, op, v in self.matchers if label == "__name__" and op in ("=", "=~")]
        if self.name is None and not names:
            return []
        return [m for m in METRICS.values() if m.source.prometheus
                and (self.name is None or _normal(self.name) in {_normal(s) for s in _series(m)})
                and all(any(_accepts(op, v, s) for s in _series(m)) for op, v in names)]

    def matching(self, label: str) -> list[tuple[str, str]]:
        """The positive matchers (``=``, ``=~``) on ``label``: the ones that can leave a selector empty."""
        return [(op, value) for name, op, value in self.matchers if name == label and op in ("=", "=~")]


def _normal(series: str) -> str:
    return series.replace(":", "_")


def _series(metric: Metric) -> set[str]:
    """Every series name of a metric (a histogram's three), in both spellings: an OpenTelemetry pipeline may write
    ``:`` as ``_`` (the catalogue's Metric.name_pattern)."""
    parts = ("bucket", "count", "sum") if metric.kind == "histogram" else ()
    names = {metric.name, *(metric.part_series(p) for p in parts)}  # type: ignore[arg-type]
    return names | {_normal(n) for n in names}


def _accepts(op: str, value: str, text: str) -> bool:
    """Whether the positive matcher ``op value`` accepts ``text``; Prometheus anchors regular expressions."""
    if op == "=":
        return value == text
    try:
        return re.fullmatch(value, text) is not None
    except re.error:
        return False


def selectors(query: str) -> list[Selector]:
    """The vector selectors of a PromQL query that promql_problems finds well formed (MonitoringError otherwise)."""
    tokens = promql_tokens(query)
    found: list[Selector] = []
    index = 0
    while index < len(tokens):
        kind, text, _ = tokens[index]
        following = tokens[index + 1][1] if index + 1 < len(tokens) else ""
        if kind == "ident" and text in GROUPING_KEYWORDS and following == "(":
            index = _closing(tokens, index + 1) + 1  # by (le, pod_name): labels, not metrics
            continue
        if kind == "ident" and (following == "(" or (text in FUNCTIONS and following in GROUPING_KEYWORDS)):
            index += 1  # a function, or an aggregation: sum(...), sum by (le) (...)
            continue
        if kind == "ident" and text not in KEYWORDS:
            if following == "{":
                end = _closing(tokens, index + 1)
                found.append(Selector(text, _matchers(tokens[index + 2:end])))
                index = end + 1
                continue
            found.append(Selector(text))
        elif kind == "open" and text == "{":
            end = _closing(tokens, index)
            found.append(Selector(None, _matchers(tokens[index + 1:end])))
            index = end + 1
            continue
        index += 1
    return found


def _closing(tokens: list[tuple[str, str, int]], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index][0] == "open":
            depth += 1
        elif tokens[index][0] == "close":
            depth -= 1
            if depth == 0:
                return index
    return len(tokens) - 1


def _matchers(inner: list[tuple[str, str, int]]) -> tuple[tuple[str, str, str], ...]:
    out = []
    for at in range(0, len(inner) - 2):
        (k1, label, _), (k2, op, _), (k3, value, _) = inner[at:at + 3]
        if k1 == "ident" and k2 == "op" and op in ("=", "!=", "=~", "!~") and k3 == "string":
            out.append((label, op, value[1:-1].replace('\\"', '"').replace("\\\\", "\\")))
    return tuple(out)


# -- errors ---------------------------------------------------------------------------------------------------------------

def decode_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    """The single-decoder limit, reported once: on the ceiling autoscaling would reach, else on ``decode.replicas``."""
    if e.decode.allow_multiple_replicas:
        return
    limit = f"the HyperPod Inference Operator supports {MAX_DECODE_REPLICAS} decoder per endpoint today"
    opt_in = "or set decode.allow_multiple_replicas: true for an operator that runs several decoders"
    scaling = e.decode.autoscaling
    if scaling and scaling.max_replicas > MAX_DECODE_REPLICAS:
        yield Issue(join(path, "decode.autoscaling.max_replicas"), scaling.max_replicas,
                    f"{limit}, so decode may autoscale to at most {MAX_DECODE_REPLICAS}; autoscale prefill "
                    f"(prefill.autoscaling) instead, {opt_in}")
    elif e.decode.replicas > MAX_DECODE_REPLICAS:
        yield Issue(join(path, "decode.replicas"), e.decode.replicas,
                    f"{limit}; add prefill replicas or raise pd_buffer_size instead, {opt_in}")


def autoscaling_issues(e: EndpointFields, path: str, *, decoder_refused: bool = False) -> Iterator[Issue]:
    """Errors of both roles' autoscaling on the endpoint alone. ``decoder_refused``: the decoder's count is refused
    already (:func:`decode_issues`), so its range is not reported again."""
    for role in DPD_ROLES:
        config, scaling = e.role(role), e.role(role).autoscaling
        if scaling is None:
            continue
        where = join(path, f"{role}.autoscaling")
        if not (role == "decode" and decoder_refused) and not scaling.min_replicas <= config.replicas <= \
                scaling.max_replicas:
            yield Issue(join(path, f"{role}.replicas"), config.replicas,
                        f"must be between autoscaling.min_replicas ({scaling.min_replicas}) and "
                        f"max_replicas ({scaling.max_replicas})")
        if scaling.prometheus is not None:
            yield from _query_issues(e, role, scaling.prometheus.query, join(where, "prometheus.query"))


def _broken(query: str) -> list[str]:
    """The problems that make ``query`` not PromQL (an unknown function may be a newer one: a warning only)."""
    return [p for p in promql_problems(query) if not p.startswith(UNKNOWN_FUNCTION)]


def _query_issues(e: EndpointFields, role: DpdRole, query: str, where: str) -> Iterator[Issue]:
    broken = _broken(query)
    if broken:  # KEDA's every poll fails, and the role stays where it is
        yield Issue(where, query, f"is not PromQL: {'; '.join(broken)}")
        return
    found = selectors(query)
    for selector in found:
        for metric in selector.metrics():
            if metric.key in ABSENT_ON_DPD:
                yield Issue(where, query,
                            f"reads {metric.name}, which only vLLM's own NixlConnector registers "
                            f"({VLLM_NIXL_CONNECTOR}); a HyperPod DPD endpoint moves KV through LMCache's PD backend "
                            f"and never has it: {KEDA_EMPTY}. Scale on vllm:num_requests_waiting instead")
                continue
            if NAMESPACE not in metric.labels:
                continue  # a node metric (DCGM): no endpoint labels to pin
            yield from _scope_issues(e, role, selector, metric, query, where)


def _scope_issues(e: EndpointFields, role: DpdRole, selector: Selector, metric: Metric, query: str,
                  where: str) -> Iterator[Issue]:
    """Positive matchers that no series of this endpoint can pass: the query is empty for it."""
    pods = {r: f"{r}-{e.resource_name}{_POD_TAIL}" for r in DPD_ROLES}
    for label, target, what in ((NAMESPACE, e.namespace, f"the endpoint's namespace '{e.namespace}'"),
                                (RESOURCE, e.resource_name, f"the endpoint's IEC '{e.resource_name}'")):
        for op, value in selector.matching(label):
            if not _accepts(op, value, target):
                yield Issue(where, query, f"selects {metric.name}{{{label}{op}\"{value}\"}}, which does not match "
                                          f"{what}: {KEDA_EMPTY}" + (
                                              f'; resource_name=~"{_generations(e)}" follows every generation'
                                              if label == RESOURCE else ""))
    for op, value in selector.matching(POD):
        if not any(_accepts(op, value, p) for p in pods.values()):
            yield Issue(where, query, f"selects {metric.name}{{{POD}{op}\"{value}\"}}, which matches no pod of the "
                                      f"endpoint (the operator names them '{pods[role].removesuffix(_POD_TAIL)}-...'): "
                                      f"{KEDA_EMPTY}")


def server_issues(e: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    """The KEDA role may query the Prometheus workspaces of the environment's account and Region only
    (hyperpod_dpd.infra.policies.keda_operator): a workspace of another Region answers access denied, and KEDA
    never gets a value."""
    for role in DPD_ROLES:
        scaling = e.role(role).autoscaling
        address = scaling.prometheus.server_address if scaling and scaling.prometheus else ""
        match = AMP_URL.fullmatch(address)
        if match and match["region"] != root.region:
            yield Issue(join(path, f"{role}.autoscaling.prometheus.server_address"), address,
                        f"is a workspace in {match['region']}; KEDA's role may query Amazon Managed Prometheus "
                        f"workspaces of the environment's Region {root.region} only")


def _generations(e: EndpointFields) -> str:
    """Every generation of the endpoint's IEC (``<name>-<generation>``, endpoint_fields.EndpointFields.resource_name)."""
    return f"{e.name}-[0-9a-f]{{{GENERATION_LENGTH}}}"


# -- warnings -------------------------------------------------------------------------------------------------------------

def autoscaling_warnings(e: EndpointFields, path: str = "") -> list[Issue]:
    """Doubtful triggers the endpoint alone shows: a metric or label the catalogue does not know, a query that also
    counts other endpoints or the other role, a generation pinned by name."""
    found: list[Issue] = []
    for role in DPD_ROLES:
        scaling = e.role(role).autoscaling
        if scaling is None or scaling.prometheus is None:
            continue
        where = join(path, f"{role}.autoscaling.prometheus.query")
        query = scaling.prometheus.query
        found.extend(_query_warnings(e, role, query, where))
    return found


def _query_warnings(e: EndpointFields, role: DpdRole, query: str, where: str) -> Iterator[Issue]:
    if _broken(query):
        return  # not PromQL: an error of autoscaling_issues
    problems = promql_problems(query)  # unknown functions alone
    if problems:
        yield Issue(where, query, f"has {'; '.join(problems)} (PromQL's functions and aggregations: prometheus.io/"
                                  "docs/prometheus/latest/querying/functions/); an unknown one fails every poll")
    found = selectors(query)
    if not found:
        yield Issue(where, query, f"reads no metric: the trigger cannot follow the load of the {role} pods")
        return
    other = next(r for r in DPD_ROLES if r != role)
    for selector in found:
        known = selector.metrics()
        if not known:
            name = selector.name or dict((label, v) for label, _, v in selector.matchers).get("__name__", "{...}")
            yield Issue(where, query,
                        f"reads {name}, which is not a metric hyperpod-dpd knows a DPD endpoint to export (docs/"
                        f"monitoring.md lists them); if the series is missing, {KEDA_EMPTY}: check it with "
                        "'hpdpd verify --prometheus'")
            continue
        for metric in known:
            if metric.key in ABSENT_ON_DPD or NAMESPACE not in metric.labels:
                continue
            allowed = {*metric.labels, "__name__", *(("le",) if metric.kind == "histogram" else ())}
            for label, op, value in selector.matchers:
                if label not in allowed and op in ("=", "=~") and not _accepts(op, value, ""):
                    yield Issue(where, query,
                                f"matches {metric.name} on label '{label}', which the catalogue does not list for it "
                                f"({', '.join(metric.labels)}); a label the series lack matches nothing and {KEDA_EMPTY}")
            yield from _reach_warnings(e, role, other, selector, metric, query, where)


def _reach_warnings(e: EndpointFields, role: DpdRole, other: DpdRole, selector: Selector, metric: Metric,
                    query: str, where: str) -> Iterator[Issue]:
    pods = selector.matching(POD)
    own, foreign = f"{role}-{e.resource_name}{_POD_TAIL}", f"{other}-{e.resource_name}{_POD_TAIL}"
    # Pinned to this endpoint: by its namespace (one DPD endpoint per namespace, endpoint_rollout), its IEC, or pod
    # names that another endpoint's pods cannot have.
    endpoint = any(_accepts(op, v, e.namespace) for op, v in selector.matching(NAMESPACE)) or \
        any(_accepts(op, v, e.resource_name) for op, v in selector.matching(RESOURCE)) or \
        (bool(pods) and not any(_accepts(op, v, f"{role}-{e.name}-other-{e.generation}{_POD_TAIL}") for op, v in pods))
    if not endpoint:
        yield Issue(where, query, f"reads {metric.name} without {NAMESPACE}=\"{e.namespace}\" or "
                                  f"{RESOURCE}=~\"{_generations(e)}\": it also counts every other endpoint's pods in "
                                  "the workspace")
    if not pods or any(_accepts(op, v, foreign) for op, v in pods) or not all(_accepts(op, v, own) for op, v in pods):
        yield Issue(where, query, f"reads {metric.name} without {POD}=~\"{role}-.*\": the {role} trigger also counts "
                                  f"(or counts only) the {other} pods")
    for op, value in selector.matching(RESOURCE):
        if op == "=" and value == e.resource_name:
            yield Issue(where, query, f"pins {RESOURCE}=\"{value}\", this generation's IEC: the next generation's "
                                      f"pods do not match it; use {RESOURCE}=~\"{_generations(e)}\"")


def environment_autoscaling_warnings(e: EndpointFields, root: Any, path: str) -> list[Issue]:
    """What the environment tells about a trigger's series: the add-on that carries the endpoint's metrics to
    Prometheus, the endpoint's own metrics setting, the observability workspace, and CloudWatch metrics the toolkit
    does not publish."""
    found: list[Issue] = []
    observability = root.operator.observability
    for role in DPD_ROLES:
        scaling = e.role(role).autoscaling
        if scaling is None:
            continue
        where = join(path, f"{role}.autoscaling")
        if scaling.cloudwatch is not None:
            cw = scaling.cloudwatch
            ours = cw.namespace == cloudwatch_namespace(root.hyperpod.cluster_name) and any(
                m.name == cw.metric_name for m in METRICS.values() if not m.source.prometheus)
            if not ours:
                found.append(Issue(join(where, "cloudwatch.metric_name"), cw.metric_name,
                                   f"in namespace '{cw.namespace}' is not a metric hyperpod-dpd publishes or knows "
                                   f"the endpoint to publish; {CLOUDWATCH_EMPTY}: check it with 'aws cloudwatch "
                                   "list-metrics' after the first requests"))
            continue
        assert scaling.prometheus is not None
        query, at = scaling.prometheus.query, join(where, "prometheus.query")
        if _broken(query):
            continue  # not PromQL: an error of autoscaling_issues
        reads = [m for s in selectors(query) for m in s.metrics() if NAMESPACE in m.labels]
        if reads and not observability.enabled:
            found.append(Issue(at, query, f"reads {reads[0].name}, which reaches Prometheus through the HyperPod "
                                          f"observability add-on, and operator.observability.enabled is false: "
                                          f"{KEDA_EMPTY}"))
        elif reads and not e.metrics.enabled:
            found.append(Issue(at, query, f"reads {reads[0].name}, and the endpoint's metrics.enabled is false: the "
                                          f"operator does not scrape its pods, and {KEDA_EMPTY}"))
        address = AMP_URL.fullmatch(scaling.prometheus.server_address or "")
        workspace = observability.prometheus_workspace_id if observability.enabled else None
        if address and workspace and address["id"] != workspace:
            found.append(Issue(join(where, "prometheus.server_address"), scaling.prometheus.server_address,
                               f"is workspace {address['id']}, and the observability add-on writes the endpoint's "
                               f"metrics to {workspace} (operator.observability.prometheus_workspace_arn): "
                               f"{KEDA_EMPTY}"))
    return found
