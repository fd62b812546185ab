"""The rows of ``hpdpd verify``, as pure functions: facts read from the cluster in, one :class:`Check` out.

A row that is not PASS names its most likely cause (platform docs section 19, "Troubleshooting: symptom -> cause";
docs/cli.md, "Troubleshooting"). Where the serving stack's sources cannot confirm a behaviour the row WARNs; it
passes only on evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.ops.checks import Check, Status
from hyperpod_dpd.ops.efa_devices import DraInventory
from hyperpod_dpd.ops.kv_logs import FiInfo, LMCacheConfig, RetrieveCounts
from hyperpod_dpd.ops.metrics import Throughput
from hyperpod_dpd.ops.workloads import Node, Pod

# LMCache reads its NIXL backends from LMCACHE_NIXL_BACKENDS (LMCache 0.4.3 lmcache/v1/config.py:217-221): outer
# quotes stripped (config_base.py:112-136 _parse_quoted_string), then split on commas (config_base.py:91-100
# _to_str_list), so '["LIBFABRIC"]' is the one name '["LIBFABRIC"]', which NIXL has no plugin for; unset, its
# NixlAgentWrapper asks NIXL for ["UCX"] (lmcache/v1/transfer_channel/nixl_channel.py:610-612). libfabric restricts
# itself to the providers FI_PROVIDER names (a comma-separated list; "^" excludes); UCX picks its transports from UCX_TLS.
BACKENDS_VARIABLE = "LMCACHE_NIXL_BACKENDS"
PROVIDER_VARIABLE = "FI_PROVIDER"
UCX_TLS_VARIABLE = "UCX_TLS"
LIBFABRIC, UCX = "LIBFABRIC", "UCX"
NIXL_CHANNEL = "nixl"  # the transfer channels LMCache 0.4.3 creates: nixl, mock_memory (transfer_channel/__init__.py:41)
PD_ROLES = {"prefill": "sender", "decode": "receiver"}  # LMCache's pd_role per DPD role (platform docs, "Role check")
EFA_CAUSE = ("EFA is not in use (platform docs section 19, 'KV throughput < 1 GB/s'): nodes not EFA-capable, not in "
             "the same AZ, no EFA resources ('kubectl describe node <node> | grep efa'), or the image lacks "
             "libfabric's EFA provider")
UCX_CAUSE = ("the KV cache moves over TCP, not EFA: NIXL's UCX backend (LMCache's default) does not use EFA; pin NIXL "
             "to libfabric (LMCACHE_NIXL_BACKENDS=LIBFABRIC, or nixl_backends: [LIBFABRIC] in the LMCache config "
             "file) with FI_PROVIDER=efa, in an image that ships libfabric's EFA provider")
BACKEND_NAME_CAUSE = ("NIXL is asked for backend(s) {names}, none of them LIBFABRIC: LMCache splits "
                      "LMCACHE_NIXL_BACKENDS on commas and keeps brackets and quotes, so a JSON list reaches NIXL as "
                      "one unknown name and no backend is created; set LMCACHE_NIXL_BACKENDS=LIBFABRIC")
MISSING_PLUGIN_CAUSE = ("NIXL has no plugin for backend(s) {names} and skipped them ('Skipping backend registration "
                        "... due to the missing plugin'): no LIBFABRIC backend moves the KV; use an image whose NIXL "
                        "ships the LIBFABRIC plugin, and the name LIBFABRIC")
PD_OFF_CAUSE = ("LMCache's PD backend is off in this worker (enable_pd False, or a transfer channel other than "
                "nixl): the KV cache does not move from prefiller to decoder; the operator wires it "
                "(LMCACHE_ENABLE_PD, LMCACHE_TRANSFER_CHANNEL=nixl)")
ROLE_CAUSE = ("wrong roles (DPD troubleshooting, 'Retrieved 0 out of N'): a {role} pod runs LMCache as pd_role "
              "{found}, not {wanted}")
NO_GDR_CAUSE = ("GPUDirect RDMA is off: NIXL's libfabric provider has no FI_HMEM support, so it registered the GPU "
                "buffer as system memory ('VRAM memory requested but provider does not support FI_HMEM' / 'Using "
                "provider without FI_HMEM support'): the node needs the GPU peer-memory support EFA uses (DMA-BUF "
                "or nvidia-peermem) and an image whose libfabric EFA provider supports CUDA memory")
TCP_PROVIDER_CAUSE = ("the KV cache moves over TCP, not EFA: NIXL runs LIBFABRIC on libfabric's {provider} provider "
                      "(it takes efa only when libfabric lists it): use an image whose libfabric has the EFA "
                      "provider (the EFA installer's, as public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-"
                      "cuda-v1.1 ships it), EFA devices in the pod, and FI_PROVIDER=efa")
NO_EFA_PROVIDER_CAUSE = ("libfabric lists no efa provider inside the worker, so NIXL's LIBFABRIC runs over tcp: the "
                         "image's libfabric lacks the EFA provider, or no EFA device is mounted into the pod "
                         "(/dev/infiniband); use an image with the EFA installer's libfabric and EFA requests")
NO_EVIDENCE_CAUSE = ("LIBFABRIC is not proven to run on libfabric's efa provider (NIXL falls back to tcp when the "
                     "image lacks it): run 'hpdpd verify --probe' (reads FI_PROVIDER and fi_info -p efa inside the "
                     "workers), or set NIXL_LOG_LEVEL=INFO so NIXL logs 'Discovered N EFA devices'")
NOT_INSTANTIATED_CAUSE = ("nothing in the worker's log shows NIXL created a LIBFABRIC backend (its 'Backend LIBFABRIC "
                          "was instantiated' start-up line, or its libfabric plugin's 'Discovered N ... devices'): "
                          "the variable says what LMCache asks for, not what NIXL created; the start-up lines may be "
                          "gone from the log (a long-running pod): check after a restart, or with NIXL_LOG_LEVEL=INFO")
RECOMPUTE_CAUSE = ("the decoder recomputed the prefill instead of loading the transferred KV (DPD troubleshooting, "
                   "'Retrieved 0 out of N'): wrong roles, different prefill and decode images, or PYTHONHASHSEED "
                   "missing")


def pods_check(role: str, pods: Sequence[Pod], replicas: int, events: Sequence[str]) -> Check:
    running = [p for p in pods if p.running]
    detail = f"{len(running)}/{replicas} {role} pod(s) Running" + (
        f" ({', '.join(p.name for p in running)})" if running else "")
    if len(running) >= replicas:
        return Check(name=f"pods:{role}", status="pass", detail=detail)
    stuck = [p for p in pods if not p.running]
    why = "; ".join(f"{p.name} {p.phase}" + (f" ({p.waiting})" if p.waiting else "") for p in stuck) or "no pod"
    status: Status = "fail" if not running else "warn"
    return Check(name=f"pods:{role}", status=status, detail=f"{detail}; {why}", cause=_pod_cause(stuck, events))


def _pod_cause(stuck: Sequence[Pod], events: Sequence[str]) -> str:
    waiting = " ".join(p.waiting for p in stuck)
    last = f" (event: {events[-1]})" if events else ""
    if not stuck:
        return "the operator created no pod for this role: check the IEC's status conditions" + last
    if "ImagePull" in waiting or "ErrImage" in waiting or "ContainerCreating" in waiting:
        return "image pull or volume mount failure: check the image and the model's S3 access" + last
    if any(p.phase == "Pending" and not p.node for p in stuck):
        return ("no node of the role's instance group has the free GPUs/EFA the pod requests (Pending): scale the "
                "group or free the nodes") + last
    if "CrashLoopBackOff" in waiting:
        return "the server keeps crashing: an operator older than v3.2 (EngineDeadError), or OOM" + last
    return "pods still starting: a cold load of a 70B model from S3 takes 5-10 minutes" + last


def _absent_role(pods: Sequence[Pod]) -> str | None:
    """A role without a running pod on a node: placement between the roles cannot be judged."""
    return next((role for role in DPD_ROLES if not any(p.role == role and p.node for p in pods)), None)


def zone_check(pods: Sequence[Pod], cluster: Mapping[str, Node]) -> Check:
    if (absent := _absent_role(pods)) is not None:
        return Check(name="same-az", status="warn", detail=f"no running {absent} pod on a node",
                     cause="the AZs of prefill and decode cannot be compared (see the pods rows)")
    zones: dict[str, list[str]] = {}
    for pod in pods:
        node = cluster.get(pod.node or "")
        zones.setdefault((node.zone if node else None) or "?", []).append(pod.name)
    if "?" in zones:
        return Check(name="same-az", status="warn", detail=f"no zone label on the node of {', '.join(zones['?'])}",
                     cause="nodes without topology.kubernetes.io/zone: the AZ cannot be checked")
    listing = "; ".join(f"{z}: {', '.join(names)}" for z, names in sorted(zones.items()))
    if len(zones) > 1:
        return Check(name="same-az", status="fail", detail=f"pods in {len(zones)} AZs ({listing})",
                     cause="EFA does not cross Availability Zones, so the KV transfer cannot use it: keep both "
                           "instance groups in the GPU AZ (topology.availability_zone, sameAZ)")
    return Check(name="same-az", status="pass", detail=f"all pods in {next(iter(zones), '?')}")


def node_check(pods: Sequence[Pod]) -> Check:
    if (absent := _absent_role(pods)) is not None:
        return Check(name="separate-nodes", status="warn", detail=f"no running {absent} pod on a node",
                     cause="the nodes of prefill and decode cannot be compared (see the pods rows)")
    by_role = {role: {p.node for p in pods if p.role == role and p.node} for role in DPD_ROLES}
    shared = sorted(by_role["prefill"] & by_role["decode"])
    if shared:
        return Check(name="separate-nodes", status="fail", detail=f"prefill and decode share node {', '.join(shared)}",
                     cause="both roles landed on one node: the KV cache never crosses the fabric and the roles "
                           "compete for the node's GPUs; give each role its own instance group "
                           "(prefill.instance_group, decode.instance_group)")
    return Check(name="separate-nodes", status="pass",
                 detail=f"prefill on {', '.join(sorted(by_role['prefill'])) or '-'}; decode on "
                        f"{', '.join(sorted(by_role['decode'])) or '-'}")


def efa_check(role: str, pods: Sequence[Pod], cluster: Mapping[str, Node], expected: int, *,
              dra: DraInventory | None = None, dra_held: Mapping[str, int] | None = None,
              claims: frozenset[str] = frozenset(), dra_error: str = "") -> Check:
    """Each pod's vLLM container holds EFA devices (device plugin request, or DRA claims) on a node that offers them.
    ``dra_error``: why the EFA DRA driver's objects could not be read (devices they hold are then unknown)."""
    if not pods:
        return Check(name=f"efa:{role}", status="fail", detail=f"no {role} pod to inspect",
                     cause="the role has no pod (see its pods row)")
    dra, dra_held = dra or DraInventory(), dra_held or {}
    parts, missing = [], []
    for pod in pods:
        node = cluster.get(pod.node or "")
        plugin = node.allocatable_efa if node else 0
        published = dra.on(pod.node)
        held = pod.efa if pod.efa > 0 else dra_held.get(pod.name, 0)
        how = "through DRA claims" if pod.efa <= 0 and held > 0 else ""
        offers = (f"allocatable {plugin}" if plugin > 0 or not published
                  else f"{published} published in dra.net ResourceSlices")
        parts.append(f"{pod.name}: {held} EFA device(s){' ' + how if how else ''} (node {pod.node or '-'} {offers})")
        if held <= 0 or (plugin <= 0 and published <= 0):
            missing.append((pod, plugin, published))
    detail = "; ".join(parts) + (f"; the instance type has {expected}" if expected else "")
    if not missing:
        return Check(name=f"efa:{role}", status="pass", detail=detail)
    pod, plugin, published = missing[0]
    if dra_error and plugin <= 0:
        return Check(name=f"efa:{role}", status="warn", detail=detail,
                     cause=f"node {pod.node or '-'} advertises no vpc.amazonaws.com/efa and the EFA DRA driver's "
                           f"objects could not be read ({dra_error}): EFA devices held through DRA claims are unknown")
    if plugin <= 0 and published <= 0:
        cause = (f"node {pod.node or '-'} advertises no vpc.amazonaws.com/efa and the EFA DRA driver (dra.net) "
                 "publishes no EFA device for it: the EFA device plugin or DRA driver is not running there, or the "
                 "instance type is not EFA-capable ('kubectl describe node <node> | grep efa')")
    elif pod.name in claims:
        cause = ("the pod's ResourceClaims hold no EFA device of the EFA DRA driver (DeviceClass "
                 "efa.networking.k8s.aws): the KV transfer cannot use EFA")
    else:
        cause = ("the pod's vLLM container requests no vpc.amazonaws.com/efa devices, so none are mounted into it "
                 "(a sidecar's request mounts them into the sidecar): the operator did not inject them (platform "
                 "docs section 20, item 3); the KV transfer cannot use EFA")
    return Check(name=f"efa:{role}", status="fail", detail=detail, cause=cause)


