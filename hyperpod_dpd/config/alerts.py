"""Alerting sections: an endpoint's service-level objective (``endpoints[].slo``) and where an environment's alerts go
(``alerts:``). The alert rules and the dashboard are built from them by :mod:`hyperpod_dpd.monitoring`; see
docs/monitoring.md for what each threshold drives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field

from hyperpod_dpd.config.base import Model, join, pattern
from hyperpod_dpd.errors import Issue

# Defaults: a P99 end-to-end TTFT of 2 s and a P99 TPOT of 100 ms, a 70B chat workload's usual targets; set your own.
DEFAULT_TTFT_MS = 2000
DEFAULT_TPOT_MS = 100
# Operational thresholds (docs/monitoring.md says why each default).
DEFAULT_PREFILL_QUEUE_DEPTH = 8  # waiting requests per prefiller: half the prefiller's documented --max-num-seqs (16)
# P99 of the prefillers' KV store time (lmcache:time_to_store): a 16k-token Llama-3.3-70B cache at TP8 is 0.625 GiB
# per rank, about 13 ms at one p5 GPU's share of EFA, about 78 ms at 64 KB-block efficiency, 0.4 s and more over TCP
# (docs/monitoring.md). The metric's highest bucket is 10 s, so a threshold of 10000 ms or more could never fire.
DEFAULT_KV_TRANSFER_P99_MS = 100
KV_STORE_HIGHEST_BUCKET_MS = 10_000  # LMCache/LMCache lmcache/observability.py @ dd022cc
DEFAULT_FALLBACK_RATIO = 0.8  # share of requests that skip the prefiller (under the routing threshold)
# Share of the client's requests that fail: AWS's inference dashboard colours its "Error Rate" red from 5 %
# (aws/sagemaker-hyperpod-cluster-setup @ b920fcf, .../dashboards/templates/inference.json, panel "Percentage of
# Successful Requests", override "Error Rate").
DEFAULT_ERROR_RATIO = 0.05
# How long the container log group may hold no vLLM line before VllmLogsMissing warns that DecoderBufferOverflow is
# blind. A scraped vLLM writes an access line every scrape (IEC metricsScrapeIntervalSeconds: 15 by default, at most
# 300) and a busy one a stats line every 10 s, but an idle one whose scrapes are not access-logged writes nothing
# (docs/monitoring.md, "Container logs missing"), so the default allows an idle hour. In 5-minute periods: a
# CloudWatch alarm with a period under one hour looks back at most one day (PutMetricAlarm, Period: "the total
# evaluation period can't be longer than one day (86,400 seconds)").
DEFAULT_CONTAINER_LOGS_MISSING_MINUTES = 60
CONTAINER_LOGS_MISSING_STEP_MINUTES = 5

# Domains reserved for documentation and testing, where nothing is ever delivered: the top-level names "test",
# "example", "invalid" and "localhost" (RFC 2606, section 2) and the second-level "example.com", "example.net" and
# "example.org" (RFC 2606, section 3). A subscriber there is a placeholder nobody reads.
RESERVED_TLDS = ("test", "example", "invalid", "localhost")
RESERVED_DOMAINS = ("example.com", "example.net", "example.org")

EmailAddress = Annotated[str, pattern(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as 'oncall@example.com'")]
HttpsUrl = Annotated[str, pattern(r"https://[^\s/]+(/\S*)?", "an https:// URL such as 'https://hooks.example.com/dpd'")]
LogGroupName = Annotated[str, pattern(r"[.\-_/#A-Za-z0-9]{1,512}",
                                      "a CloudWatch Logs log group name (1-512 of A-Z a-z 0-9 . - _ / #)")]
# Why a guard is off, in the file itself: a sentence, not an empty string or whitespace.
Reason = Annotated[str, pattern(r"(?s)(?=.*\S).{1,500}", "a sentence (1-500 characters) saying why the guard is off")]


class SloConfig(Model):
    """An endpoint's latency objective; the alerts fire when the P99 over 5 minutes (for TTFT: an upper bound of the
    client's P99 from both hops, docs/monitoring.md) stays above it for 5 minutes."""

    ttft_ms: int = Field(default=DEFAULT_TTFT_MS, ge=1, le=600_000)
    tpot_ms: int = Field(default=DEFAULT_TPOT_MS, ge=1, le=60_000)


