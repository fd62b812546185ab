"""Line rates from the catalogue and the KV connector and dtype from the workers' own arguments."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.ops.fabric import (
    kv_bytes_per_token_per_rank,
    kv_cache_dtype,
    kv_connector,
    per_device_line_rate_gbps,
    per_rank_line_rate_gbps,
)

ENDPOINT = load_environment("dev").endpoints[0]


def worker(*args: str, command: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "nginx"}, {"name": "prefill-x", "command": list(command),
                                                         "args": list(args)}]}}


@pytest.mark.parametrize(("name", "rank", "device"), [
    ("ml.p5.48xlarge", 50.0, 12.5), ("ml.p5en.48xlarge", 50.0, 25.0), ("ml.p6-b200.48xlarge", 50.0, 50.0),
    ("ml.p6-b300.48xlarge", 100.0, 50.0), ("ml.m5.2xlarge", None, None)])
def test_line_rates_per_gpu_and_per_device(name: str, rank: float | None, device: float | None) -> None:
    assert per_rank_line_rate_gbps(instance(name)) == rank and per_device_line_rate_gbps(instance(name)) == device


def test_the_connector_is_read_from_every_form_of_the_flag() -> None:
    config = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    assert kv_connector([worker("--kv-transfer-config", config)]) == "LMCacheConnectorV1"
    assert kv_connector([worker(f"--kv-transfer-config={config}")]) == "LMCacheConnectorV1"
    shell = worker(command=("sh", "-c", f"vllm serve /m --kv-transfer-config '{config.replace('LMCacheConnectorV1', 'NixlConnector')}'"))
    assert kv_connector([shell]) == "NixlConnector"
    # unknown when no worker names one, or when they disagree
    assert kv_connector([worker("--model", "/m")]) is None
    assert kv_connector([worker("--kv-transfer-config", config), shell]) is None


def test_kv_bytes_per_token_follow_the_catalogue_and_the_kv_dtype() -> None:
    # Llama 3.3 70B, TP 8: 80 layers x 1 KV head per rank x 128 x 2 (K and V) x 2 bytes
    assert kv_bytes_per_token_per_rank(ENDPOINT, []) == 40960
    assert kv_bytes_per_token_per_rank(ENDPOINT, ["--kv-cache-dtype", "fp8"]) == 20480
    assert kv_bytes_per_token_per_rank(ENDPOINT, ["--kv-cache-dtype=fp8_inc"]) is None
    unknown = ENDPOINT.model_copy(update={"model": ENDPOINT.model.model_copy(update={"name": "my-own-model"})})
    assert kv_bytes_per_token_per_rank(unknown, []) is None


def test_the_kv_dtype_and_connector_are_the_last_ones_given_as_vllms_argparse_keeps() -> None:
    # GIVEN args naming --kv-cache-dtype twice, in each form vLLM accepts, and inside a shell command line
    assert kv_cache_dtype(["--kv-cache-dtype", "fp8", "--kv-cache-dtype=auto"]) == "auto"
    assert kv_cache_dtype(["--kv-cache-dtype=auto", "--max-num-seqs", "8", "--kv-cache-dtype", "fp8"]) == "fp8"
    assert kv_cache_dtype(["sh", "-c", "vllm serve /m --kv-cache-dtype fp8 --kv-cache-dtype='bfloat16' --port 8"]) \
        == "bfloat16"
    # AND a longer flag sharing the prefix is not read as it; no flag at all is vLLM's default
    assert kv_cache_dtype(["sh", "-c", "vllm serve /m --kv-cache-dtype-skip-layers 0"]) == "auto"
    assert kv_cache_dtype(["--model", "/m"]) == "auto"
    # THEN the KV bytes follow the value the server runs with
    assert kv_bytes_per_token_per_rank(ENDPOINT, ["--kv-cache-dtype", "fp8", "--kv-cache-dtype", "auto"]) == 40960
    # AND of two --kv-transfer-config, the last names the connector
    first, last = ('{"kv_connector":"LMCacheConnectorV1"}', '{"kv_connector":"NixlConnector"}')
    assert kv_connector([worker("--kv-transfer-config", first, "--kv-transfer-config", last)]) == "NixlConnector"
