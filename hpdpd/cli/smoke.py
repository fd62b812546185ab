"""``hpdpd smoke --env NAME``: one prompt under the routing threshold and one above it; TTFT and TPOT for each.

Targets: the endpoint's SageMaker endpoint (default), ``--url`` (any HTTP URL, e.g. a port-forward of the
router), or ``--router`` (the in-cluster router Service, for runs inside the cluster).
Exit codes: 0 both prompts streamed text (and the canary found nothing), 1 a prompt failed or the canary found a
silent failure, 2 the smoke test could not run.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import urlparse

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import (
    environment_arguments,
    escape_cell,
    load_environment_from_args,
    print_json,
    print_table,
    status_label,
)
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.endpoints import configured_endpoints, router_url, select_endpoints
from hyperpod_dpd.ops.kube import KubeError
from hyperpod_dpd.ops.smoke import SmokeReport, http_sender, run_smoke, sagemaker_sender


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
    target.add_argument("--sagemaker-endpoint", default=None, metavar="NAME", help="SageMaker endpoint name override")
    parser.add_argument("--threshold", type=int, default=None, help="routing threshold override (tokens)")
    parser.add_argument("--model", default=None, help="model name sent in the request (default: the endpoint's)")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens to generate per prompt (default 64)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="per-request timeout (HTTP)")
    parser.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (self-signed router)")
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help="kubeconfig for the canary's log reads (default: KUBECONFIG, else EKS authentication)")
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
    if args.url or args.router:
        if args.router and endpoint is None:
            raise HpdpdError("--router needs an endpoint of the environment")
        url = args.url or router_url(endpoint)  # type: ignore[arg-type] # --router without an endpoint raised above
        send = http_sender(url, timeout_seconds=args.timeout, insecure=args.insecure)
        transport, target, chat = "http", url, "chat/" in urlparse(url).path
    else:
        name = args.sagemaker_endpoint or (endpoint.sagemaker_endpoint_name if endpoint else None)
        if not name:
            raise HpdpdError(f"endpoint {endpoint.name if endpoint else '?'} has no SageMaker endpoint; pass --url "
                             "(e.g. a port-forward of the router) or --router when running inside the cluster")
        runtime = factory_from_args(args, default_region=env.region).client("sagemaker-runtime")
        send = sagemaker_sender(runtime, name)
        transport, target, chat = "sagemaker", name, "chat/" in path
    canary = canary_source(args, env, endpoint) if args.canary and endpoint is not None else None
    try:
        report = run_smoke(send=send, endpoint=endpoint.name if endpoint else target, transport=transport,
                           target=target, threshold=threshold, model=model, chat=chat, max_tokens=args.max_tokens,
                           canary=canary)
    except KubeError as exc:
        raise HpdpdError(f"cannot read the logs for the canary of {endpoint.name if endpoint else target}: "
                         f"{exc.reason} (--no-canary skips it)") from None
    if args.output == "json":
        print_json(report.to_json())
    else:
        render(report)
    return 0 if report.ok else 1


def canary_source(args: argparse.Namespace, env: Any, endpoint: Any) -> Any:
    """The canary's log reader: the router's and decoder's logs of the endpoint's IEC through the Kubernetes API."""
    from hyperpod_dpd.cli.verify import kube_from_args
    from hyperpod_dpd.ops.canary import cluster_logs
    from hyperpod_dpd.ops.endpoints import iec_name

    kube = kube_from_args(args, env, factory_from_args(args, default_region=env.region))
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
