"""``hpdpd smoke --env NAME``: one prompt under the routing threshold and one above it; TTFT and TPOT for each.

Targets: the endpoint's SageMaker endpoint (the default when it has a name), the router Service through the
Kubernetes API server's service proxy (``--service-proxy``; the default without a SageMaker name: it works from
anywhere the API server is reachable, with EKS authentication), ``--url`` (any HTTP URL, e.g. a port-forward of the
router), or ``--router`` (the in-cluster router Service URL, for runs inside the cluster).
A prompt passes only when its stream ends with vLLM's final ``data: [DONE]`` event (hyperpod_dpd.ops.smoke).
``--timeout`` is the budget of the prompts and the canary's reads together, after ``--wait-ready``: every request gets
what is left of it.
Exit codes: 0 both prompts streamed text to the end (and the canary found nothing), 1 a prompt failed (an error, no
text, a stream cut short) or the canary found a silent failure, 2 the smoke test could not run (the IEC not ready
after ``--wait-ready``, the cluster unreadable, rejected credentials, an answer that is not the service's,
``--timeout`` ran out).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import urlparse

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    command_deadline,
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    non_negative_seconds,
    positive_seconds,
    print_json,
    print_table,
    status_label,
)
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.endpoints import configured_endpoints, router_url, select_endpoints
from hyperpod_dpd.ops.kube import KubeError
from hyperpod_dpd.ops.smoke import Sender, SmokeReport, http_sender, run_smoke, sagemaker_sender

PROXY_TRANSPORT = "kubernetes-api"  # as rollout promote names the same path (hyperpod_dpd/cli/rollout.py)
WAIT_INTERVAL_SECONDS = 10.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "smoke", parents=[common], help="send a short and a long prompt; report TTFT and TPOT",
        description="Send one prompt under the endpoint's routing threshold (served by the decoder alone) and one "
                    "above it (prefill, KV transfer, decode) and report time to first token and time per output token.")
    environment_arguments(parser)
    add_aws_arguments(parser)
    parser.add_argument("--endpoint", default=None, metavar="NAME", help="endpoint of the environment (default: the only one)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--url", default=None, help="stream from this HTTP(S) URL instead of SageMaker runtime")
    target.add_argument("--router", action="store_true", help="stream from the in-cluster router Service URL")
    target.add_argument("--service-proxy", action="store_true",
                        help="stream from the router Service through the Kubernetes API server's service proxy "
                             "(default when the endpoint has no SageMaker endpoint name)")
    target.add_argument("--sagemaker-endpoint", default=None, metavar="NAME", help="SageMaker endpoint name override")
    parser.add_argument("--threshold", type=int, default=None, help="routing threshold override (tokens)")
    parser.add_argument("--model", default=None, help="model name sent in the request (default: the endpoint's)")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens to generate per prompt (default 64)")
    parser.add_argument("--timeout", type=positive_seconds, default=300.0, metavar="SECONDS",
                        help="how long the prompts and the canary's reads may take together, after --wait-ready; "
                             "every request gets what is left (default 300)")
    parser.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (self-signed router)")
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help="kubeconfig for the service proxy, --wait-ready and the canary's log reads (default: "
                             "KUBECONFIG, else EKS authentication)")
    parser.add_argument("--wait-ready", type=non_negative_seconds, default=0.0, metavar="SECONDS",
                        help="first wait up to SECONDS for the endpoint's IEC to reach DeploymentComplete (default 0)")
    parser.add_argument("--no-canary", dest="canary", action="store_false",
                        help="skip the silent-failure canary (routing counter, decoder KV hit, greedy determinism)")
    parser.set_defaults(func=run)


def _endpoint(env: Any, name: str | None) -> Any | None:
    endpoints = configured_endpoints(env)
    if name is not None:
        return select_endpoints(endpoints, name)[0]
    if len(endpoints) > 1:
        raise HpdpdError(f"environment {env.name} has several endpoints ({', '.join(e.name for e in endpoints)}); "
                         "choose one with --endpoint")
    return endpoints[0] if endpoints else None


def run(args: argparse.Namespace) -> int:
    env = load_environment_from_args(args)
    endpoint = _endpoint(env, args.endpoint)
    threshold = args.threshold if args.threshold is not None else (endpoint.routing.threshold if endpoint else None)
    model = args.model or (endpoint.model.name if endpoint else None)
    if threshold is None or threshold < 0 or not model:
        raise HpdpdError(f"environment {env.name} declares no endpoint; pass --threshold and --model with --url or "
                         "--sagemaker-endpoint")
    path = endpoint.invocation_path if endpoint else "v1/chat/completions"
    if (args.router or args.service_proxy or args.wait_ready > 0) and endpoint is None:
        raise HpdpdError("--router, --service-proxy and --wait-ready need an endpoint of the environment")
    # The configured generation's SageMaker endpoint (<sagemaker_endpoint_name>-<generation>, or the fixed name), as
    # the endpoints chart renders it: two generations cannot share one name (hyperpod_dpd/config/endpoint_rollout.py).
    sagemaker_name = args.sagemaker_endpoint or (endpoint.rendered_sagemaker_endpoint_name if endpoint else None)
    proxy = not (args.url or args.router) and (args.service_proxy or (endpoint is not None and not sagemaker_name))
    needs_cluster = endpoint is not None and (proxy or args.wait_ready > 0 or args.canary)
    deadline = command_deadline(args.wait_ready + args.timeout,
                                "--wait-ready and --timeout" if args.wait_ready > 0 else "--timeout")
    kube = cluster_access(args, env, deadline) if needs_cluster else None  # it connects on its first call only
    if args.url or args.router:
        url = args.url or router_url(endpoint)  # type: ignore[arg-type] # --router without an endpoint raised above
        send = http_sender(url, timeout_seconds=args.timeout, insecure=args.insecure, deadline=deadline)
        transport, target, chat = "http", url, "chat/" in urlparse(url).path
    elif proxy:
        send, target = proxy_sender(kube, endpoint, timeout_seconds=args.timeout)
        transport, chat = PROXY_TRANSPORT, "chat/" in path
    elif sagemaker_name:
        runtime = factory_from_args(args, default_region=env.region, deadline=deadline).client("sagemaker-runtime")
        send = sagemaker_sender(runtime, sagemaker_name)
        transport, target, chat = "sagemaker", sagemaker_name, "chat/" in path
    else:
        raise HpdpdError(f"environment {env.name} declares no endpoint to reach; pass --url or --sagemaker-endpoint")
    if args.wait_ready > 0:
        wait_until_ready(kube, endpoint, seconds=args.wait_ready)
    canary = canary_source(kube, endpoint) if args.canary and endpoint is not None else None
    try:
        report = run_smoke(send=send, endpoint=endpoint.name if endpoint else target, transport=transport,
                           target=target, threshold=threshold, model=model, chat=chat, max_tokens=args.max_tokens,
                           canary=canary, deadline=deadline)
    except KubeError as exc:
        raise HpdpdError(f"cannot read the logs for the canary of {endpoint.name if endpoint else target}: "
                         f"{exc.reason} (--no-canary skips it)") from None
    if args.output == "json":
        print_json(report.to_json())
    else:
        render(report)
    return 0 if report.ok else 1


def cluster_access(args: argparse.Namespace, env: Any, deadline: Any) -> Any:
    """The Kubernetes API as verify reaches it (``--kubeconfig``, ``KUBECONFIG``, else EKS authentication as the AWS
    credentials); the service proxy, the wait and the canary share it, within the command's deadline."""
    from hyperpod_dpd.cli.verify import kube_from_args

    return kube_from_args(args, env, factory_from_args(args, default_region=env.region, deadline=deadline),
                          deadline=deadline)


