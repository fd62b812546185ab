"""``hpdpd verify --probe``: prove the EFA path with the endpoint's own image, not with what the logs happen to say.

1. Inside every running worker of the IEC (exec): the fabric variables of PID 1's environment (the server's
   effective environment) and ``fi_info -p efa -t FI_EP_RDM``: whether the worker's own libfabric, on its node,
   lists the efa provider (NIXL's libfabric plugin takes efa whenever libfabric lists it: cxi, efa, tcp, sockets,
   ai-dynamo/nixl@8770b65 src/utils/libfabric/libfabric_common.cpp:101-108).
2. Where EFA devices are free (a node of the decode group and one of the prefill group, in one AZ, that run no pod
   of this IEC and have an unrequested ``vpc.amazonaws.com/efa``): two short-lived pods of the worker image (or
   ``--probe-image``), one EFA device each, that list the efa provider and run fi_pingpong between the nodes
   (server on the decode node: the prefiller writes into the decoder). When the serving pods hold every device, the
   output says only the workers were checked. ``rollout promote`` calls :func:`run_probe` before it creates the new
   generation, so the nodes the new generation will take are still free.

The probe's pods are deleted when the probe ends: on success, failure, timeout, KeyboardInterrupt and SIGTERM
(turned into :class:`ProbeInterrupted`, a KeyboardInterrupt, for the time of the probe). Each also carries
``activeDeadlineSeconds``, so the kubelet stops it even if the process is killed outright.
"""

from __future__ import annotations

import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from hyperpod_dpd.ops.fabric import per_device_line_rate_gbps, per_rank_line_rate_gbps, worker_container
from hyperpod_dpd.ops.kube import Kube, KubeError
from hyperpod_dpd.ops.kv_logs import fi_info
from hyperpod_dpd.ops.pod_api import (
    ExecResult,
    all_pods,
    create_pod,
    delete_pod,
    exec_in_pod,
    get_pod,
    read_log,
    worker_documents,
)
from hyperpod_dpd.ops.probe_pods import (
    CONTAINER,
    PINGPONG_MAX_BYTES,
    ProbeLog,
    environment,
    manifest,
    parse_log,
    phase,
    pingpong,
    pod_ip,
    provider_command,
    script,
    terminated,
    waiting_reason,
)
from hyperpod_dpd.ops.probe_report import BandwidthProbe, Outcome, ProbeReport, ProviderProbe
from hyperpod_dpd.ops.workloads import DONE_PHASES, Node, nodes, parse_pod

DEADLINE_MARGIN_SECONDS = 60  # activeDeadlineSeconds beyond the probe's own timeout
NO_EFA = "libfabric lists no efa provider in a probe pod (see the probe:provider rows): there is no EFA path to measure"


class ProbeInterrupted(KeyboardInterrupt):
    """SIGTERM arrived while the probe ran (its pods were deleted before this propagated)."""


@dataclass(frozen=True, kw_only=True)
class ProbeOptions:
    image: str | None = None  # default: the running workers' image, else the endpoint's configured one
    timeout_seconds: float = 600.0  # for the probe pods to start and finish (a cold pull of a vLLM image is minutes)
    message_bytes: int = 4 * 1024 * 1024
    iterations: int = 1000
    poll_seconds: float = 2.0
    exec_timeout_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.message_bytes <= PINGPONG_MAX_BYTES:
            raise ValueError(f"message_bytes must be 1..{PINGPONG_MAX_BYTES} (fi_pingpong's largest message)")
        if self.iterations < 1 or self.timeout_seconds <= 0 or self.poll_seconds <= 0:
            raise ValueError("iterations, timeout_seconds and poll_seconds must be positive")


@dataclass(frozen=True, kw_only=True)
class Placement:
    server: Node | None  # decode group
    client: Node | None  # prefill group
    reason: str


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise ProbeInterrupted("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_probe(kube: Kube, endpoint: Any, *, iec: str, options: ProbeOptions | None = None,
              clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
              token: str | None = None) -> ProbeReport:
    """Probe the EFA path of ``endpoint``'s IEC ``iec``; KubeError propagates (after the probe pods are deleted)."""
    options = options or ProbeOptions()
    namespace = endpoint.namespace
    workers = [d for d in worker_documents(kube, namespace=namespace, iec=iec) if phase(d) == "Running"]
    providers = [_probe_worker(kube, d, options) for d in workers]
    template = workers[0] if workers else None
    served = (str(worker_container(template).get("image") or "") if template else "") or endpoint.worker_image
    image = options.image or served
    placement = place(kube, endpoint, iec=iec)
    base = BandwidthProbe(outcome="not-run", detail="", command=pingpong(options.message_bytes, options.iterations),
                          device_line_rate_gbps=per_device_line_rate_gbps(endpoint.instance),
                          rank_line_rate_gbps=per_rank_line_rate_gbps(endpoint.instance))
    if placement.server is None or placement.client is None:
        only = "; the provider was checked inside the running workers only" if workers else ""
        return ProbeReport(namespace=namespace, image=image, worker_image=served, providers=tuple(providers),
                           bandwidth=replace(base, detail=placement.reason + only))
    token = token or secrets.token_hex(3)
    created: list[str] = []
    left: list[str] = []
    with _sigterm_as_interrupt():
        try:
            images, bandwidth = _measure(kube, endpoint, placement, image=image, token=token, template=template,
                                         options=options, created=created, clock=clock, sleep=sleep, base=base)
        finally:
            left = _delete(kube, namespace, created)
    return ProbeReport(namespace=namespace, image=image, worker_image=served, providers=(*providers, *images),
                       bandwidth=bandwidth,
                       created=tuple(created), left_behind=tuple(left))


