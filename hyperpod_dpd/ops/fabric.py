"""Facts about an endpoint's KV fabric that come from the catalogue and the workers' own pod specs.

- Line rates from the instance catalogue (hyperpod_dpd/catalogue/instances.py: ``efa_bandwidth_gbps`` in Gbit/s,
  ``gpu_count``, ``efa_interfaces``): a TP rank (one GPU) owns ``bandwidth / 8 / gpu_count`` GB/s of the instance's
  EFA, one EFA device carries ``bandwidth / 8 / efa_interfaces`` GB/s (p5.48xlarge: 50 and 12.5 GB/s).
- The KV connector from the vLLM container's ``--kv-transfer-config`` JSON (vllm-project/vllm
  ``vllm/config/kv_transfer.py`` ``KVTransferConfig.kv_connector``, "the KV connector for vLLM to transmit KV caches
  between vLLM instances"): the operator renders ``{"kv_connector":"LMCacheConnectorV1",...}`` (an operator-rendered pod in
  LMCache/LMCache PR #2732's thread); ``NixlConnector`` is vLLM's own NIXL connector. Unknown when no such flag is
  found: then nothing that only one connector emits is trusted.
- KV bytes per token per rank from the model catalogue (hyperpod_dpd/catalogue/models.py) and vLLM's ``--kv-cache-dtype``
  (``auto``, its default, keeps the model's dtype; the catalogue's models are published in BF16). A value not in
  :data:`KV_DTYPES` leaves the bytes unknown, and nothing is derived from them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_dpd.config.vllm_args import flag_values, last_flag_value

LMCACHE_CONNECTOR = "LMCacheConnectorV1"
NIXL_CONNECTOR = "NixlConnector"
KV_TRANSFER_FLAG = "--kv-transfer-config"
KV_CONNECTOR_FIELD = re.compile(r'"kv_connector"\s*:\s*"([A-Za-z0-9_]+)"')
KV_CACHE_DTYPE_FLAG = "--kv-cache-dtype"
# vLLM's --kv-cache-dtype values mapped to the catalogue's precisions (hyperpod_dpd/catalogue/models.py PRECISION_BYTES);
# anything else (fp8_inc, a future dtype) leaves the bytes per token unknown.
KV_DTYPES = {"auto": None, "bfloat16": "bf16", "bf16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def per_rank_line_rate_gbps(instance: Any) -> float | None:
    """GB/s of the instance's EFA one GPU (one TP rank) owns: the per-GPU share of line rate."""
    if not getattr(instance, "efa_bandwidth_gbps", 0) or not getattr(instance, "gpu_count", 0):
        return None
    return float(instance.efa_bandwidth_gbps / 8 / instance.gpu_count)


def per_device_line_rate_gbps(instance: Any) -> float | None:
    """GB/s one EFA device of the instance carries."""
    if not getattr(instance, "efa_bandwidth_gbps", 0) or not getattr(instance, "efa_interfaces", 0):
        return None
    return float(instance.efa_bandwidth_gbps / 8 / instance.efa_interfaces)


def worker_container(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The vLLM container of an operator pod (``prefill-<iec>`` / ``decode-<iec>``), else its first container."""
    containers = [c for c in ((document.get("spec") or {}).get("containers") or []) if isinstance(c, dict)]
    chosen = next((c for c in containers if str(c.get("name", "")).startswith(("prefill-", "decode-"))), None)
    return chosen or (containers[0] if containers else {})


def worker_efa(document: Mapping[str, Any]) -> int:
    """EFA devices the vLLM container requests (the device plugin mounts a device into the container asking for it)."""
    from hyperpod_dpd.ops.workloads import parse_pod

    return parse_pod({"spec": {"containers": [dict(worker_container(document))]}}).efa


def worker_env(document: Mapping[str, Any]) -> dict[str, str]:
    """The literal environment of the vLLM container (a sidecar's variables are not the server's)."""
    return {str(v.get("name")): str(v.get("value")) for v in worker_container(document).get("env") or []
            if isinstance(v, dict) and "value" in v}


def command_line(document: Mapping[str, Any]) -> list[str]:
    container = worker_container(document)
    return [str(part) for part in [*(container.get("command") or []), *(container.get("args") or [])]]


def kv_connector(documents: Sequence[Mapping[str, Any]]) -> str | None:
    """The connector every given worker names in ``--kv-transfer-config``; None when unknown or when they differ."""
    found = {connector(command_line(d)) for d in documents}
    return found.pop() if len(found) == 1 else None


def connector(argv: Sequence[str]) -> str | None:
    """The ``kv_connector`` of the last ``--kv-transfer-config`` in ``argv`` that names one; None when none does."""
    for value in reversed(flag_values(argv, KV_TRANSFER_FLAG, rest_of_line=True)):
        try:
            parsed = json.loads(value.strip().strip("'"))
            if isinstance(parsed, dict) and isinstance(parsed.get("kv_connector"), str):
                return str(parsed["kv_connector"])
        except ValueError:
            pass
        match = KV_CONNECTOR_FIELD.search(value)
        if match:
            return match.group(1)
    return None


def kv_cache_dtype(argv: Sequence[str]) -> str | None:
    """The ``--kv-cache-dtype`` value vLLM runs with: the last one given, ``auto`` (its default) when absent."""
    return last_flag_value(argv, KV_CACHE_DTYPE_FLAG) or "auto"


def kv_bytes_per_token_per_rank(endpoint: Any, argv: Sequence[str]) -> int | None:
    """KV bytes one TP rank holds per token, for a model the catalogue knows; None when the model or dtype is not."""
    from hyperpod_dpd.catalogue.models import model_by_name

    spec = model_by_name(str(getattr(getattr(endpoint, "model", None), "name", "") or ""))
    dtype = kv_cache_dtype(argv)
    if spec is None or dtype not in KV_DTYPES:
        return None
    precision = KV_DTYPES[dtype]
    if precision is not None:
        spec = spec.with_precision(weights=spec.weight_dtype, kv=precision)
    return int(spec.kv_bytes_per_token_per_rank(int(getattr(endpoint, "gpus_per_pod", 0) or 1)))