def proxy_sender(kube: Any, endpoint: Any, *, timeout_seconds: float) -> tuple[Sender, str]:
    """A sender to the router Service of the endpoint's IEC through the API server's service proxy (as ``rollout
    promote`` smokes a new generation, hyperpod_dpd/cli/rollout.py ``generation_checks``), and the router's in-cluster URL
    for the report. The router Service and port are the operator's (hyperpod_dpd.catalogue.operator)."""
    from hyperpod_dpd.catalogue.operator import ROUTER_PORT, router_service
    from hyperpod_dpd.catalogue.operator import router_url as in_cluster_url
    from hyperpod_dpd.ops.endpoints import iec_name
    from hyperpod_dpd.ops.workloads import service_proxy_sender

    iec, path = iec_name(endpoint), endpoint.invocation_path.lstrip("/")
    send = service_proxy_sender(kube, service=router_service(iec, endpoint.namespace), port=ROUTER_PORT, path=path,
                                timeout_seconds=timeout_seconds)
    return send, in_cluster_url(iec, endpoint.namespace, path)


def wait_until_ready(kube: Any, endpoint: Any, *, seconds: float) -> None:
    """Wait up to ``seconds`` (``--wait-ready``) for the endpoint's IEC; not ready then: the smoke test cannot run."""
    from hyperpod_dpd.ops.endpoints import iec_name
    from hyperpod_dpd.ops.kube import wait_for_iec

    iec = iec_name(endpoint)
    status = wait_for_iec(kube, name=iec, namespace=endpoint.namespace, seconds=seconds,
                          interval=WAIT_INTERVAL_SECONDS)
    if not status.ready:
        detail = status.reason if not status.known else status.state + (f": {status.message}" if status.message else "")
        raise HpdpdError(f"endpoint {endpoint.name}: IEC {endpoint.namespace}/{iec} is not ready after "
                         f"{seconds:g} s ({detail})")


def canary_source(kube: Any, endpoint: Any) -> Any:
    """The canary's log reader: the router's and decoder's logs of the endpoint's IEC through the Kubernetes API."""
    from hyperpod_dpd.ops.canary import cluster_logs
    from hyperpod_dpd.ops.endpoints import iec_name

    return cluster_logs(kube, namespace=endpoint.namespace, iec=iec_name(endpoint))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(report: SmokeReport) -> None:
    rows = []
    for m in report.results:
        prompt = f"~{m.prompt_tokens_estimate}" + (f" ({m.prompt_tokens})" if m.prompt_tokens is not None else "")
        rows.append((m.case, escape_cell(m.expected_route), prompt, m.output_tokens, _ms(m.ttft_ms), _ms(m.tpot_ms),
                     _ms(m.total_ms), "ok" if m.ok else escape_cell(f"FAILED: {m.error}")))
    print_table(("Prompt", "Expected route", "Prompt tokens", "Output tokens", "TTFT ms", "TPOT ms", "Total ms",
                 "Result"), rows,
                title=escape_cell(f"smoke {report.endpoint} via {report.transport} ({report.target}), "
                                  f"threshold {report.threshold}"))
    if report.canary:
        print_table(("Status", "Check", "Detail", "Likely cause"),
                    [(status_label(c.status), escape_cell(c.name), escape_cell(c.detail), escape_cell(c.cause or ""))
                     for c in report.canary], title="silent-failure canary")
    for reason in report.skipped:
        print(f"hpdpd: skipped {reason}", file=sys.stderr)
