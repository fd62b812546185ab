"""The PromQL of the DPD signals that no single series carries, shared by the alerts and the dashboard:

* :func:`ttft_bound_ms`: an upper bound of the client's P99 time to first token from the two hops of a
  disaggregated request. No model pod sees the client's TTFT: the DPD router sends a request to a prefiller with
  ``max_tokens=1``, awaits its whole response, then sends the original request to the decoder (vllm-project/
  production-stack ``src/vllm_router/services/request_service/request.py`` @ 00d34b7,
  ``route_disaggregated_prefill_request``), and each pod's proxy measures its own ``model_ttfb_milliseconds``. For two
  hops X and Y, ``P(X + Y > a + b) <= P(X > a) + P(Y > b)``, so the sum of both hops' P99.5 bounds the client's P99.
* :func:`endpoint_resources`: the regular expression that matches every generation of an endpoint's IEC, so the
  alerts keep watching the generation that serves while another one is rolled out (or refused).
* :func:`unobserved`: "requests flow but the series a signal reads does not exist": the alert that keeps another
  alert from being silently blind. Its evidence that requests flow is ``vllm:request_success_total`` by default, and
  another metric (the pods' successful POSTs) where that counter is itself the series watched.
* :func:`error_ratio`: the share of the client's requests that failed, from the pods' invocation counters. On the
  router's disaggregated path (the same ``route_disaggregated_prefill_request``) a prefiller's error is answered to
  the client at once and the decoder is never called; a decoder's error comes after a successful prefill. So every
  request fails on at most one hop, and reaches the decoder or fails on a prefiller: requests = decoder invocations
  + prefiller errors, failures = errors of both roles. A plain errors / invocations over both roles counts a
  disaggregated request twice and understates the share by up to half.

No CDK here.
"""

from __future__ import annotations

import re
from typing import Literal

from hyperpod_dpd.config.endpoints import GENERATION_LENGTH
from hyperpod_dpd.monitoring.metrics import (
    METHOD,
    METRICS,
    NAMESPACE,
    RESOURCE,
    STATUS,
    Matcher,
    Metric,
    quantile_ms,
    rate_sum,
    role,
    selector,
)

Role = Literal["prefill", "decode"]
# How a watched series shows it is there: it grows (a histogram's _count, a per-request counter) or it exists (a gauge,
# or a counter of faults that stays flat while nothing fails).
Seen = Literal["grows", "exists"]
# Two hops at P99.5 each: their sum exceeds the client's P99 with probability at most 0.005 + 0.005 = 0.01.
HOP_QUANTILE = 0.995
# Successful POSTs, as AWS's inference dashboard selects them (aws/sagemaker-hyperpod-cluster-setup @ b920fcf, .../dashboards/templates/inference.json,
# panel "Time To First Byte (TTFB)"): GET probes through the pod's proxy would dilute the distribution and lower the
# bound below the truth.
INVOCATIONS = (Matcher(STATUS, "2.*", "=~"), Matcher(METHOD, "POST"))
# Every POST, failed or not, as the same dashboard selects model_errors_total and model_invocations_total (panel
# "Percentage of Successful Requests").
POSTS = (Matcher(METHOD, "POST"),)
# EndpointConfig.generation is the first GENERATION_LENGTH characters of a SHA-256 hexdigest (lowercase hex), and
# EndpointConfig.resource_name is "<name>-<generation>" (hyperpod_dpd/config/endpoints.py).
GENERATION_PATTERN = f"[0-9a-f]{{{GENERATION_LENGTH}}}"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a DNS-1123 label: no regular-expression metacharacter


