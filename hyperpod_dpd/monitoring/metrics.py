"""The one catalogue of the metrics the DPD alerts and the dashboard use: name, labels, unit, source, description.

Every alert expression, CloudWatch metric filter and dashboard query is built from a :class:`Metric` here, through
:func:`selector` (which refuses a label the metric does not carry), so a metric or label name cannot differ between
an alert and a panel. Where AWS's own HyperPod observability set-up uses a metric, the name and labels are AWS's:
``inference.json`` (the HyperPod inference dashboard) and ``alert-rules.yaml`` of aws/sagemaker-hyperpod-cluster-setup
@ b920fcf (eks/cloudformation/resources/grafana-lambda-function/lambda_function/: dashboards/templates/ and
rules/templates/). AWS documents the DPD panels only by title (DPD page, "Observability": E2E
TTFT, Prefill TTFT, Prefill/Decode Queue, Prefill Time, Decode Latency (TPOT), KV Transfer Time, DPD Routing Counts);
for those the catalogue names the engine metric that measures the same quantity, with its upstream source.

No CDK here: the CLI and the dashboard writer use it too.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Kind = Literal["histogram", "gauge", "counter", "log"]
Part = Literal["bucket", "count", "sum"]  # the three series a classic Prometheus histogram is exposed as

# Labels of the HyperPod inference metrics (AWS's inference dashboard filters on them; the HyperPod inference
# observability page lists cluster, deployment and pod dimensions for every inference metric).
CLUSTER_ID = "cluster_id"
NAMESPACE = "namespace"
RESOURCE = "resource_name"  # the InferenceEndpointConfig's name (hyperpod-dpd: <endpoint>-<generation>)
RESOURCE_TYPE = "resource_type"
POD = "pod_name"
NODE = "node_name"
STATUS = "status"
METHOD = "method"  # the invocation's HTTP method: AWS's inference dashboard selects method="POST" (probes are GETs)
# Labels of the DCGM exporter's GPU metrics, as AWS's alert rules use them.
GPU = "gpu"
HOSTNAME = "Hostname"

INFERENCE_LABELS = (CLUSTER_ID, NAMESPACE, RESOURCE, RESOURCE_TYPE, POD, NODE)
# Operator-created pod names (DPD page, "What the operator creates"): prefill-<iec>-..., decode-<iec>-...
ROLE_POD_PATTERN = {"prefill": "prefill-.*", "decode": "decode-.*"}

AWS_DASHBOARD = "AWS HyperPod inference dashboard (aws/sagemaker-hyperpod-cluster-setup @ b920fcf, inference.json)"
AWS_ALERT_RULES = "AWS HyperPod alert rules (aws/sagemaker-hyperpod-cluster-setup @ b920fcf, alert-rules.yaml)"
HMA_DOC = ("https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-health-monitoring-agent"
           ".html (events in /aws/sagemaker/Clusters/<name>/<id>, stream SagemakerHealthMonitoringAgent/<group>/<id>)")
DPD_TROUBLESHOOTING = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-ts-dpd.html"
# LMCache's exporter and the PD path (stack-truth: the operator wires DPD through vLLM's LMCacheConnectorV1 and
# LMCache's PD backend, not through vLLM's NixlConnector).
LMCACHE_OBSERVABILITY = "LMCache/LMCache lmcache/observability.py @ dd022cc"
# lmcache:num_stored_tokens is not registered at dd022cc; it is at 0353be8 ("Total number of tokens stored in lmcache
# including evicted ones"), counted in on_store_request, i.e. the tokens handed to store(), before any is sent.
LMCACHE_OBSERVABILITY_NEWER = "LMCache/LMCache lmcache/observability.py @ 0353be8"
LMCACHE_STORE = "LMCache/LMCache lmcache/v1/cache_engine.py @ 000620e"
LMCACHE_PD_BACKEND = "LMCache/LMCache lmcache/v1/storage_backend/pd_backend.py @ 07e0786"
LMCACHE_NIXL_CHANNEL = "LMCache/LMCache lmcache/v1/transfer_channel/nixl_channel.py @ 0449f44"
VLLM_NIXL_CONNECTOR = "vllm-project/vllm vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py"
VLLM_LOGGERS = "vllm-project/vllm vllm/v1/metrics/loggers.py"
# vllm:request_time_per_output_token_seconds (one observation per finished request: decode time / generated tokens)
# came with vllm-project/vllm #24015; loggers.py @ 005a810 registers only the per-token
# vllm:time_per_output_token_seconds, so an image with a vLLM from before it exports no series for the TPOT alert
# (DpdTpotMetricsMissing says so).
VLLM_PER_REQUEST_TPOT = "vllm-project/vllm #24015 ([V1][Metrics] Add per-request TPOT histogram)"
VLLM_LOGGERS_BEFORE_TPOT = "vllm-project/vllm vllm/v1/metrics/loggers.py @ 005a810"
# What vLLM writes to its container log on its own (the evidence that the container logs arrive; VllmLogLines):
# * the stats line, "Engine 000: Avg prompt throughput: ... tokens/s, Avg generation throughput: ...": written by
#   LoggingStatLogger.log at INFO while this or the previous interval had tokens, at DEBUG ("Avoid log noise on an
#   idle production system") when both were idle; VLLM_LOGGING_LEVEL defaults to INFO, so an idle engine writes none;
VLLM_STATS_LINE = "vllm-project/vllm vllm/v1/metrics/loggers.py @ 005a810 (LoggingStatLogger.log)"
#   called every VLLM_LOG_STATS_INTERVAL seconds (default 10) by the API server's lifespan task _force_log, through
#   AsyncLLM.do_log_stats, unless --disable-log-stats;
VLLM_STATS_INTERVAL = ("vllm-project/vllm vllm/entrypoints/serve/utils/server_utils.py @ 0753cee (lifespan, _force_log); "
                       "vllm/envs.py (VLLM_LOG_STATS_INTERVAL, default 10.; VLLM_LOGGING_LEVEL, default INFO @ 001f69f)")
# * one access line per HTTP request, metrics scrapes included: uvicorn's access logger writes
#   '<client> - "GET /metrics HTTP/1.1" 200' to stdout, on by default; vLLM passes
#   access_log=not args.disable_uvicorn_access_log. The IEC's model metrics are scraped on the vLLM port at the
#   CRD's default path /metrics every metricsScrapeIntervalSeconds (default 15, at most 300; k8s/endpoint.py sets
#   the port, k8s/crds/ holds the schema), so a scraped vLLM writes one even when idle.
UVICORN_ACCESS_LINE = ("encode/uvicorn uvicorn/config.py @ 00cb13d (LOGGING_CONFIG, formatter 'access', access_log=True); "
                       "vllm-project/vllm vllm/entrypoints/openai/api_server.py @ 0001948 (build_and_serve, access_log)")
VLLM_STATS_TERM = "Avg prompt throughput"
SCRAPE_ACCESS_TERM = "GET /metrics"
# NVIDIA's stock counter list of the DCGM exporter enables DCGM_FI_DEV_XID_ERRORS but leaves the four ECC fields
# (DCGM_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL) commented out: an exporter on its defaults has no ECC series at all.
DCGM_DEFAULT_COUNTERS = "NVIDIA/dcgm-exporter etc/default-counters.csv @ 00d6d34"
# The DPD router's disaggregated path: a request to a prefiller with max_tokens=1, awaited to the end, then the
# original request to the decoder (route_disaggregated_prefill_request; stack-truth cites lines 938-1000 @ a6c01db).
ROUTER_TWO_HOPS = "vllm-project/production-stack src/vllm_router/services/request_service/request.py @ 00d34b7"

# Histogram buckets (upper bounds, in the metric's unit) as the exporters register them. histogram_quantile never
# reports above a histogram's highest finite bucket, so a threshold above it could never fire.
LMCACHE_TIME_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
VLLM_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                     40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                     80.0)
VLLM_REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                                240.0, 480.0, 960.0, 1920.0, 7680.0)


class Source(enum.Enum):
    """Where a metric comes from, and so what must be switched on for it to exist."""

    HYPERPOD_INVOCATION = "HyperPod invocation metrics (observability add-on, endpoint metrics.enabled) in Prometheus"
    VLLM = "vLLM engine metrics of the prefill and decode containers (observability add-on) in Prometheus"
    LMCACHE = "LMCache metrics of the prefill and decode containers (observability add-on) in Prometheus"
    DCGM = "NVIDIA DCGM exporter GPU metrics (observability add-on, accelerated compute metrics) in Prometheus"
    CONTAINER_LOG = "CloudWatch Logs metric filter on the decoder's container logs"
    HEALTH_AGENT_LOG = "CloudWatch Logs metric filter on the HyperPod health-monitoring agent's events"

    @property
    def prometheus(self) -> bool:
        return self not in (Source.CONTAINER_LOG, Source.HEALTH_AGENT_LOG)


@dataclass(frozen=True)
class Metric:
    """One metric as its exporter names it. ``unit`` is a Grafana unit id (``ms``, ``s``, ``short``, ``reqps``).

    Log metrics (``kind="log"``) are CloudWatch metrics that a metric filter with ``log_pattern`` publishes, one
    per matching line, under the environment's namespace (:func:`cloudwatch_namespace`). ``buckets``: a histogram's
    finite upper bounds as its exporter registers them, ``()`` where the exporter does not publish them.
    """

    key: str
    name: str
    kind: Kind
    unit: str
    source: Source
    description: str
    reference: str
    labels: tuple[str, ...] = ()
    log_pattern: str | None = None
    buckets: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.buckets and (self.kind != "histogram" or list(self.buckets) != sorted(set(self.buckets))):
            raise ValueError(f"{self.name}: buckets belong to a histogram and must be strictly increasing")

    @property
    def series(self) -> str:
        """The Prometheus series a query reads: ``<name>_bucket`` for a histogram."""
        return self.part_series("bucket")

    def part_series(self, part: Part) -> str:
        """``<name>_bucket``, ``_count`` or ``_sum`` of a histogram; the name itself for any other kind."""
        return f"{self.name}_{part}" if self.kind == "histogram" else self.name

    @property
    def name_pattern(self) -> str | None:
        """For a name with ``:`` (vLLM, LMCache), a ``__name__`` regex that also matches the ``_`` spelling an
        OpenTelemetry pipeline may write instead; None for names without ``:``."""
        return self.part_pattern("bucket")

    def part_pattern(self, part: Part) -> str | None:
        series = self.part_series(part)
        return series.replace(":", "[:_]") if ":" in series else None

    @property
    def highest_bucket(self) -> float | None:
        """The highest finite bucket, in the metric's unit (None when unpublished)."""
        return self.buckets[-1] if self.buckets else None

    @property
    def to_ms(self) -> str:
        """The factor that turns the metric's unit into milliseconds in PromQL (``""`` when it is in ms already)."""
        return " * 1000" if self.unit == "s" else ""


