"""The serving stack's log lines, in each wording its releases print, parsed into what verify and the probe judge."""

from __future__ import annotations

import pytest

from hyperpod_dpd.ops.kv_logs import (
    GIB,
    backends,
    decoder_load,
    fi_info,
    lmcache_configs,
    missing_plugins,
    nixl_provider,
    no_gpu_direct,
    perf_mb_per_second,
    retrieve_counts,
    store_totals,
)
from tests.fakes import dpd_cluster

# LMCache 0.4.3 store() and store_layer(), 0.3.3 store(), and @000620e's kv_group prefix (hyperpod_dpd.ops.kv_logs).
V043 = ("[req_id=cmpl-9] Stored 4096 out of total 4096 tokens. size: 0.1562 GB, cost 7.0000 ms, throughput: 22.3 GB/s; "
        "offload_time: 2.0000 ms, put_time: 5.0000 ms")
V043_LAYERWISE = "[req_id=cmpl-9] Stored 4096 out of total 4096 tokens. size: 0.1562 GB, cost 40.0000 ms, throughput: 3.9 GB/s"
V033 = ("Stored 4096 out of total 4096 tokens. size: 0.1562 gb, cost 7.0000 ms, throughput: 22.3 GB/s; "
        "offload_time: 2.0000 ms, put_time: 5.0000 ms")
KV_GROUP = V043.replace("[req_id=cmpl-9]", "[req_id=cmpl-9 kv_group=0]")


@pytest.mark.parametrize("line", [V043, V033, KV_GROUP], ids=["0.4.3", "0.3.3", "kv-group"])
def test_store_lines_of_every_release_give_size_over_put_time(line: str) -> None:
    # WHEN the prefiller's store lines are summed over two ranks
    totals = store_totals([f"{line}\n{line}\n"])
    # THEN the bytes are GiB (LMCache divides by 1024**3) and the time is put_time, which holds the NIXL write
    assert totals is not None and totals.lines == 2 and not totals.lower_bound
    assert totals.bytes == pytest.approx(2 * 0.1562 * GIB) and totals.seconds == pytest.approx(0.010)


def test_a_store_line_without_put_time_counts_its_whole_cost_as_a_lower_bound() -> None:
    totals = store_totals([V043_LAYERWISE, V043])
    assert totals is not None and totals.lower_bound and totals.put_time_lines == 1
    assert totals.seconds == pytest.approx(0.040 + 0.005)


def test_stores_of_nothing_are_not_a_measurement() -> None:
    assert store_totals(["Stored 0 out of total 4096 tokens. size: 0.0000 GB, cost 0.1000 ms"]) is None
    assert store_totals(["no LMCache line here"]) is None


def test_the_decoder_retrieve_is_its_load_time() -> None:
    load = decoder_load(dpd_cluster.RETRIEVED + "\nRetrieved 0 out of 6035 required tokens. size: 0.0 gb, cost 1 ms")
    assert load is not None and load.lines == 1 and load.mean_ms == pytest.approx(25.0)
    assert load.to_json() == {"lines": 1, "gib": 0.2344, "total_ms": 25.0, "mean_ms": 25.0}


def test_nixl_lines_name_the_backend_and_the_provider() -> None:
    assert backends(dpd_cluster.STARTUP + "NIXL INFO _api.py:361 Backend UCX was instantiated") == {"LIBFABRIC", "UCX"}
    assert nixl_provider(dpd_cluster.NIXL_EFA) == ("efa", 32)
    assert nixl_provider(dpd_cluster.NIXL_TCP) == ("tcp", 1)
    assert nixl_provider("Discovered 1 sockets devices (TCP fallback)") == ("sockets", 1)
    assert nixl_provider(dpd_cluster.STARTUP) is None


def test_fi_info_lists_efa_domains_or_says_why_not() -> None:
    listed = fi_info(dpd_cluster.FI_INFO_EFA, 0)
    assert listed.efa and listed.domains == ("rdmap16s27-rdm", "rdmap17s27-rdm", "rdmap18s27-rdm", "rdmap19s27-rdm")
    assert listed.fabrics == ("efa",)
    none = fi_info(dpd_cluster.FI_INFO_NONE, 61)
    assert not none.efa and not none.inconclusive and none.error == "fi_getinfo: -61 (No data available)"
    missing = fi_info(dpd_cluster.NOT_FOUND, 127)
    assert missing.missing and missing.inconclusive and missing.error == "fi_info not found"
    assert fi_info("provider: tcp\n    fabric: 10.0.0.0/16\n    domain: eth0\n", 0).domains == ()
    assert fi_info("", -1).inconclusive