def endpoint_resources(name: str) -> str:
    """``<name>-[0-9a-f]{N}``: every generation of one endpoint's IEC and nothing else. Prometheus anchors the
    expression, so ``llama`` does not match ``llama-small-<generation>``."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a DNS label; it cannot be used in a resource_name pattern as it is")
    return f"{name}-{GENERATION_PATTERN}"


def endpoint_matchers(name: str, namespace: str) -> tuple[Matcher, ...]:
    return Matcher(NAMESPACE, namespace), Matcher(RESOURCE, endpoint_resources(name), "=~")


def hop_quantile_ms(hop: Role, quantile: float, *matchers: Matcher, window: str = "5m") -> str:
    """The ``quantile`` of one hop's time to first byte (successful POSTs on that role's pods), in ms."""
    return quantile_ms(METRICS["ttfb"], quantile, *matchers, *INVOCATIONS, role(hop), window=window)


def ttft_bound_ms(*matchers: Matcher, window: str = "5m") -> str:
    """Upper bound of the client's P99 TTFT: P99.5 of the prefill hop plus P99.5 of the decode hop, in ms.

    Requests under the routing threshold have no prefill hop. A window without a disaggregated request leaves the
    prefill term NaN (zero rates) or empty (no series); it then counts as 0 (``>= 0`` drops NaN, ``or on()
    vector(0)`` fills in), so such traffic is still judged on its one hop. The decode term has no such fallback:
    without any traffic the whole expression is NaN or empty, and an alert on it stays silent.
    """
    prefill = hop_quantile_ms("prefill", HOP_QUANTILE, *matchers, window=window)
    decode = hop_quantile_ms("decode", HOP_QUANTILE, *matchers, window=window)
    return f"(({prefill} >= 0) or on() vector(0)) + {decode}"


def unobserved(hop: Role, metric: Metric | tuple[Metric, ...], *matchers: Matcher, evidence: tuple[Matcher, ...] = (),
               window: str = "10m", requests: Metric | None = None, request_evidence: tuple[Matcher, ...] = (),
               seen: Seen = "grows", anywhere: bool = False) -> str:
    """One sample labelled ``role="<hop>"`` while requests flow on the hop's pods but ``metric`` is not seen there.

    * Requests flow: ``requests`` grows on the hop's pods (default ``vllm:request_success_total``; restricted by
      ``request_evidence``). It cannot be a watched metric: a missing series cannot show the traffic that finds it
      missing.
    * Seen: ``metric`` grows (``_count`` of a histogram, or a counter; restricted by ``evidence``) or, with
      ``seen="exists"``, has any series. With several metrics, any one of them seen is enough.
    * ``anywhere``: ``metric`` is a node metric without the endpoint's labels (DCGM's), so any series counts.
    """
    watched = metric if isinstance(metric, tuple) else (metric,)
    traffic = requests or METRICS["finished"]
    if traffic in watched:
        raise ValueError(f"{traffic.name} cannot show the requests that would find {traffic.name} missing")
    flowing = rate_sum(traffic, *matchers, *request_evidence, role(hop), window=window)
    scope = evidence if anywhere else (*matchers, *evidence, role(hop))
    observed = " or ".join(f"{_seen(m, *scope, seen=seen, window=window)} > 0" for m in watched)
    return f'label_replace(({flowing} > 0) unless on() ({observed}), "role", "{hop}", "", "")'


def _seen(metric: Metric, *matchers: Matcher, seen: Seen, window: str) -> str:
    return rate_sum(metric, *matchers, window=window) if seen == "grows" else f"count({selector(metric, *matchers)})"


def _count(metric: Metric, *matchers: Matcher, window: str) -> str:
    """POSTs a second over ``window``; 0 when no series matches (a counter of errors exists only after its first)."""
    return f"({rate_sum(metric, *matchers, *POSTS, window=window)} or on() vector(0))"


def error_ratio(*matchers: Matcher, window: str = "5m") -> str:
    """Failed client requests / client requests (module docstring): errors of every pod over the decoder's invocations
    plus the prefillers' errors. No request in the window (a zero or missing denominator) leaves it empty, never a
    division by zero, so an alert on it stays silent."""
    errors, calls = METRICS["errors"], METRICS["invocations"]
    requests = (f"{_count(calls, *matchers, role('decode'), window=window)} + "
                f"{_count(errors, *matchers, role('prefill'), window=window)}")
    return f"{_count(errors, *matchers, window=window)} / (({requests}) > 0)"


def hop_error_ratio(hop: Role, *matchers: Matcher, window: str = "5m") -> str:
    """Failed invocations / invocations of one role's pods (empty while they receive none)."""
    errors, calls = METRICS["errors"], METRICS["invocations"]
    return (f"{_count(errors, *matchers, role(hop), window=window)} / "
            f"({rate_sum(calls, *matchers, *POSTS, role(hop), window=window)} > 0)")