def _catalogue(*metrics: Metric) -> Mapping[str, Metric]:
    keys = [m.key for m in metrics]
    if len(set(keys)) != len(keys) or len({m.name for m in metrics}) != len(metrics):
        raise ValueError("metric keys and names must be unique")
    return MappingProxyType({m.key: m for m in metrics})


METRICS: Mapping[str, Metric] = _catalogue(
    Metric("ttfb", "model_ttfb_milliseconds", "histogram", "ms", Source.HYPERPOD_INVOCATION,
           "Time to first byte of one model pod's responses, measured by the pod's own proxy: one hop, not the "
           "client's TTFT. A disaggregated request is two hops (the router awaits the prefiller's whole "
           "max_tokens=1 response, then sends the request to the decoder), so the client's TTFT is about the sum "
           "of a prefill-pod and a decode-pod TTFB, plus the router's own time",
           f"{AWS_DASHBOARD}, panel 'Time To First Byte (TTFB)' (labels, method=\"POST\", status=~\"2.*\"); "
           f"{ROUTER_TWO_HOPS}", (*INFERENCE_LABELS, STATUS, METHOD)),
    # AWS's success-rate panel computes 1 - errors / invocations over the same selection, so an error is one of the
    # pod's invocations; it also selects uri="/invocations" (the SageMaker path), which the DPD router's OpenAI paths
    # are not, so no selection here names a uri (as for the TTFB above).
    Metric("invocations", "model_invocations_total", "counter", "reqps", Source.HYPERPOD_INVOCATION,
           "Requests one model pod's proxy received, failed ones included: a disaggregated request is two, one on a "
           "prefiller and one on the decoder",
           f"{AWS_DASHBOARD}, panel 'Percentage of Successful Requests' (1 - model_errors_total / "
           f"model_invocations_total, both method=\"POST\")", (*INFERENCE_LABELS, METHOD)),
    Metric("errors", "model_errors_total", "counter", "reqps", Source.HYPERPOD_INVOCATION,
           "Invocations of one model pod that failed, by error code (status). A code has no series before its first "
           "error, so queries count a missing one as 0 (as AWS's panel does with or vector(0))",
           f"{AWS_DASHBOARD}, panels 'Percentage of Successful Requests' and 'Count of Failed Requests per Error "
           f"Code' (legend by status; method=\"POST\")", (*INFERENCE_LABELS, STATUS, METHOD)),
    Metric("ttft", "vllm:time_to_first_token_seconds", "histogram", "s", Source.VLLM,
           "Time to first token inside one vLLM engine; on the prefillers this is the DPD page's Prefill TTFT",
           f"{VLLM_LOGGERS} (histogram_time_to_first_token)", INFERENCE_LABELS, buckets=VLLM_TTFT_BUCKETS),
    Metric("tpot", "vllm:request_time_per_output_token_seconds", "histogram", "s", Source.VLLM,
           "Time per output token of each request; on the decoder this is the DPD page's Decode Latency (TPOT)",
           f"{VLLM_LOGGERS} (histogram_request_time_per_output_token); {VLLM_PER_REQUEST_TPOT} (absent from "
           f"{VLLM_LOGGERS_BEFORE_TPOT})", INFERENCE_LABELS, buckets=VLLM_TPOT_BUCKETS),
    Metric("prefill_time", "vllm:request_prefill_time_seconds", "histogram", "s", Source.VLLM,
           "Time a request spends in the prefill phase of an engine (the DPD page's Prefill Time on the prefillers)",
           f"{VLLM_LOGGERS} (histogram_prefill_time_request, request_latency_buckets)", INFERENCE_LABELS,
           buckets=VLLM_REQUEST_LATENCY_BUCKETS),
    Metric("waiting", "vllm:num_requests_waiting", "gauge", "short", Source.VLLM,
           "Requests queued in an engine, not yet scheduled (the DPD page's Prefill Queue and Decode Queue)",
           VLLM_LOGGERS, INFERENCE_LABELS),
    Metric("finished", "vllm:request_success_total", "counter", "reqps", Source.VLLM,
           "Requests an engine finished; a disaggregated request finishes on a prefiller and on the decoder, a "
           "request under the routing threshold on the decoder only (the DPD page's DPD Routing Counts)",
           VLLM_LOGGERS, INFERENCE_LABELS),
    Metric("kv_store", "lmcache:time_to_store", "histogram", "s", Source.LMCACHE,
           "Prefill-side KV transfer time: the prefiller's LMCache storing a request's KV cache. With LMCache's PD "
           "backend the prefiller never keeps the cache; its put asks the decoder for room in its PD buffer (a ZMQ "
           "round trip that waits while that buffer is full) and issues a NIXL WRITE that waits for completion, so "
           "this time contains the transfer over the fabric (and the GPU-side copy before it). A layer-wise store "
           "(store_layer) spans the whole forward pass instead, prefill compute included",
           f"{LMCACHE_OBSERVABILITY} (histogram lmcache:time_to_store, seconds, buckets 1 ms to 10 s); "
           f"{LMCACHE_STORE} (store: stats_monitor.on_store_finished around storage_manager.batched_put); "
           f"{LMCACHE_PD_BACKEND} (batched_submit_put_task: _remote_allocate, then nixl_channel.batched_write); "
           f"{LMCACHE_NIXL_CHANNEL} (batched_write polls check_xfer_state until DONE)", INFERENCE_LABELS,
           buckets=LMCACHE_TIME_BUCKETS),
    Metric("kv_stored_tokens", "lmcache:num_stored_tokens_total", "counter", "short", Source.LMCACHE,
           "Tokens handed to the prefiller's LMCache store, counted when the store starts (so also tokens that "
           "were never sent); registered as lmcache:num_stored_tokens and exposed with _total (prometheus_client "
           "appends it to a counter's name); not registered by every LMCache release. Not a byte count: no alert derives a throughput "
           "from it",
           f"{LMCACHE_OBSERVABILITY_NEWER} (counter lmcache:num_stored_tokens, incremented in on_store_request)",
           INFERENCE_LABELS),
    Metric("kv_retrieve", "lmcache:time_to_retrieve", "histogram", "s", Source.LMCACHE,
           "Decoder KV load time: the decoder's LMCache copying a KV cache the prefiller already wrote into its "
           "local PD buffer into vLLM's paged KV (the decoder's 'Retrieved N out of M required tokens ... cost' "
           "line). A local copy, not the fabric: never read it as KV transfer throughput",
           f"{LMCACHE_OBSERVABILITY} (histogram lmcache:time_to_retrieve, seconds); {LMCACHE_PD_BACKEND}",
           INFERENCE_LABELS, buckets=LMCACHE_TIME_BUCKETS),
    Metric("kv_bytes", "vllm:nixl_bytes_transferred", "histogram", "bytes", Source.VLLM,
           "Bytes of KV cache moved per NIXL transfer by vLLM's own NixlConnector. Registered only by that "
           "connector: a HyperPod DPD endpoint (LMCacheConnectorV1 with LMCache's PD backend) never has it",
           f"{VLLM_NIXL_CONNECTOR} (NixlPromMetrics, registered by NixlConnector.build_prom_metrics)",
           INFERENCE_LABELS),
    Metric("kv_transfer_time", "vllm:nixl_xfer_time_seconds", "histogram", "s", Source.VLLM,
           "Seconds per NIXL KV transfer of vLLM's own NixlConnector (only that connector registers it)",
           f"{VLLM_NIXL_CONNECTOR} (NixlPromMetrics, registered by NixlConnector.build_prom_metrics)",
           INFERENCE_LABELS),
    Metric("xid", "DCGM_FI_DEV_XID_ERRORS", "gauge", "short", Source.DCGM,
           "Last XID error code a GPU reported (0: none)",
           f"{DCGM_DEFAULT_COUNTERS} (enabled there); {AWS_ALERT_RULES}, alert GPUXidError", (GPU, HOSTNAME)),
    Metric("ecc_dbe_volatile", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "short", Source.DCGM,
           "Double-bit ECC errors of a GPU since the last driver load",
           f"{DCGM_DEFAULT_COUNTERS} (commented out there); {AWS_ALERT_RULES}, alert GPUMemoryErrorDetected",
           (GPU, HOSTNAME)),
    Metric("ecc_dbe_aggregate", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "short", Source.DCGM,
           "Double-bit ECC errors of a GPU over its lifetime",
           f"{DCGM_DEFAULT_COUNTERS} (commented out there); {AWS_ALERT_RULES}, alert GPUMemoryErrorDetected",
           (GPU, HOSTNAME)),
    Metric("buffer_overflow", "DecoderBufferOverflow", "log", "short", Source.CONTAINER_LOG,
           "Decoder log lines 'Failed to allocate memory object, retrying...': the PD buffer (PD_BUFFER_SIZE) is "
           "full and KV transfers wait; raise the buffer, scale decode or reduce concurrency",
           f"{DPD_TROUBLESHOOTING} (KV cache transfer issues)",
           log_pattern='"Failed to allocate memory object"'),
    Metric("vllm_log_lines", "VllmLogLines", "log", "short", Source.CONTAINER_LOG,
           f"vLLM lines in the container log group: the stats line ('{VLLM_STATS_TERM}', every 10 s per engine "
           f"while tokens flow) and the access line of each metrics scrape ('{SCRAPE_ACCESS_TERM}', every scrape "
           "interval, idle or not, while uvicorn's access log is on); none for a long time means the container logs "
           "do not arrive and DecoderBufferOverflow cannot fire",
           f"{VLLM_STATS_LINE}; {VLLM_STATS_INTERVAL}; {UVICORN_ACCESS_LINE}",
           log_pattern=f'?"{VLLM_STATS_TERM}" ?"{SCRAPE_ACCESS_TERM}"'),
    Metric("node_health_events", "NodeHealthEvents", "log", "short", Source.HEALTH_AGENT_LOG,
           "Health events of the HyperPod health-monitoring agent (GPU XID and ECC errors, NVLink, EFA): each "
           "marks a node for reboot or replacement", HMA_DOC,
           log_pattern='{ $.HealthMonitoringAgentDetectionEvent = "HealthEvent" }'),
)


