"""What ``hpdpd verify --probe`` found, and the rows it adds: ``probe:provider:prefill``, ``probe:provider:decode``,
``probe:bandwidth`` (and ``probe:cleanup`` when a probe pod could not be deleted).

The bandwidth judgement: fi_pingpong keeps one message in flight on one EFA device, so it is compared with one
device's share of the instance's EFA bandwidth (catalogue: bandwidth / efa_interfaces), and the per-GPU share (the
devices a TP rank uses, bandwidth / gpu_count) is reported beside it. At 4 MiB a message takes about 335 us on a
100 Gbit/s device, so the round trip's latency (tens of microseconds over EFA) costs a few percent: a working path
measures well over half the device's rate (PASS from :data:`PASS_FRACTION`). Under a quarter (:data:`FAIL_FRACTION`,
3.1 GB/s on p5) is what a path through a degraded or non-EFA link shows, so it FAILs, as does anything under the
endpoint's ``kv_transfer.min_gbps``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hyperpod_dpd.catalogue.operator import DPD_ROLES
from hyperpod_dpd.ops.checks import Check
from hyperpod_dpd.ops.kv_logs import FiInfo

PASS_FRACTION = 0.5
FAIL_FRACTION = 0.25
Outcome = Literal["measured", "failed", "timeout", "missing", "not-run"]
PROBE_IMAGE_FIX = ("pass --probe-image with an image that carries libfabric's utilities (the EFA installer's "
                   "/opt/amazon/efa/bin: fi_info, fi_pingpong)")


@dataclass(frozen=True, kw_only=True)
class ProviderProbe:
    """``fi_info -p efa`` for one role, inside a running worker or in a probe pod of the worker image."""

    role: str
    in_worker: bool
    pod: str
    node: str | None = None
    image: str | None = None
    container: str | None = None
    fi_info: FiInfo | None = None  # None: not run (``note`` says why)
    effective_env: Mapping[str, str] | None = None  # the fabric variables of PID 1 (workers only)
    note: str = ""

    @property
    def location(self) -> str:
        if self.in_worker:
            return f"inside running worker {self.pod} (container {self.container}) on node {self.node or '-'}"
        return f"in probe pod {self.pod} on node {self.node or '-'} (image {self.image})"

    @property
    def result(self) -> str:
        if self.fi_info is None:
            return "not-run"
        if self.fi_info.efa:
            return "efa"
        if self.fi_info.missing:
            return "missing"
        return "inconclusive" if self.fi_info.inconclusive else "no-efa"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "where": "worker" if self.in_worker else "probe-pod",
                                "pod": self.pod, "node": self.node, "result": self.result,
                                "domains": list(self.fi_info.domains) if self.fi_info else []}
        if self.image:
            data["image"] = self.image
        if self.fi_info and self.fi_info.error:
            data["error"] = self.fi_info.error
        if self.effective_env is not None:
            data["effective_env"] = dict(self.effective_env)
        if self.note:
            data["note"] = self.note
        return data


@dataclass(frozen=True, kw_only=True)
class BandwidthProbe:
    outcome: Outcome
    detail: str
    gbps: float | None = None
    server_node: str | None = None  # decode group
    client_node: str | None = None  # prefill group
    device_line_rate_gbps: float | None = None
    rank_line_rate_gbps: float | None = None
    command: str = ""
    cause: str = ""  # why it was not measured, when the outcome's own cause would mislead

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "detail": self.detail, "gbps": round(self.gbps, 3) if self.gbps else None,
                "server_node": self.server_node, "client_node": self.client_node,
                "device_line_rate_gbps": self.device_line_rate_gbps, "rank_line_rate_gbps": self.rank_line_rate_gbps,
                "command": self.command}


@dataclass(frozen=True, kw_only=True)
class ProbeReport:
    namespace: str
    image: str
    bandwidth: BandwidthProbe
    providers: tuple[ProviderProbe, ...] = ()
    created: tuple[str, ...] = ()
    left_behind: tuple[str, ...] = ()
    worker_image: str | None = None  # the running workers' image (else the configured one)

    def worker(self, pod: str) -> ProviderProbe | None:
        return next((p for p in self.providers if p.in_worker and p.pod == pod), None)

    def checks(self, *, floor_gbps: float) -> list[Check]:
        rows = [provider_row(role, [p for p in self.providers if p.role == role], worker_image=self.worker_image)
                for role in DPD_ROLES]
        rows.append(bandwidth_row(self.bandwidth, floor_gbps=floor_gbps))
        if self.left_behind:
            pods = " ".join(self.left_behind)
            rows.append(Check(name="probe:cleanup", status="fail",
                              detail=f"probe pod(s) not deleted: {', '.join(self.left_behind)}",
                              cause=f"delete them (kubectl delete pod -n {self.namespace} {pods}); the kubelet stops "
                                    "their containers at their activeDeadlineSeconds either way"))
        return rows

    def to_json(self) -> dict[str, Any]:
        return {"image": self.image, "providers": [p.to_json() for p in self.providers],
                "bandwidth": self.bandwidth.to_json(), "created": list(self.created),
                "left_behind": list(self.left_behind)}


def provider_row(role: str, found: list[ProviderProbe], *, worker_image: str | None = None) -> Check:
    """libfabric lists efa for the role's workers: inside them, or in a probe pod of their image (a probe pod of
    another image, --probe-image, shows what its own libfabric lists on that node, not what the workers' does)."""
    name = f"probe:provider:{role}"
    if not found:
        return Check(name=name, status="warn", detail=f"nothing probed for {role}",
                     cause="no running worker and no probe pod for the role")
    detail = "; ".join(f"{p.location}: " + {"efa": f"efa provider, {len(p.fi_info.domains) if p.fi_info else 0} "
                                                   "domain(s)", "no-efa": "no efa provider",
                                            "missing": "fi_info not found", "not-run": "not run",
                                            "inconclusive": "no answer"}[p.result]
                       + (f" ({p.fi_info.error})" if p.fi_info and p.fi_info.error else "")
                       + (f" ({p.note})" if p.note else "") for p in found)
    bad = next((p for p in found if p.result == "no-efa"), None)
    if bad:
        return Check(name=name, status="fail", detail=detail,
                     cause=f"libfabric lists no efa provider {bad.location}: its libfabric lacks the EFA provider, or "
                           "no EFA device is mounted into the pod (/dev/infiniband), so NIXL's LIBFABRIC runs over "
                           "tcp; use an image with the EFA installer's libfabric and EFA device requests")
    theirs = [p for p in found if p.in_worker or worker_image is None or p.image == worker_image]
    if any(p.result == "efa" for p in theirs):  # the others did not run or could not tell: no contrary evidence
        return Check(name=name, status="pass", detail=detail)
    if any(p.result == "efa" for p in found):
        return Check(name=name, status="warn", detail=detail,
                     cause=f"efa is listed only by the libfabric of the probe image, not of the workers' image "
                           f"{worker_image}: the node offers EFA, but whether the workers' libfabric has the EFA "
                           "provider was not checked (their image has no fi_info)")
    missing = next((p for p in found if p.result == "missing"), None)
    cause = (f"the image has no fi_info, so its libfabric cannot be checked: {PROBE_IMAGE_FIX}" if missing
             else next((p.note for p in found if p.note), "the probe could not run fi_info"))
    return Check(name=name, status="warn", detail=detail, cause=cause)