@dataclass(frozen=True, kw_only=True)
class BackendEvidence:
    """What one running worker shows about its NIXL backend and libfabric provider."""

    pod: str
    role: str | None = None  # prefill | decode
    declared_env: Mapping[str, str] = field(default_factory=dict)  # literal env of the pod spec
    effective_env: Mapping[str, str] | None = None  # read inside the container (--probe)
    log_backends: frozenset[str] = frozenset()  # 'Backend X was instantiated'
    log_provider: tuple[str, int] | None = None  # NIXL's 'Discovered N EFA devices' / '... (TCP fallback)'
    fi_info: FiInfo | None = None  # fi_info -p efa inside the container (--probe)
    lmcache: tuple[LMCacheConfig, ...] = ()  # LMCache's 'Creating LMCacheEngine with config' lines
    missing_plugins: frozenset[str] = frozenset()  # NIXL's 'Skipping backend registration X ...'
    no_gpu_direct: bool = False  # NIXL's libfabric registered VRAM as system memory (no FI_HMEM)
    log_error: str = ""  # why the worker's log could not be read


def lmcache_list(value: str) -> list[str]:
    """A list variable as LMCache 0.4.3 reads it: outer quotes stripped, split on commas (see BACKENDS_VARIABLE)."""
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return [part.strip() for part in text.split(",") if part.strip()]