def cloudwatch_namespace(cluster_name: str) -> str:
    """The CloudWatch namespace of one environment's log metrics (its HyperPod cluster's name is unique in the
    account and Region)."""
    return f"HyperPodDPD/{cluster_name}"


@dataclass(frozen=True)
class Matcher:
    label: str
    value: str
    op: Literal["=", "!=", "=~", "!~"] = "="

    def render(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.label}{self.op}"{escaped}"'


def selector(metric: Metric, *matchers: Matcher, part: Part = "bucket") -> str:
    """``series{matchers}`` for a Prometheus metric (for a histogram, its ``part`` series); a label the catalogue
    does not list for it is an error."""
    if not metric.source.prometheus:
        raise ValueError(f"{metric.name} is a CloudWatch metric, not a Prometheus one")
    unknown = [m.label for m in matchers if m.label not in metric.labels]
    if unknown:
        raise ValueError(f"{metric.name} has no label {', '.join(unknown)} (labels: {', '.join(metric.labels)})")
    rendered = [m.render() for m in matchers]
    pattern, series = metric.part_pattern(part), metric.part_series(part)
    if pattern is not None:
        return "{" + ",".join([Matcher("__name__", pattern, "=~").render(), *rendered]) + "}"
    return f"{series}{{{','.join(rendered)}}}" if rendered else series