def test_the_result_table_gives_mb_per_second() -> None:
    assert perf_mb_per_second(dpd_cluster.pingpong(11500.0)) == 11500.0
    fabtests = ("bytes   iters   total       time     MB/sec    usec/xfer   Mxfers/sec\n"
                "4m      1k      4g          0.36s  11650.12       360.04         0.00\n")
    assert perf_mb_per_second(fabtests) == 11650.12
    assert perf_mb_per_second("fi_pingpong: failed to connect: Connection refused") is None


def test_lmcache_prints_its_effective_configuration_per_engine() -> None:
    # GIVEN the decoder's engine line, and one whose nixl_backends LMCache took from '["LIBFABRIC"]' (one name)
    text = dpd_cluster.lmcache_config("receiver") + dpd_cluster.lmcache_config(
        "sender", backends="['[\"LIBFABRIC\"]']")
    # WHEN it is read
    first, second = lmcache_configs(text)
    # THEN the fields that say how the KV moves are LMCache's own values
    assert (first.enable_pd, first.pd_role, first.transfer_channel, first.nixl_backends) == (
        True, "receiver", "nixl", ("LIBFABRIC",))
    assert second.pd_role == "sender" and second.nixl_backends == ('["LIBFABRIC"]',)
    unset = lmcache_configs(dpd_cluster.lmcache_config(backends="None"))[0]
    assert unset.nixl_backends is None and "nixl_backends" in unset.fields
    assert lmcache_configs("LMCache INFO: Stored 0 out of total 0 tokens") == []


def test_nixl_lines_that_rule_out_libfabric_on_gpu_memory() -> None:
    # NIXL 1.0.1's agent (_api.py:222) and libfabric rails (libfabric_rail.cpp:1344, :456), as they print
    skipped = "2026-12-01 21:55:01 NIXL WARNING _api.py:222 Skipping backend registration [\"LIBFABRIC\"] due to the " \
              "missing plugin."
    assert missing_plugins(skipped) == {'["LIBFABRIC"]'}
    assert no_gpu_direct("W1201 21:55:02.1 42 libfabric_rail.cpp:1344] VRAM memory requested but provider does not "
                         "support FI_HMEM - falling back to system memory registration")
    assert no_gpu_direct("I1201 21:55:02.1 42 libfabric_rail.cpp:456] Using provider without FI_HMEM support for rail 0")
    assert not no_gpu_direct("I1201 libfabric_rail.cpp:460] Using provider with FI_HMEM support for rail 0")


def test_the_decoder_retrieve_lines_count_hits_partials_and_misses() -> None:
    text = "\n".join([dpd_cluster.RETRIEVED,
                      "[req_id=b] Retrieved 0 out of 6035 required tokens (from 6035 total tokens). size: 0.0 gb, cost 1 ms",
                      "[req_id=c] Retrieved 4096 out of 6035 required tokens (from 6035 total tokens). size: 0.1 gb",
                      "Failed to allocate memory object, retrying..."])
    found = retrieve_counts(text)
    assert (found.full, found.partial, found.misses, found.buffer_full) == (1, 1, 1, 1) and found.hits == 2


def test_a_store_line_faster_than_the_ceiling_is_counted_as_overstated() -> None:
    # GIVEN one store line at 0.1562 GiB in 5 ms (33.5 GB/s) and one whose chunks the decoder held (0.2 ms put)
    skipped = V043.replace("put_time: 5.0000 ms", "put_time: 0.2000 ms")
    totals = store_totals([V043, skipped], ceiling_gbps=50.0)
    # THEN the second is counted as overstating the fabric (838 GB/s is no rank's write)
    assert totals is not None and totals.overstated_lines == 1
    assert store_totals([V043]).overstated_lines == 0  # type: ignore[union-attr]