def _probe_worker(kube: Kube, document: Mapping[str, Any], options: ProbeOptions) -> ProviderProbe:
    meta, container = document.get("metadata") or {}, worker_container(document)
    name, namespace, role = str(meta.get("name", "")), str(meta.get("namespace", "")), parse_pod(document).role

    def run(command: list[str]) -> ExecResult:
        return exec_in_pod(kube, namespace=namespace, pod=name, container=container.get("name"), command=command,
                           timeout_seconds=options.exec_timeout_seconds)

    environ = run(["cat", "/proc/1/environ"])
    effective = environment(environ.stdout) if environ.exit_code == 0 else None
    listed = run(provider_command())
    return ProviderProbe(role=role or "?", in_worker=True, pod=name, node=(document.get("spec") or {}).get("nodeName"),
                         container=str(container.get("name") or ""), effective_env=effective,
                         fi_info=fi_info(listed.output, -1 if listed.exit_code is None else listed.exit_code),
                         note="" if effective is not None else "its environment could not be read (cat /proc/1/environ)")


def place(kube: Kube, endpoint: Any, *, iec: str) -> Placement:
    """A decode-group node and a prefill-group node in one AZ, running nothing of ``iec``, each with a free EFA."""
    cluster = nodes(kube)
    held: dict[str, int] = {}
    serving: set[str] = set()
    for document in all_pods(kube):
        pod = parse_pod(document)
        if pod.node and pod.phase not in DONE_PHASES:
            held[pod.node] = held.get(pod.node, 0) + pod.efa
            if pod.name.startswith((f"prefill-{iec}-", f"decode-{iec}-")):
                serving.add(pod.node)

    def free(role: str) -> list[Node]:
        return [n for n in sorted(cluster.values(), key=lambda n: n.name) if n.matches(endpoint.node_selector(role))
                and n.name not in serving and n.allocatable_efa - held.get(n.name, 0) >= 1]

    decode, prefill = free("decode"), free("prefill")
    for server in decode:
        client = next((n for n in prefill if n.name != server.name and n.zone == server.zone), None)
        if client:
            return Placement(server=server, client=client, reason="")
    short = [role for role, found in (("decode", decode), ("prefill", prefill)) if not found]
    if not short:
        return Placement(server=None, client=None, reason="no prefill-group and decode-group nodes with free EFA "
                                                         "devices in one AZ")
    group = [n for n in cluster.values() if n.matches(endpoint.node_selector(short[0]))]
    if group and all(n.allocatable_efa <= 0 for n in group):
        why = ("they advertise no vpc.amazonaws.com/efa (with the EFA DRA driver the probe cannot take a device: it "
               "requests the extended resource)")
    else:
        why = "every EFA device of its nodes is held (the serving pods)" if group else "the group has no node"
    return Placement(server=None, client=None, reason=f"bandwidth not measured: no free {short[0]}-group node: {why}")


