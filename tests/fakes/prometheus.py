"""A fake Prometheus HTTP query API on 127.0.0.1 (port 0): ``/api/v1/query`` and ``/api/v1/query_range``.

``series`` maps a metric name (as it appears in the query's ``__name__`` regex or selector) to the value an
``increase(...)`` over it returns; a query naming none of them returns an empty vector, as Prometheus does for a
series it never scraped. ``grouped`` maps a text a query contains (``count by (cluster_id)``) to the label sets of
the vector it answers, one sample of value 1 each, as an aggregation ``by`` a label answers one per value.
``status`` makes every query fail with that HTTP status; queries are recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class FakePrometheus:
    series: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    grouped: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    status: int = 0
    queries: list[str] = field(default_factory=list)
    url: str = ""

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        expr = query.get("query", "")
        self.queries.append(expr)
        if self.status:
            return self.status, {"status": "error", "errorType": "unavailable", "error": f"injected {self.status}"}
        if path not in ("/api/v1/query", "/api/v1/query_range"):
            return 404, {"status": "error", "errorType": "not_found", "error": path}
        result = [{"metric": dict(self.labels), "value": [1767225600, str(value)]}
                  for name, value in self.series.items() if name in expr.replace("[:_]", ":")]
        for text, label_sets in self.grouped.items():
            if text in expr:
                result = [{"metric": dict(labels), "value": [1767225600, "1"]} for labels in label_sets]
        kind = "matrix" if path.endswith("query_range") else "vector"
        if kind == "matrix":
            result = [{"metric": r["metric"], "values": [r["value"]]} for r in result]
        return 200, {"status": "success", "data": {"resultType": kind, "result": result}}


class _Handler(BaseHTTPRequestHandler):
    fake: FakePrometheus

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        code, payload = self.fake.answer(url.path, {k: v[-1] for k, v in parse_qs(url.query).items()})
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve(fake: FakePrometheus | None = None) -> Iterator[FakePrometheus]:
    fake = fake or FakePrometheus()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"fake": fake}))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