def role(name: Literal["prefill", "decode"]) -> Matcher:
    """The pods of one DPD role, by the operator's pod names."""
    return Matcher(POD, ROLE_POD_PATTERN[name], "=~")


def quantile_ms(metric: Metric, quantile: float, *matchers: Matcher, window: str = "5m") -> str:
    """The ``quantile`` of a histogram over ``window``, across the matched series, in milliseconds."""
    if metric.kind != "histogram":
        raise ValueError(f"{metric.name} is not a histogram")
    inner = f"sum by (le) (rate({selector(metric, *matchers)}[{window}]))"
    return f"histogram_quantile({quantile:g}, {inner}){metric.to_ms}"


def rate_sum(metric: Metric, *matchers: Matcher, window: str = "5m") -> str:
    """Events per second over ``window``, summed over the matched series: a counter, or a histogram's
    observations (its ``_count``)."""
    if metric.kind not in ("counter", "histogram"):
        raise ValueError(f"{metric.name} is not a counter or a histogram")
    return f"sum(rate({selector(metric, *matchers, part='count')}[{window}]))"


def fallback_ratio(*matchers: Matcher, window: str = "15m") -> str:
    """Share of requests that skip the prefillers (under the routing threshold): 1 - prefill rate / decode rate."""
    finished = METRICS["finished"]
    prefill = rate_sum(finished, *matchers, role("prefill"), window=window)
    decode = rate_sum(finished, *matchers, role("decode"), window=window)
    return f"clamp_min(1 - {prefill} / {decode}, 0)"