def _measure(kube: Kube, endpoint: Any, placement: Placement, *, image: str, token: str,
             template: Mapping[str, Any] | None, options: ProbeOptions, created: list[str],
             clock: Callable[[], float], sleep: Callable[[float], None],
             base: BandwidthProbe) -> tuple[list[ProviderProbe], BandwidthProbe]:
    assert placement.server is not None and placement.client is not None
    namespace, deadline = endpoint.namespace, clock() + options.timeout_seconds
    nodes_of = {"decode": placement.server.name, "prefill": placement.client.name}
    names = {role: f"hpdpd-probe-{endpoint.name[:24].rstrip('-')}-{token}-{role}" for role in nodes_of}
    at = replace(base, server_node=nodes_of["decode"], client_node=nodes_of["prefill"])

    def ended(outcome: Outcome, detail: str, gbps: float | None = None, cause: str = "") -> BandwidthProbe:
        return replace(at, outcome=outcome, detail=detail, gbps=gbps, cause=cause)

    between = (f"between probe pods on {nodes_of['prefill']} (prefill group) and {nodes_of['decode']} (decode group), "
               f"one EFA device each, {_size(options.message_bytes)} messages")

    def pod(role: str, server_ip: str | None = None) -> None:
        created.append(names[role])  # before the call: a create that times out may still have happened
        create_pod(kube, manifest(
            name=names[role], namespace=namespace, node=nodes_of[role], image=image, token=token,
            endpoint=endpoint.name, role=role, template=template, server_ip=server_ip,
            deadline_seconds=int(options.timeout_seconds) + DEADLINE_MARGIN_SECONDS,
            command=script(server=role == "decode", message_bytes=options.message_bytes,
                           iterations=options.iterations)))

    def result(role: str, log: ProbeLog | None, note: str = "") -> ProviderProbe:
        return ProviderProbe(role=role, in_worker=False, pod=names[role], node=nodes_of[role], image=image,
                             fi_info=log.fi_info if log else None, note=note)

    pod("decode")
    server, late = _wait(kube, namespace, names["decode"], lambda d: terminated(d) is not None or bool(pod_ip(d)),
                         deadline=deadline, clock=clock, sleep=sleep, poll=options.poll_seconds)
    if late:
        why = f"{names['decode']} did not start in {options.timeout_seconds:g} s: {waiting_reason(server)}"
        return [result("decode", None, why)], ended("timeout", why)
    stopped = terminated(server)
    if stopped is not None:
        log = _log(kube, namespace, names["decode"], stopped[0])
        why = f"{names['decode']} stopped before the test (exit {stopped[0]}{': ' + stopped[1] if stopped[1] else ''})"
        if log.pingpong_missing or (log.fi_info and log.fi_info.missing):
            return [result("decode", log)], ended("missing", why)
        no_efa = log.fi_info is not None and not log.fi_info.efa and not log.fi_info.inconclusive
        return [result("decode", log, "" if log.fi_info else why)], ended(
            "not-run", f"not measured: {why}", cause=NO_EFA if no_efa else "the server stopped before the test (its "
                                                                            "exit and reason are in the detail)")
    pod("prefill", server_ip=pod_ip(server))
    client, late = _wait(kube, namespace, names["prefill"], lambda d: terminated(d) is not None, deadline=deadline,
                         clock=clock, sleep=sleep, poll=options.poll_seconds)
    server_stop = terminated(get_pod(kube, namespace=namespace, name=names["decode"]))
    server_log = _log(kube, namespace, names["decode"], server_stop[0] if server_stop else None)
    if late:
        why = f"{names['prefill']} did not finish in {options.timeout_seconds:g} s: {waiting_reason(client)}"
        return [result("decode", server_log), result("prefill", None, why)], ended("timeout", why)
    code, reason = terminated(client) or (None, "")
    log = _log(kube, namespace, names["prefill"], code)
    images = [result("decode", server_log), result("prefill", log, "" if log.fi_info else reason)]
    if log.pingpong_missing or (log.fi_info and log.fi_info.missing):
        return images, ended("missing", f"fi_pingpong or fi_info missing in {image}")
    if not (log.fi_info and log.fi_info.efa) or not (server_log.fi_info and server_log.fi_info.efa):
        return images, ended("not-run", "not measured: a probe pod found no efa provider", cause=NO_EFA)
    if code == 0 and log.mb_per_second:
        return images, ended("measured", between, gbps=log.mb_per_second / 1000)
    return images, ended("failed", f"fi_pingpong {between} failed (exit {code}{': ' + reason if reason else ''}): "
                                   f"{log.tail}")


def _size(count: int) -> str:
    return f"{count // 1024**2} MiB" if count % 1024**2 == 0 else f"{count} bytes"


def _wait(kube: Kube, namespace: str, name: str, done: Callable[[dict[str, Any]], bool], *, deadline: float,
          clock: Callable[[], float], sleep: Callable[[float], None], poll: float) -> tuple[dict[str, Any], bool]:
    """Poll the pod until ``done`` or the deadline: (last document, timed out)."""
    while True:
        document = get_pod(kube, namespace=namespace, name=name)
        if done(document):
            return document, False
        left = deadline - clock()
        if left <= 0:
            return document, True
        sleep(min(poll, left))


def _log(kube: Kube, namespace: str, name: str, exit_code: int | None) -> ProbeLog:
    """The probe container's log; a container that never started has none (the API server answers 400)."""
    try:
        text = read_log(kube, namespace=namespace, name=name, container=CONTAINER)
    except KubeError as exc:
        if exc.cause == "access_denied":
            raise
        return ProbeLog(fi_info=None, tail=exc.reason)
    return parse_log(text, exit_code)


def _delete(kube: Kube, namespace: str, names: list[str]) -> list[str]:
    """Delete every probe pod; the names that could not be deleted."""
    left = []
    for name in names:
        try:
            delete_pod(kube, namespace=namespace, name=name)
        except KubeError:
            left.append(name)
    return left