def bandwidth_row(bandwidth: BandwidthProbe, *, floor_gbps: float) -> Check:
    name = "probe:bandwidth"
    if bandwidth.outcome != "measured" or bandwidth.gbps is None:
        if bandwidth.outcome == "failed":
            return Check(name=name, status="fail", detail=bandwidth.detail,
                         cause="EFA traffic between the two nodes does not flow: the EFA security group must allow "
                               "all traffic to and from itself, and both nodes must be in one AZ")
        cause = {"missing": f"the image has no fi_pingpong: {PROBE_IMAGE_FIX}",
                 "timeout": "the probe pods did not finish in time (image pull, a NetworkPolicy blocking the "
                            "test's TCP control port 47592, or a hung EFA path): raise --probe-timeout"}.get(
            bandwidth.outcome, "nothing measured: run the probe where EFA devices are free (a node of each group "
                               "that does not serve, or from 'hpdpd rollout promote' before the new generation "
                               "takes traffic)")
        return Check(name=name, status="warn", detail=bandwidth.detail, cause=bandwidth.cause or cause)
    device, rank = bandwidth.device_line_rate_gbps, bandwidth.rank_line_rate_gbps
    fraction = bandwidth.gbps / device if device else None
    detail = f"{bandwidth.gbps:.2f} GB/s " + bandwidth.detail
    if fraction is not None and device:
        detail += (f"; {fraction:.0%} of one EFA device's {device:g} GB/s" +
                   (f" (a GPU's share is {rank:g} GB/s over {rank / device:g} device(s))" if rank else ""))
    if bandwidth.gbps < floor_gbps or (fraction is not None and fraction < FAIL_FRACTION):
        return Check(name=name, status="fail", detail=f"{detail}; fails under {FAIL_FRACTION:.0%} of the device or "
                                                      f"the {floor_gbps:g} GB/s floor",
                     cause="the EFA path between the nodes is far below line rate: not EFA (tcp), a degraded "
                           "device, or nodes outside one placement group or spine")
    if fraction is None or fraction < PASS_FRACTION:
        return Check(name=name, status="warn", detail=f"{detail}; passes from {PASS_FRACTION:.0%} of the device",
                     cause="the EFA path works but is slow: nodes in different placement groups, or a busy or "
                           "degraded device" if fraction is not None else "no line rate for the instance type")
    return Check(name=name, status="pass", detail=detail)
