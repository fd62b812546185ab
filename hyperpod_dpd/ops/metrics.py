"""The Prometheus HTTP query API (``/api/v1/query``), and the KV transfer measured from Prometheus.

``--prometheus URL`` (or ``HPDPD_PROMETHEUS_URL``) names the server: any Prometheus-compatible query endpoint, or an
Amazon Managed Service for Prometheus workspace (``https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>``),
whose requests are signed with SigV4 (service ``aps``; needs ``aps:QueryMetrics``) from the command's credentials.

Which series measure the fabric depends on the KV connector (stack-truth: the operator wires DPD through vLLM's
``LMCacheConnectorV1`` and LMCache's PD backend):

- LMCache PD backend: the *prefiller* pushes the KV with a NIXL WRITE inside its store, so the prefill pods'
  ``lmcache:time_to_store`` (histogram, seconds; catalogue key ``kv_store``) contains the transfer, and
  ``lmcache:num_stored_tokens_total`` (counter, catalogue key ``kv_stored_tokens``; prometheus_client exposes counters as
  ``<name>_total``) counts the tokens. LMCache exports no bytes, so bytes are tokens x the model's KV bytes per token
  per TP rank (hyperpod_dpd/catalogue/models.py), only for a model the catalogue knows and a KV dtype the args name or
  leave at the model's. Both as LMCache 0.4.3 (the DPD images' version, PyPI wheel sha256
  f7bc3c2d...7a002b) registers them in ``lmcache/observability.py`` (``lmcache:num_stored_tokens`` line 956,
  ``lmcache:time_to_store`` line 1148), labelled ``model_name``, ``worker_id`` (the TP rank) and ``role``
  (``_metadata_to_labels``), so the ratio is a per-rank figure; and a lower bound: the store time also holds the
  GPU-side copy and the remote allocation.
- vLLM's own ``NixlConnector``: ``vllm:nixl_bytes_transferred`` / ``vllm:nixl_xfer_time_seconds`` (catalogue keys
  ``kv_bytes`` / ``kv_transfer_time``), registered only by that connector (``NixlConnector.build_prom_metrics``), so
  they are read only for an endpoint whose workers name it in ``--kv-transfer-config``.

An OpenTelemetry pipeline may rewrite ``:`` to ``_``, so both spellings are matched. Labels: ``namespace``,
``resource_name`` (the IEC) and ``pod_name`` (the role's pods), as AWS's HyperPod inference dashboard selects inference
metrics (``aws/sagemaker-hyperpod-cluster-setup`` @ b920fcf ``eks/cloudformation/resources/grafana-lambda-function/
lambda_function/dashboards/templates/inference.json``) and as the metric catalogue lists them.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.catalogue.pipeline_contract import PROMETHEUS_ENV  # noqa: F401 - the pipeline sets it
from hyperpod_dpd.monitoring.metrics import METRICS

AMP_HOST = re.compile(r"^aps-workspaces\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
AMP_PERMISSION = "aps:QueryMetrics"
WINDOW = re.compile(r"^(\d+)([smh])$")


class MetricsError(Exception):
    """A query that did not succeed, with a cause as :mod:`hyperpod_dpd.ops.lookup` names them."""

    def __init__(self, reason: str, cause: str) -> None:
        super().__init__(reason)
        self.reason, self.cause = reason, cause


def window_seconds(text: str) -> int:
    """``5m`` -> 300 (seconds, minutes or hours); ValueError otherwise."""
    found = WINDOW.fullmatch(text.strip())
    if not found or int(found.group(1)) == 0:
        raise ValueError(f"{text!r} is not a window such as 90s, 5m or 1h")
    return int(found.group(1)) * {"s": 1, "m": 60, "h": 3600}[found.group(2)]


@dataclass(frozen=True, kw_only=True)
class Prometheus:
    """A Prometheus query endpoint (``url`` without ``/api/v1/...``); ``clients`` signs AMP requests."""

    url: str
    clients: Any = None
    timeout_seconds: float = 30.0
    deadline: Any = None  # the command's (hyperpod_dpd.ops.deadline.Deadline): each query gets what is left of it

    def _request(self, path: str, params: dict[str, str]) -> urllib.request.Request:
        target = f"{self.url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
        host = urllib.parse.urlparse(target).hostname or ""
        amp = AMP_HOST.match(host)
        if not amp or self.clients is None:
            return urllib.request.Request(target, headers={"Accept": "application/json"})  # noqa: S310
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        signed = AWSRequest(method="GET", url=target, headers={"Accept": "application/json"})
        SigV4Auth(self.clients.session().get_credentials(), "aps", amp.group(1)).add_auth(signed)
        return urllib.request.Request(target, headers=dict(signed.headers.items()))  # noqa: S310

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query's vector: (labels, value) per series."""
        request = self._request("/api/v1/query", {"query": expr})
        what = f"Prometheus query {expr}"
        timeout = self.deadline.bound(self.timeout_seconds, what=what) if self.deadline else self.timeout_seconds
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                document = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise _http_failure(exc, what, amp=bool(AMP_HOST.match(urllib.parse.urlparse(self.url).hostname or ''))) from None
        except TimeoutError as exc:
            raise MetricsError(f"{what}: timed out after {timeout:g} s ({exc})", "timeout") from None
        except urllib.error.URLError as exc:
            cause = "timeout" if isinstance(exc.reason, TimeoutError) else "unreachable"
            raise MetricsError(f"{what}: cannot reach {self.url} ({exc.reason})", cause) from None
        except (ValueError, RecursionError):  # UnicodeDecodeError included
            raise MetricsError(f"{what}: the answer of {self.url} is not JSON", "error") from None
        except (OSError, http.client.HTTPException) as exc:  # a connection reset or cut while the body is read
            raise MetricsError(f"{what}: the connection to {self.url} broke ({exc})", "unreachable") from None
        if not isinstance(document, dict):
            raise MetricsError(f"{what}: the answer of {self.url} is not a Prometheus API answer", "error")
        if document.get("status") != "success":
            raise MetricsError(f"{what}: {document.get('errorType', 'error')}: {document.get('error', '')}", "error")
        data = document.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list) or not all(isinstance(s, dict) for s in result):
            # the query API's success answer always has data.result (Prometheus docs, "Expression query result
            # formats"); without it there is no measurement to take as "no series"
            raise MetricsError(f"{what}: the answer of {self.url} has no data.result list", "error")
        out = []
        for series in result:
            try:
                value = float(series["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            out.append((dict(series.get("metric") or {}), value))
        return out

    def total(self, expr: str) -> float | None:
        """The sum of a query's values; None when it returned no series (nothing scraped)."""
        values = [v for _, v in self.query(expr) if not math.isnan(v)]
        return sum(values) if values else None


def _http_failure(exc: urllib.error.HTTPError, what: str, *, amp: bool) -> MetricsError:
    detail = " ".join(exc.read(300).decode("utf-8", "replace").split())
    reason = f"{what}: HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else "")
    if exc.code == 403:
        return MetricsError(reason + (f"; needs {AMP_PERMISSION}" if amp else ""), "access_denied")
    if exc.code == 429:
        return MetricsError(reason, "throttled")
    if exc.code in (408, 504):
        return MetricsError(reason, "timeout")
    return MetricsError(reason, "server_error" if exc.code >= 500 else "error")


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """KV bytes one TP rank moved and the time its transfers took over a window (Σ over ranks of each), and where
    the numbers came from. ``lower_bound``: the time includes more than the transfer, so the fabric is at least
    this fast. ``estimate``: the bytes are derived, not counted, and may exceed what crossed the fabric, so the
    figure is no bound at all: it can show a slow fabric, never prove a fast one (verify does not pass on it)."""

    bytes: float
    seconds: float
    source: str
    transfers: int | None = None
    lower_bound: bool = False
    estimate: bool = False
    overstated_lines: int = 0  # store lines faster than the fabric can carry (see kv_logs.StoreTotals)

    @property
    def gbps(self) -> float:
        """GB/s (10^9 bytes per second of transfer time), per rank."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


def _series(key: str, suffix: str) -> str:
    """The ``__name__`` regex of a catalogue metric's ``suffix`` series, in either spelling of ``:``."""
    return re.escape(METRICS[key].name).replace(":", "[:_]") + suffix


def _selector(key: str, series: str, *, namespace: str, iec: str, pods: str | None = None) -> str:
    from hyperpod_dpd.monitoring.metrics import NAMESPACE, POD, RESOURCE, Matcher

    matchers = [Matcher("__name__", series, "=~"), Matcher(NAMESPACE, namespace), Matcher(RESOURCE, iec)]
    if pods is not None:
        matchers.append(Matcher(POD, pods, "=~"))
    unknown = [m.label for m in matchers[1:] if m.label not in METRICS[key].labels]
    if unknown:  # the catalogue is the one list of labels: refuse a label it does not give the metric
        raise ValueError(f"{METRICS[key].name} has no label {', '.join(unknown)}")
    return "{" + ",".join(m.render() for m in matchers) + "}"


def increase(key: str, suffix: str, *, namespace: str, iec: str, seconds: int, pods: str | None = None) -> str:
    return f"sum(increase({_selector(key, _series(key, suffix), namespace=namespace, iec=iec, pods=pods)}[{seconds}s]))"


def nixl_connector_throughput(prometheus: Prometheus, *, namespace: str, iec: str,
                              seconds: int) -> Throughput | None:
    """vLLM NixlConnector's histograms (only that connector registers them)."""
    moved = prometheus.total(increase("kv_bytes", "_sum", namespace=namespace, iec=iec, seconds=seconds))
    took = prometheus.total(increase("kv_transfer_time", "_sum", namespace=namespace, iec=iec, seconds=seconds))
    if not moved or not took:
        return None
    return Throughput(bytes=moved, seconds=took, source="prometheus: vLLM NixlConnector transfers")


def prefill_store_throughput(prometheus: Prometheus, *, namespace: str, iec: str, seconds: int,
                             bytes_per_token_per_rank: int) -> Throughput | None:
    """The prefill pods' LMCache store (which contains the NIXL write): stored tokens x KV bytes per token per rank,
    over the store time. An estimate, not a bound: the store time also holds the GPU-side copy and the remote
    allocation (the figure reads low), but the counter counts the tokens handed to a store when it starts, chunks
    the decoder already held and stores cut short included (LMCache ``on_store_request``; the metric catalogue's
    ``kv_stored_tokens``), so the bytes can read high."""
    from hyperpod_dpd.monitoring.metrics import ROLE_POD_PATTERN

    pods = ROLE_POD_PATTERN["prefill"]
    took = prometheus.total(increase("kv_store", "_sum", namespace=namespace, iec=iec, seconds=seconds, pods=pods))
    tokens = prometheus.total(increase("kv_stored_tokens", "", namespace=namespace, iec=iec,
                                       seconds=seconds, pods=pods))
    if not took or not tokens:
        return None
    return Throughput(bytes=tokens * bytes_per_token_per_rank, seconds=took, estimate=True,
                      source="prometheus: LMCache store on the prefill pods (bytes = stored tokens x the model's KV "
                             "bytes per token per rank)")