def _providers(value: str) -> tuple[bool, list[str]]:
    """(restricted to efa, the non-EFA providers named, or ["^efa"] when efa is excluded) for an FI_PROVIDER value."""
    text = value.strip().lower()
    if text.startswith("^"):
        excluded = [part.split(";")[0].strip() for part in text[1:].split(",")]
        return False, (["all but efa"] if "efa" in excluded else [])
    if not text:
        return False, []
    cores = [part.split(";")[0].strip() for part in text.split(",") if part.strip()]
    others = [c for c in cores if c not in ("efa", "shm")]
    return ("efa" in cores and not others), others


def _asked(names: list[str] | tuple[str, ...] | None) -> str | None:
    """The cause when the backends LMCache asks NIXL for (None: its UCX default) are not LIBFABRIC."""
    if names is None or UCX in names:
        return UCX_CAUSE
    if LIBFABRIC not in names:
        return BACKEND_NAME_CAUSE.format(names=", ".join(repr(n) for n in names) or "none")
    return None


def _lmcache_cause(e: BackendEvidence) -> str | None:
    """What LMCache's own configuration line says against the KV moving over NIXL LIBFABRIC between the roles."""
    for config in e.lmcache:
        if config.enable_pd is False or (config.transfer_channel not in (None, NIXL_CHANNEL)):
            return PD_OFF_CAUSE
        wanted = PD_ROLES.get(e.role or "")
        if wanted and config.pd_role is not None and config.pd_role != wanted:
            return ROLE_CAUSE.format(role=e.role, found=config.pd_role, wanted=wanted)
        if config.enable_pd and "nixl_backends" in config.fields and (cause := _asked(config.nixl_backends)):
            return cause
    return None


