"""The rows of ``hpdpd verify`` as pure functions: what each accepts as evidence, and what it refuses."""

from __future__ import annotations

import pytest

from hyperpod_dpd.ops.efa_devices import DraInventory
from hyperpod_dpd.ops.kv_logs import FiInfo
from hyperpod_dpd.ops.metrics import Throughput
from hyperpod_dpd.ops.verify_checks import BackendEvidence, backend_check, efa_check, pod_backend, throughput_check
from hyperpod_dpd.ops.workloads import Node, Pod

LIBFABRIC = {"LMCACHE_NIXL_BACKENDS": '["LIBFABRIC"]'}
EFA_LISTED = FiInfo(exit_code=0, domains=("rdmap16s27-rdm",), fabrics=("efa",))
NO_EFA = FiInfo(exit_code=61, error="fi_getinfo: -61 (No data available)")


@pytest.mark.parametrize(("evidence", "verdict"), [
    # the provider named by NIXL's own log
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, log_provider=("efa", 32)), "pass"),
    # FI_PROVIDER=efa read inside the container, and the backend came up under that restriction
    (BackendEvidence(pod="p", effective_env={**LIBFABRIC, "FI_PROVIDER": "efa"},
                     log_backends=frozenset({"LIBFABRIC"})), "pass"),
    # libfabric lists efa inside the worker, so NIXL's plugin takes it
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, fi_info=EFA_LISTED), "pass"),
    # declared in the spec only: not the effective environment, so not proof
    (BackendEvidence(pod="p", declared_env={**LIBFABRIC, "FI_PROVIDER": "efa"},
                     log_backends=frozenset({"LIBFABRIC"})), "warn"),
    # LIBFABRIC with nothing about its provider
    (BackendEvidence(pod="p", log_backends=frozenset({"LIBFABRIC"})), "warn"),
    # fi_info missing in the image says nothing
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, fi_info=FiInfo(exit_code=127, error="fi_info not found")), "warn"),
    (BackendEvidence(pod="p", log_backends=frozenset({"UCX"})), "fail"),
    (BackendEvidence(pod="p", declared_env={"LMCACHE_NIXL_BACKENDS": '["UCX"]'}), "fail"),
    (BackendEvidence(pod="p", declared_env={**LIBFABRIC, "FI_PROVIDER": "tcp"}, log_provider=("efa", 32)), "fail"),
    (BackendEvidence(pod="p", effective_env={**LIBFABRIC, "FI_PROVIDER": "tcp;ofi_rxm"}), "fail"),
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, log_provider=("tcp", 1)), "fail"),
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, fi_info=NO_EFA), "fail"),
], ids=["nixl-log-efa", "effective-fi-provider", "fi-info-inside", "declared-only", "no-provider", "fi-info-missing",
        "ucx-log", "ucx-env", "fi-provider-tcp", "effective-tcp-rxm", "tcp-fallback-log", "fi-info-no-efa"])
def test_libfabric_passes_only_on_evidence_of_the_efa_provider(evidence: BackendEvidence, verdict: str) -> None:
    status, _, cause = pod_backend(evidence)
    assert status == verdict and (cause is None) == (verdict == "pass")


def test_one_worker_on_tcp_fails_the_row_whatever_the_others_show() -> None:
    row = backend_check([BackendEvidence(pod="a", declared_env=LIBFABRIC, log_provider=("efa", 32)),
                         BackendEvidence(pod="b", declared_env=LIBFABRIC, log_provider=("tcp", 1))])
    assert row.status == "fail" and "libfabric's tcp provider" in (row.cause or "")
    assert row.detail.startswith("a: ") and "; b: " in row.detail
    assert backend_check([]).status == "warn"


def node(name: str, efa: int) -> Node:
    return Node(name=name, labels={"topology.kubernetes.io/zone": "us-west-2a"}, allocatable_gpus=8,
                allocatable_efa=efa)


def worker(name: str, efa: int, node_name: str = "n1") -> Pod:
    return Pod(name=name, namespace="ns", role="decode", phase="Running", ready=True, node=node_name, efa=efa, gpus=8)


def test_efa_through_dra_counts_claimed_devices_of_published_nodes() -> None:
    dra = DraInventory(devices={"n1": frozenset({("n1", "pci-0"), ("n1", "pci-1")})})
    row = efa_check("decode", [worker("d", 0)], {"n1": node("n1", 0)}, 32, dra=dra, dra_held={"d": 2})
    assert row.status == "pass" and "d: 2 EFA device(s) through DRA claims (node n1 2 published" in row.detail
    bare = efa_check("decode", [worker("d", 0)], {"n1": node("n1", 0)}, 32)
    assert bare.status == "fail" and "the EFA DRA driver (dra.net) publishes no EFA device" in (bare.cause or "")


def test_the_throughput_row_judges_per_rank_and_names_a_lower_bound() -> None:
    measured = Throughput(bytes=40e9, seconds=1.0, source="prometheus: LMCache store", lower_bound=True)
    row = throughput_check(measured, floor_gbps=1.0, warn_fraction=0.1, rank_line_rate=50.0, window_seconds=300,
                           sources="")
    assert row.status == "pass" and row.detail.startswith("40.00 GB/s per rank (80.0% of the 50 GB/s per-GPU share")
    assert "a lower bound" in row.detail
    slow = throughput_check(Throughput(bytes=4e9, seconds=1.0, source="prefill log"), floor_gbps=1.0,
                            warn_fraction=0.1, rank_line_rate=50.0, window_seconds=300, sources="")
    assert slow.status == "warn" and "under 10% of line rate" in slow.detail
    none = throughput_check(None, floor_gbps=1.0, warn_fraction=0.1, rank_line_rate=50.0, window_seconds=60,
                            sources="connector LMCacheConnectorV1")
    assert none.status == "warn" and "(connector LMCacheConnectorV1)" in none.detail