class AlertsConfig(Model):
    """Where an environment's DPD alerts go: an SNS topic (KMS-encrypted, TLS only) with optional subscriptions.

    ``container_log_group``: the CloudWatch Logs group the decoder's container logs land in, when not the HyperPod
    cluster's own (the observability add-on's ``logging`` writes there); the buffer-overflow alarm watches it, and
    ``container_logs_missing_minutes`` is how long it may hold no vLLM line before the logs-missing companion warns.

    The ``no_*_reason`` keys switch a guard off on purpose, with the reason in the file: a production environment with
    endpoints is refused without its SLO alerts, its buffer-overflow alarm or anyone receiving them
    (:meth:`issues`); another environment with endpoints gets a warning instead (:meth:`warnings`).
    """

    enabled: bool = True
    emails: tuple[EmailAddress, ...] = ()
    https_endpoints: tuple[HttpsUrl, ...] = ()
    container_log_group: LogGroupName | None = None
    prefill_queue_depth: int = Field(default=DEFAULT_PREFILL_QUEUE_DEPTH, ge=1, le=100_000)
    kv_transfer_p99_ms: int = Field(default=DEFAULT_KV_TRANSFER_P99_MS, ge=1, lt=KV_STORE_HIGHEST_BUCKET_MS)
    fallback_ratio: float = Field(default=DEFAULT_FALLBACK_RATIO, gt=0, lt=1)  # a share of 1 is never exceeded
    error_ratio: float = Field(default=DEFAULT_ERROR_RATIO, gt=0, lt=1)  # likewise
    container_logs_missing_minutes: int = Field(default=DEFAULT_CONTAINER_LOGS_MISSING_MINUTES, ge=15, le=1440,
                                                multiple_of=CONTAINER_LOGS_MISSING_STEP_MINUTES)
    no_slo_alerts_reason: Reason | None = None
    no_log_alarm_reason: Reason | None = None
    no_subscribers_reason: Reason | None = None

    def missing_guards(self, root: Any, path: str = "alerts") -> dict[str, Issue]:
        """The guards an environment with endpoints lacks, by the reason key that switches each off on purpose; each
        issue names the setting that would turn the guard on (what infra/monitoring.py builds from them)."""
        observability = root.operator.observability
        missing: dict[str, Issue] = {}
        if not self.enabled:  # no topic, no rules, no alarms: nobody to subscribe either
            missing[SLO] = Issue(join(path, "enabled"), False, "turns off the SLO alerts: remove alerts.enabled: false")
            missing[LOG] = Issue(join(path, "enabled"), False,
                                 "turns off the decoder buffer-overflow alarm: remove alerts.enabled: false")
            return missing
        if not observability.enabled:
            missing[SLO] = Issue("operator.observability.enabled", False,
                                 "the SLO alerts are Prometheus rules in the observability add-on's workspace, "
                                 "which exists only with the add-on: set operator.observability.enabled: true")
        else:
            blind = [i for i, endpoint in enumerate(root.endpoints) if not endpoint.metrics.enabled]
            if blind:
                missing[SLO] = Issue(f"endpoints[{blind[0]}].metrics.enabled", False,
                                     "the SLO alerts read the endpoint's metrics, which the operator then does not "
                                     "scrape: set it to true")
        if self.container_log_group is None and not (observability.enabled and observability.logging):
            missing[LOG] = Issue("operator.observability.logging", observability.enabled and observability.logging,
                                 "the decoder buffer-overflow alarm reads the decoder's container logs: set "
                                 "operator.observability.logging: true (the add-on ships them to the cluster's log "
                                 "group) or alerts.container_log_group")
        if not self.emails and not self.https_endpoints:
            missing[SUBSCRIBERS] = Issue(join(path, "emails"), (),  # a tuple: warnings are deduplicated as a set
                                         "nobody receives the alerts: list alerts.emails or alerts.https_endpoints")
        return missing

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        """With endpoints: a production environment keeps every guard unless its reason key says why not; a reason
        given while its guard is on is refused (it would describe something that is not true)."""
        if not root.endpoints:
            return
        missing = self.missing_guards(root, path)
        for key in GUARDS:
            reason = getattr(self, key)
            if reason is not None and key not in missing:
                yield Issue(join(path, key), reason, f"applies only without the {GUARDS[key]}, which this "
                                                     "environment has; remove it")
            elif reason is None and key in missing and root.production:
                issue = missing[key]
                yield Issue(issue.path, issue.value,
                            f"{issue.message}; a production environment with endpoints needs its {GUARDS[key]}, or "
                            f"the reason it runs without in {join(path, key)} (docs/configuration.md, 'alerts')")

    def warnings(self, root: Any, path: str = "alerts") -> list[Issue]:
        """Another environment with endpoints: a warning per missing guard without its reason, nobody subscribed
        included (an alert topic without a subscriber sends the alerts nowhere; production refuses it, :meth:`issues`).
        A subscriber on a reserved example domain is ``hpdpd preflight``'s to report (:func:`placeholder_subscribers`):
        the shipped files hold one, as they hold placeholder accounts, to be replaced before the first deploy."""
        if root.production or not root.endpoints:
            return []
        missing = self.missing_guards(root, path)
        return [Issue(missing[key].path, missing[key].value,
                      f"{missing[key].message}; or give the reason it runs without in {join(path, key)}")
                for key in GUARDS if key in missing and getattr(self, key) is None]


def reserved_domain(host: str) -> bool:
    """Whether ``host`` is or lies under a name reserved for documentation (:data:`RESERVED_TLDS`,
    :data:`RESERVED_DOMAINS`)."""
    name = host.lower().rstrip(".")
    return name.rpartition(".")[2] in RESERVED_TLDS or any(
        name == domain or name.endswith(f".{domain}") for domain in RESERVED_DOMAINS)


def placeholder_subscribers(alerts: AlertsConfig, path: str = "alerts") -> list[Issue]:
    """One issue per e-mail address or HTTPS endpoint on a reserved example domain: SNS sends its confirmation there,
    nobody confirms, and the alerts reach nobody."""
    where = {"emails": [e.rpartition("@")[2] for e in alerts.emails],
             "https_endpoints": [urlsplit(u).hostname or "" for u in alerts.https_endpoints]}
    return [Issue(f"{join(path, key)}[{i}]", getattr(alerts, key)[i],
                  "is on a domain reserved for documentation (RFC 2606), where nothing is delivered: nobody receives "
                  "the alerts there; replace it with your on-call address or endpoint")
            for key, hosts in where.items() for i, host in enumerate(hosts) if reserved_domain(host)]


SLO, LOG, SUBSCRIBERS = "no_slo_alerts_reason", "no_log_alarm_reason", "no_subscribers_reason"
GUARDS = {SLO: "SLO alerts", LOG: "decoder buffer-overflow alarm", SUBSCRIBERS: "alert subscription"}