def pod_backend(e: BackendEvidence) -> tuple[Status, str, str | None]:
    """(verdict, what was seen, cause) for one worker."""
    seen: list[str] = [f"log not read ({e.log_error})"] if e.log_error else []
    env = e.effective_env if e.effective_env is not None else e.declared_env
    kind = "effective" if e.effective_env is not None else "spec"
    provider = env.get(PROVIDER_VARIABLE, "")
    if BACKENDS_VARIABLE in env:
        seen.append(f"{BACKENDS_VARIABLE}={env[BACKENDS_VARIABLE]} ({kind} env)")
    if provider:
        seen.append(f"{PROVIDER_VARIABLE}={provider} ({kind} env)")
    seen += [f"LMCache config: enable_pd {c.enable_pd}, pd_role {c.pd_role}, nixl_backends "
             f"{list(c.nixl_backends) if c.nixl_backends is not None else None}" for c in dict.fromkeys(e.lmcache)]
    seen += [f"log 'Backend {b} was instantiated'" for b in sorted(e.log_backends)]
    seen += [f"NIXL skipped backend {b} (no plugin)" for b in sorted(e.missing_plugins)]
    if e.log_provider:
        seen.append(f"NIXL discovered {e.log_provider[1]} {e.log_provider[0]} device(s)")
    if e.no_gpu_direct:
        seen.append("NIXL registered GPU memory as system memory (no FI_HMEM)")
    if e.fi_info is not None:
        seen.append("fi_info -p efa inside: " + (f"{len(e.fi_info.domains)} efa domain(s)" if e.fi_info.efa
                                                 else e.fi_info.error or f"exit {e.fi_info.exit_code}"))
    text = "; ".join(seen)
    declared = lmcache_list(env[BACKENDS_VARIABLE]) if BACKENDS_VARIABLE in env else None
    if UCX in e.log_backends:
        return "fail", text, UCX_CAUSE
    if e.missing_plugins and LIBFABRIC not in e.log_backends:
        return "fail", text, MISSING_PLUGIN_CAUSE.format(names=", ".join(sorted(e.missing_plugins)))
    if cause := _lmcache_cause(e):
        return "fail", text, cause
    # NIXL created LIBFABRIC: its start-up line, or its libfabric plugin's topology line (only that plugin prints it)
    libfabric = LIBFABRIC in e.log_backends or e.log_provider is not None
    # The variable as LMCache 0.4.3 would read it: what NIXL created outranks it (an image whose LMCache reads it
    # otherwise, a JSON list say, and still created LIBFABRIC, moves the KV over libfabric)
    if not e.lmcache and declared is not None and not libfabric and (cause := _asked(declared)):
        return "fail", text, cause
    if env.get(UCX_TLS_VARIABLE, "").lower().startswith("tcp") and not libfabric:
        return "fail", "; ".join([*seen, f"{UCX_TLS_VARIABLE}={env[UCX_TLS_VARIABLE]}"]), UCX_CAUSE
    efa_only, others = _providers(provider)
    if others:
        return "fail", text, TCP_PROVIDER_CAUSE.format(provider="/".join(others))
    if e.log_provider and e.log_provider[0] != "efa":
        return "fail", text, TCP_PROVIDER_CAUSE.format(provider=e.log_provider[0])
    if e.no_gpu_direct:
        return "fail", text, NO_GDR_CAUSE
    if e.fi_info is not None and not e.fi_info.efa and not e.fi_info.inconclusive:
        return "fail", text, NO_EFA_PROVIDER_CAUSE
    proven = (e.log_provider is not None and e.log_provider[0] == "efa" and e.log_provider[1] > 0) \
        or (e.effective_env is not None and efa_only) or (e.fi_info is not None and e.fi_info.efa)
    if libfabric and proven:
        return "pass", text, None
    asked = any(LIBFABRIC in (c.nixl_backends or ()) for c in e.lmcache) or LIBFABRIC in (declared or ())
    if not libfabric:
        return "warn", text or "no backend variable and no 'Backend ... was instantiated' line", \
            NOT_INSTANTIATED_CAUSE if asked else ("the backend could not be established (the start-up line may be "
                                                  "gone from the log): run 'hpdpd verify --probe'")
    return "warn", text, NO_EVIDENCE_CAUSE


