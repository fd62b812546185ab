"""Alerting sections: an endpoint's service-level objective (``endpoints[].slo``) and where an environment's alerts go
(``alerts:``). The alert rules and the dashboard are built from them by :mod:`hyperpod_dpd.monitoring`; see
docs/monitoring.md for what each threshold drives.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from hyperpod_dpd.config.base import Model, pattern

# Defaults: a P99 end-to-end TTFT of 2 s and a P99 TPOT of 100 ms, a 70B chat workload's usual targets; set your own.
DEFAULT_TTFT_MS = 2000
DEFAULT_TPOT_MS = 100
# Operational thresholds (docs/monitoring.md says why each default).
DEFAULT_PREFILL_QUEUE_DEPTH = 8  # waiting requests per prefiller: half the prefiller's documented --max-num-seqs (16)
DEFAULT_KV_TRANSFER_P99_MS = 100  # EFA moves a full 16k-token KV cache (~0.6 GiB per rank) in well under 10 ms
DEFAULT_FALLBACK_RATIO = 0.8  # share of requests that skip the prefiller (under the routing threshold)

EmailAddress = Annotated[str, pattern(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as 'oncall@example.com'")]
HttpsUrl = Annotated[str, pattern(r"https://[^\s/]+(/\S*)?", "an https:// URL such as 'https://hooks.example.com/dpd'")]
LogGroupName = Annotated[str, pattern(r"[.\-_/#A-Za-z0-9]{1,512}",
                                      "a CloudWatch Logs log group name (1-512 of A-Z a-z 0-9 . - _ / #)")]


class SloConfig(Model):
    """An endpoint's latency objective; the alerts fire when the P99 over 5 minutes stays above it for 5 minutes."""

    ttft_ms: int = Field(default=DEFAULT_TTFT_MS, ge=1, le=600_000)
    tpot_ms: int = Field(default=DEFAULT_TPOT_MS, ge=1, le=60_000)


class AlertsConfig(Model):
    """Where an environment's DPD alerts go: an SNS topic (KMS-encrypted, TLS only) with optional subscriptions.

    ``container_log_group``: the CloudWatch Logs group the decoder's container logs land in, when not the HyperPod
    cluster's own (the observability add-on's ``logging`` writes there); the buffer-overflow alarm watches it.
    """

    enabled: bool = True
    emails: tuple[EmailAddress, ...] = ()
    https_endpoints: tuple[HttpsUrl, ...] = ()
    container_log_group: LogGroupName | None = None
    prefill_queue_depth: int = Field(default=DEFAULT_PREFILL_QUEUE_DEPTH, ge=1, le=100_000)
    kv_transfer_p99_ms: int = Field(default=DEFAULT_KV_TRANSFER_P99_MS, ge=1, le=600_000)
    fallback_ratio: float = Field(default=DEFAULT_FALLBACK_RATIO, gt=0, le=1)
