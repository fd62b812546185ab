"""``hpdpd smoke`` as a command: JSON for pipelines against an HTTP router, and one-line refusals."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main


class Router(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(3):
            self.wfile.write(f'data: {{"choices":[{{"delta":{{"content":"w{i}"}}}}]}}\n\n'.encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def router_url() -> Iterator[str]:
    Router.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    """dev with its first declared endpoint only, so no --endpoint is needed."""
    return write_config(lambda d: d.__setitem__("endpoints", d["endpoints"][:1]))


def test_json_report_from_the_router(config_dir: Path, router_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the environment's endpoint is smoke-tested through a router URL with a small threshold
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", router_url, "--threshold", "128",
                 "--max-tokens", "3", "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN both prompts streamed and the report names the transport, threshold and timings
    assert code == 0 and data["ok"] is True
    assert (data["transport"], data["target"], data["threshold"]) == ("http", router_url, 128)
    assert [r["case"] for r in data["results"]] == ["short", "long"]
    assert all(r["ok"] and r["output_tokens"] == 3 and r["ttft_ms"] is not None for r in data["results"])
    assert data["results"][1]["prompt_tokens_estimate"] > 128
    assert len(Router.bodies[1]["messages"][0]["content"].split()) > 128


def test_the_table_report(config_dir: Path, router_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--url", router_url, "--threshold", "64"])
    out = capsys.readouterr().out
    assert code == 0 and "TTFT ms" in out and "prefill -> decode" in out and "decode only" in out


def test_an_endpoint_without_a_sagemaker_endpoint_needs_a_url(config_dir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "has no SageMaker endpoint; pass --url" in err


def test_an_unknown_endpoint_is_one_line(config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", "--env", "dev", "--config-dir", str(config_dir), "--endpoint", "nope", "--url", "http://x"])
    err = capsys.readouterr().err
    assert code == 2 and "no endpoint named 'nope'" in err