def backend_check(evidence: Sequence[BackendEvidence]) -> Check:
    """libfabric on the efa provider in every worker passes; UCX or a tcp/sockets provider fails."""
    if not evidence:
        return Check(name="transfer-backend", status="warn", detail="no running worker to inspect",
                     cause="the roles have no running pod (see their pods rows)")
    verdicts = [(e.pod, *pod_backend(e)) for e in evidence]
    detail = "; ".join(f"{pod}: {seen}" for pod, _, seen, _ in verdicts)
    for wanted in ("fail", "warn"):
        bad = next((v for v in verdicts if v[1] == wanted), None)
        if bad:
            return Check(name="transfer-backend", status=bad[1], detail=detail, cause=bad[3])
    return Check(name="transfer-backend", status="pass", detail="libfabric on the efa provider: " + detail)


def throughput_check(measured: Throughput | None, *, floor_gbps: float, warn_fraction: float,
                     rank_line_rate: float | None, window_seconds: int, sources: str,
                     unproven: str | None = None) -> Check:
    """The prefill side's KV write per TP rank against the per-GPU share of the instance's EFA line rate.
    ``unproven``: why the measured lines cannot be tied to a KV transfer (they pass no higher than WARN)."""
    if measured is None:
        return Check(name="kv-throughput", status="warn",
                     detail=f"no prefill-side KV transfer measured in the last {window_seconds} s ({sources})",
                     cause="no long prompt crossed the threshold in the window (send one: hpdpd smoke), LMCache "
                           "logs below INFO, or no LMCache store series in Prometheus; verify again or widen --window")
    fraction = measured.gbps / rank_line_rate if rank_line_rate else None
    share = (f" ({fraction:.1%} of the {rank_line_rate:g} GB/s per-GPU share of EFA)" if fraction is not None
             and rank_line_rate is not None else "")
    bound = ("; an estimate (derived bytes may exceed what was written), so it cannot pass" if measured.estimate
             else "; a lower bound: the time also holds more than the transfer" if measured.lower_bound else "")
    lines = f" (sums over {measured.transfers} store line(s), one per rank and request)" if measured.transfers else ""
    detail = (f"{measured.gbps:.2f} GB/s per rank{share}: {measured.bytes / 1e9:.2f} GB in {measured.seconds:.3f} s "
              f"of transfer{lines} over {window_seconds} s, from the {measured.source}{bound}")
    if measured.gbps < floor_gbps:
        return Check(name="kv-throughput", status="fail", detail=f"{detail}; floor {floor_gbps:g} GB/s",
                     cause=EFA_CAUSE)
    if fraction is not None and fraction < warn_fraction:
        return Check(name="kv-throughput", status="warn", detail=f"{detail}; under {warn_fraction:.0%} of line rate",
                     cause="the fabric is slow rather than absent: fewer EFA devices than the instance has, a "
                           "placement group missing, or transfers too small to fill the links")
    if measured.estimate:
        return Check(name="kv-throughput", status="warn", detail=detail,
                     cause="only Prometheus' stored-token count was available, which cannot prove what crossed the "
                           "fabric: let the prefill pods log LMCache's INFO store lines (size and put_time per rank), "
                           "or run verify --probe")
    if measured.overstated_lines:
        return Check(name="kv-throughput", status="warn",
                     detail=f"{detail}; {measured.overstated_lines} store line(s) faster than a GPU's share of EFA",
                     cause="a store line's size counts every chunk of the store, but LMCache's PD backend sends only "
                           "the chunks the decoder does not hold yet (concurrent prompts sharing a prefix), so these "
                           "lines overstate the fabric and the sum is no bound: measure with 'hpdpd smoke' on an idle "
                           "endpoint, or run verify --probe")
    if unproven:
        return Check(name="kv-throughput", status="warn", detail=detail, cause=unproven)
    return Check(name="kv-throughput", status="pass", detail=detail)


