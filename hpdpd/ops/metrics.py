"""The Prometheus HTTP query API (``/api/v1/query``), and where the KV transfer's bytes and time come from.

``--prometheus URL`` (or ``HPDPD_PROMETHEUS_URL``) names the server: any Prometheus-compatible query endpoint, or an
Amazon Managed Service for Prometheus workspace (``https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>``),
whose requests are signed with SigV4 (service ``aps``; needs ``aps:QueryMetrics``) from the command's credentials.

Metric names, with sources:

- KV bytes and transfer time: vLLM's NIXL KV connector histograms ``vllm:nixl_bytes_transferred`` (bytes per
  transfer) and ``vllm:nixl_xfer_time_seconds`` (seconds per transfer) (vLLM metrics documentation, "NIXL KV Connector
  Metrics"; ``vllm/distributed/kv_transfer/kv_connector/v1/nixl`` ``NixlPromMetrics``). Their ``_sum`` series
  over the window give bytes and seconds. An OpenTelemetry pipeline may rewrite ``:`` to ``_``, so both spellings are
  matched. The operator's own "KV Transfer Time" dashboard panel (DPD documentation, "Observability") does not
  publish its metric name.
- Labels: ``namespace`` and ``resource_name`` (the IEC), as AWS's HyperPod inference dashboard selects inference
  metrics (``aws/sagemaker-hyperpod-cluster-setup``, ``.../dashboards/templates/inference.json``; copy in
  ``shared/reference/aws-cluster-setup/inference.json``).
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.monitoring.metrics import METRICS

PROMETHEUS_ENV = "HPDPD_PROMETHEUS_URL"
# The names come from the one metric catalogue the alerts and the dashboard use (``_sum`` of each histogram; ``[:_]``
# also matches the spelling an OpenTelemetry pipeline may write).
KV_BYTES_SERIES = METRICS["kv_bytes"].name.replace(":", "[:_]") + "_sum"
KV_SECONDS_SERIES = METRICS["kv_transfer_time"].name.replace(":", "[:_]") + "_sum"
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


def selector(namespace: str, iec: str, series: str) -> str:
    return f'{{__name__=~"{series}", namespace="{namespace}", resource_name="{iec}"}}'


def increase(namespace: str, iec: str, series: str, seconds: int) -> str:
    return f"sum(increase({selector(namespace, iec, series)}[{seconds}s]))"


@dataclass(frozen=True, kw_only=True)
class Prometheus:
    """A Prometheus query endpoint (``url`` without ``/api/v1/...``); ``clients`` signs AMP requests."""

    url: str
    clients: Any = None
    timeout_seconds: float = 30.0

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
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:  # noqa: S310
                document = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise _http_failure(exc, what, amp=bool(AMP_HOST.match(urllib.parse.urlparse(self.url).hostname or ''))) from None
        except TimeoutError as exc:
            raise MetricsError(f"{what}: timed out after {self.timeout_seconds:g} s ({exc})", "timeout") from None
        except urllib.error.URLError as exc:
            cause = "timeout" if isinstance(exc.reason, TimeoutError) else "unreachable"
            raise MetricsError(f"{what}: cannot reach {self.url} ({exc.reason})", cause) from None
        except ValueError:
            raise MetricsError(f"{what}: the answer is not JSON", "error") from None
        if document.get("status") != "success":
            raise MetricsError(f"{what}: {document.get('errorType', 'error')}: {document.get('error', '')}", "error")
        result = (document.get("data") or {}).get("result") or []
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
    """KV bytes moved and the time the transfers took over a window, and where the numbers came from."""

    bytes: float
    seconds: float
    source: str  # "prometheus" or "decoder log"
    transfers: int | None = None

    @property
    def gbps(self) -> float:
        """GB/s (10^9 bytes per second of transfer time)."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


def prometheus_throughput(prometheus: Prometheus, *, namespace: str, iec: str, seconds: int) -> Throughput | None:
    moved = prometheus.total(increase(namespace, iec, KV_BYTES_SERIES, seconds))
    took = prometheus.total(increase(namespace, iec, KV_SECONDS_SERIES, seconds))
    if not moved or not took:
        return None
    return Throughput(bytes=moved, seconds=took, source="prometheus")


# LMCache's retrieve line on the decoder (LMCache/LMCache lmcache/v1/cache_engine.py, ``retrieve``); "gb" is GiB
# (the code divides by 1024**3). The DPD documentation quotes it under "Verify KV transfer".
RETRIEVED = re.compile(r"Retrieved (\d+) out of (\d+) required tokens.*?size: ([\d.]+) gb, cost ([\d.]+) ms")


def log_throughput(decoder_log: str) -> Throughput | None:
    moved = took = 0.0
    transfers = 0
    for found in RETRIEVED.finditer(decoder_log):
        if int(found.group(1)) > 0:
            moved += float(found.group(3)) * 1024**3
            took += float(found.group(4)) / 1000
            transfers += 1
    if not transfers or took <= 0:
        return None
    return Throughput(bytes=moved, seconds=took, source="decoder log", transfers=transfers)
