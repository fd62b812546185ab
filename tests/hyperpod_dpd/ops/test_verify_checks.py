"""The rows of ``hpdpd verify`` as pure functions: what each accepts as evidence, and what it refuses."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hyperpod_dpd.ops.efa_devices import DraInventory
from hyperpod_dpd.ops.kv_logs import FiInfo, LMCacheConfig, RetrieveCounts
from hyperpod_dpd.ops.metrics import Throughput
from hyperpod_dpd.ops.verify_checks import (
    BackendEvidence,
    backend_check,
    efa_check,
    node_check,
    pod_backend,
    retrieve_check,
    throughput_check,
    zone_check,
)
from hyperpod_dpd.ops.workloads import Node, Pod

LIBFABRIC = {"LMCACHE_NIXL_BACKENDS": "LIBFABRIC"}  # as LMCache 0.4.3 reads it: a comma-separated list
EFA_LISTED = FiInfo(exit_code=0, domains=("rdmap16s27-rdm",), fabrics=("efa",))
NO_EFA = FiInfo(exit_code=61, error="fi_getinfo: -61 (No data available)")


@pytest.mark.parametrize(("evidence", "verdict"), [
    # the provider named by NIXL's own log
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, log_provider=("efa", 32)), "pass"),
    # FI_PROVIDER=efa read inside the container, and the backend came up under that restriction
    (BackendEvidence(pod="p", effective_env={**LIBFABRIC, "FI_PROVIDER": "efa"},
                     log_backends=frozenset({"LIBFABRIC"})), "pass"),
    # libfabric lists efa inside the worker, and NIXL created LIBFABRIC: its plugin takes efa
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, log_backends=frozenset({"LIBFABRIC"}), fi_info=EFA_LISTED),
     "pass"),
    # libfabric lists efa, but nothing shows NIXL created LIBFABRIC (the variable is only what LMCache asks for)
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, fi_info=EFA_LISTED), "warn"),
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
], ids=["nixl-log-efa", "effective-fi-provider", "fi-info-inside", "fi-info-without-backend", "declared-only", "no-provider", "fi-info-missing",
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


SENDER = LMCacheConfig(enable_pd=True, pd_role="sender", transfer_channel="nixl", nixl_backends=("LIBFABRIC",),
                       fields=frozenset({"enable_pd", "pd_role", "transfer_channel", "nixl_backends"}))
PROVEN = {"log_backends": frozenset({"LIBFABRIC"}), "log_provider": ("efa", 32)}  # what passes on its own


@pytest.mark.parametrize(("evidence", "cause"), [
    # LMCache 0.4.3 splits the variable on commas: a JSON list is one unknown backend name, NIXL creates none
    (BackendEvidence(pod="p", declared_env={"LMCACHE_NIXL_BACKENDS": '["LIBFABRIC"]'}, fi_info=EFA_LISTED),
     "none of them LIBFABRIC"),
    # LMCache's own configuration names no backends: its NixlAgentWrapper asks NIXL for UCX
    (BackendEvidence(pod="p", role="prefill", lmcache=(replace(SENDER, nixl_backends=None),),
                     effective_env={"FI_PROVIDER": "efa"}, fi_info=EFA_LISTED), "NIXL's UCX backend"),
    # a decode pod whose LMCache runs as the sender: wrong roles
    (BackendEvidence(pod="p", role="decode", lmcache=(SENDER,), **PROVEN), "pd_role sender, not receiver"),
    # LMCache's PD backend is off: the stores are local
    (BackendEvidence(pod="p", role="prefill", lmcache=(replace(SENDER, enable_pd=False),), **PROVEN),
     "PD backend is off"),
    # NIXL's libfabric registered the GPU buffer as system memory: no GPUDirect RDMA
    (BackendEvidence(pod="p", role="prefill", lmcache=(SENDER,), no_gpu_direct=True, **PROVEN), "GPUDirect RDMA"),
    # NIXL had no plugin of the name it was given
    (BackendEvidence(pod="p", declared_env=LIBFABRIC, missing_plugins=frozenset({"LIBFABRIC"}), fi_info=EFA_LISTED),
     "no plugin for backend(s) LIBFABRIC"),
    # FI_PROVIDER excluding efa
    (BackendEvidence(pod="p", effective_env={**LIBFABRIC, "FI_PROVIDER": "^efa"}, log_backends=frozenset({"LIBFABRIC"})),
     "all but efa"),
], ids=["json-list-variable", "lmcache-default-ucx", "wrong-role", "pd-off", "no-gpudirect", "missing-plugin",
        "efa-excluded"])
def test_what_the_stack_says_against_efa_fails_the_worker(evidence: BackendEvidence, cause: str) -> None:
    # GIVEN a worker whose own configuration or NIXL's lines show the KV cannot move over EFA with GPUDirect RDMA
    # WHEN its transfer backend is judged
    status, _, why = pod_backend(evidence)
    # THEN it fails, naming why, whatever else proves libfabric on efa
    assert status == "fail" and cause in (why or "")


def test_the_healthy_lmcache_configuration_passes_with_nixl_evidence() -> None:
    # GIVEN LMCache's configuration as the sender on LIBFABRIC, and NIXL's log of 32 EFA devices
    status, seen, _ = pod_backend(BackendEvidence(pod="p", role="prefill", lmcache=(SENDER,), **PROVEN))
    # THEN it passes and says what it read
    assert status == "pass" and "LMCache config: enable_pd True, pd_role sender, nixl_backends ['LIBFABRIC']" in seen


def test_a_log_that_could_not_be_read_warns_naming_the_answer() -> None:
    status, seen, _ = pod_backend(BackendEvidence(pod="p", log_error="404 Not Found: pods \"p\" not found"))
    assert status == "warn" and seen.startswith("log not read (404 Not Found")


def test_store_lines_faster_than_the_fabric_cannot_pass() -> None:
    # GIVEN a figure above the floor, some of whose store lines are faster than a GPU's share of EFA
    measured = Throughput(bytes=40e9, seconds=1.0, source="prefill log", overstated_lines=3)
    row = throughput_check(measured, floor_gbps=1.0, warn_fraction=0.1, rank_line_rate=50.0, window_seconds=300,
                           sources="prefill log")
    # THEN the row warns: those lines count chunks the PD backend did not send
    assert row.status == "warn" and "3 store line(s) faster" in row.detail and "does not hold yet" in (row.cause or "")


def test_store_lines_not_tied_to_the_pd_backend_cannot_pass() -> None:
    measured = Throughput(bytes=40e9, seconds=1.0, source="prefill log")
    row = throughput_check(measured, floor_gbps=1.0, warn_fraction=0.1, rank_line_rate=50.0, window_seconds=300,
                           sources="prefill log", unproven="p: no LMCache configuration line")
    assert row.status == "warn" and row.cause == "p: no LMCache configuration line"


@pytest.mark.parametrize(("counts", "stored", "status", "cause"), [
    (RetrieveCounts(full=8), 8, "pass", None),
    (RetrieveCounts(misses=8), 8, "fail", "recomputed the prefill"),
    (RetrieveCounts(), 8, "warn", "logged no retrieve"),
    (RetrieveCounts(), 0, "warn", "no disaggregated request"),
    (RetrieveCounts(full=6, misses=2), 8, "warn", "recomputed part"),
    (RetrieveCounts(full=8, buffer_full=3), 8, "warn", "PD buffer filled"),
], ids=["all-hits", "all-misses", "stored-but-no-retrieve", "nothing-sent", "some-misses", "buffer-full"])
def test_the_decoder_must_load_the_kv_it_was_sent(counts: RetrieveCounts, stored: int, status: str,
                                                  cause: str | None) -> None:
    # GIVEN the decoder's retrieve lines and the prefiller's store lines of one window
    row = retrieve_check(counts, stored_lines=stored, window_seconds=300)
    # THEN it passes only when every retrieve loaded all it needed
    assert row.name == "kv-retrieve" and row.status == status and (cause or "") in (row.cause or "")
    assert retrieve_check(None, stored_lines=8, window_seconds=300).status == "warn"


def test_placement_rows_do_not_pass_without_both_roles() -> None:
    # GIVEN a running decoder and no running prefiller
    pods = [worker("d", 32)]
    cluster = {"n1": node("n1", 32)}
    # WHEN placement is judged
    rows = [zone_check(pods, cluster), node_check(pods), zone_check([], cluster), node_check([])]
    # THEN neither AZ nor node separation passes on one role (or none): nothing was compared
    assert [r.status for r in rows] == ["warn"] * 4 and "no running prefill pod" in rows[0].detail


def test_nixl_creating_libfabric_outranks_how_the_variable_would_be_read() -> None:
    # GIVEN a worker whose spec declares the backends as a JSON list (one unknown name to LMCache 0.4.3), and whose
    # log shows NIXL created LIBFABRIC on 32 efa devices (its image's LMCache read the variable another way)
    evidence = BackendEvidence(pod="p", declared_env={"LMCACHE_NIXL_BACKENDS": '["LIBFABRIC"]'},
                               log_backends=frozenset({"LIBFABRIC"}), log_provider=("efa", 32))
    # WHEN the transfer backend is judged
    check = backend_check([evidence])
    # THEN what NIXL created decides: libfabric on efa passes
    assert check.status == "pass"