def retrieve_check(found: RetrieveCounts | None, *, stored_lines: int, window_seconds: int) -> Check:
    """The decoder loaded the KV the prefiller wrote (LMCache's retrieve lines), rather than recomputing it."""
    name = "kv-retrieve"
    if found is None:
        return Check(name=name, status="warn", detail="no running decoder log to read",
                     cause="the decode role has no running pod, or its log could not be read (see the pods row)")
    counts = (f"{found.full} full, {found.partial} partial and {found.misses} empty retrieve line(s) (Retrieved 0 "
              f"out of N) on the decoder in the last {window_seconds} s; {stored_lines} prefill store line(s)")
    buffer = f"; {found.buffer_full} PD buffer-full retries" if found.buffer_full else ""
    if found.misses and not found.hits:
        return Check(name=name, status="fail", detail=counts + buffer, cause=RECOMPUTE_CAUSE)
    if not found.hits:
        cause = ("the prefiller wrote KV in the window but the decoder logged no retrieve: a decoder whose lookups "
                 "miss logs nothing and recomputes (wrong roles, different images, PYTHONHASHSEED), or its LMCache "
                 "logs below INFO (LMCACHE_LOG_LEVEL)") if stored_lines else (
                 "no disaggregated request in the window (send one: hpdpd smoke), or LMCache logs below INFO; "
                 "verify again or widen --window")
        return Check(name=name, status="warn", detail=counts + buffer, cause=cause)
    if found.misses or found.partial or found.buffer_full:
        return Check(name=name, status="warn", detail=counts + buffer,
                     cause=("the decoder's PD buffer filled (PD_BUFFER_SIZE): raise pd_buffer_size or lower "
                            "concurrency" if found.buffer_full and not (found.misses or found.partial) else
                            "the decoder recomputed part of the prompts it was sent: " + RECOMPUTE_CAUSE))
    return Check(name=name, status="pass", detail=counts)


def iec_check(iec: str, state: Any) -> Check:
    if state.ready:
        return Check(name="iec", status="pass", detail=f"{iec} {state.state}")
    if state.failed:
        return Check(name="iec", status="fail", detail=f"{iec} {state.state}: {state.message}",
                     cause="the operator could not deploy the endpoint: its condition message says why")
    return Check(name="iec", status="warn", detail=f"{iec} {state.state}" + (f": {state.message}" if state.message
                                                                               else ""),
                 cause="still deploying: wait for DeploymentComplete (hpdpd wait --for endpoint)")


def iec_missing_check(iec: str, namespace: str, reason: str) -> Check:
    """The API server says the IEC (or its CRD) does not exist: the endpoint is not deployed, which verify fails."""
    return Check(name="iec", status="fail", detail=f"{namespace}/{iec} NotFound ({reason})",
                 cause="the endpoint is not deployed (or --iec names another generation), or the inference operator's "
                       "CRD is not installed: deploy the endpoints stack, check 'hpdpd rollout status'")
