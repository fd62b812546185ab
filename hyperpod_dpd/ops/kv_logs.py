"""What the serving stack's own log lines say about the KV transfer, parsed line by line (no cluster access here).

Every pattern cites the upstream code that prints it. Versions read:

- LMCache 0.4.3, what both documented DPD images ship: the wheel ``lmcache-0.4.3-cp312-cp312-manylinux_2_27_x86_64.
  manylinux_2_28_x86_64.whl`` from PyPI (sha256 f7bc3c2d4eb8eab2c18f7bdb2142cd5dfc64dcae4185d0a433394dd1be7a002b),
  ``lmcache/v1/cache_engine.py``; LMCache 0.3.3 (wheel sha256 9542c921...bb52a0) for the older wording; and
  LMCache/LMCache@000620e ``lmcache/v1/cache_engine.py`` (newer: a ``kv_group`` inside the prefix).
- NIXL 1.0.1 (``nixl-cu12`` wheel, sha256 0143bc14...65e06a4, and ai-dynamo/nixl tag v1.0.1 @ d196ff6), the NIXL the
  DPD images install (aws/deep-learning-containers@287918c ``docker/vllm/Dockerfile.amzn2023``: ``nixl>=1.0.1``).
- libfabric's ``fi_info`` and ``fi_pingpong`` (ofiwg/libfabric@af8ddbe ``util/info.c``, ``util/pingpong.c``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

GIB = 1024**3  # LMCache prints sizes as bytes / 1024**3 whether it writes "gb" or "GB"

# LMCache's store on the prefiller, one line per TP rank and request:
#   0.4.3 store():       "[req_id=%s] Stored %d out of total %d tokens. size: %.4f GB, cost %.4f ms, throughput: %.4f
#                         GB/s; offload_time: %.4f ms, put_time: %.4f ms"            (cache_engine.py:553)
#   0.4.3 store_layer(): "[req_id=%s] Stored %d out of total %d tokens. size: %.4f GB, cost %.4f ms, throughput: %.4f
#                         GB/s"                                                       (cache_engine.py:734)
#   0.3.3 store():       "Stored %d out of total %d tokens. size: %.4f gb, cost %.4f ms, throughput: %.4f GB/s;
#                         offload_time: %.4f ms, put_time: %.4f ms"                   (cache_engine.py:252)
#   @000620e:            "[req_id=%s kv_group=%s] Stored ..." (same fields as 0.4.3 store())
# put_time wraps storage_manager.batched_put, which with the PD backend is pd_backend.batched_submit_put_task: the
# remote allocation round trip and nixl_channel.batched_write, a NIXL WRITE polled until DONE (0.4.3
# lmcache/v1/storage_backend/pd_backend.py:405-466, lmcache/v1/transfer_channel/nixl_channel.py:419-458). cost also
# holds the GPU-to-buffer copy (offload_time); store_layer's cost spans the whole layer-by-layer forward pass.
STORED = re.compile(
    r"Stored (\d+) out of total (\d+) tokens\.\s*size: ([\d.]+) gb, cost ([\d.]+) ms"
    r"(?:, throughput: [\d.]+ gb/s)?(?:; offload_time: ([\d.]+) ms, put_time: ([\d.]+) ms)?", re.IGNORECASE)

# LMCache's retrieve on the decoder (0.4.3 cache_engine.py:887): "[req_id=%s] Retrieved %d out of %d required tokens
# (from %d total tokens). size: %.4f gb, cost %.4f ms, throughput: %.4f GB/s;". With the PD backend the prefiller has
# already written the KV into the decoder's buffer; this times the copy from that local buffer into vLLM's paged KV.
RETRIEVED = re.compile(r"Retrieved (\d+) out of (\d+) required tokens.*?size: ([\d.]+) gb, cost ([\d.]+) ms",
                       re.IGNORECASE)
# The same line for counting hits and misses (any wording): "Retrieved 0 out of M" is a retrieve that found none of
# the KV the lookup promised, so the decoder recomputes (DPD troubleshooting). A lookup that finds nothing logs no
# line at all: the adapter retrieves only requests whose load_spec can load (0.4.3
# lmcache/integration/vllm/vllm_v1_adapter.py start_load_kv, :792-793).
RETRIEVE_COUNT = re.compile(r"Retrieved (\d+) out of (\d+) required tokens")
# The decoder's PD buffer is full (0.4.3 lmcache/v1/storage_backend/pd_backend.py:540, _allocate_and_put).
BUFFER_FULL = "Failed to allocate memory object, retrying"

# LMCache's effective configuration, printed by every LMCacheEngine it creates (0.4.3 cache_engine.py:104:
# logger.info(f"Creating LMCacheEngine with config: {config}")), as the dict of its fields (config_base.py:433-435
# __str__). The fields read (0.4.3 lmcache/v1/config.py:189-221): enable_pd (bool), pd_role ('sender' on the
# prefiller, 'receiver' on the decoder), transfer_channel, nixl_backends (a list, or None: NixlAgentWrapper then asks
# NIXL for ["UCX"], lmcache/v1/transfer_channel/nixl_channel.py:610-612). Values as Python's repr prints them.
LMCACHE_CONFIG_LINE = "Creating LMCacheEngine with config: {"
CONFIG_FIELDS = {name: re.compile(rf"'{name}': ({pattern})") for name, pattern in (
    ("enable_pd", r"True|False"), ("pd_role", r"None|'[^']*'"), ("transfer_channel", r"None|'[^']*'"),
    ("nixl_backends", r"None|\[(?:\s*(?:'[^']*'|\"[^\"]*\")\s*,?)*\]"))}  # a list of str reprs

# NIXL's Python agent, after the backend was created (nixl_cu12 1.0.1 _api.py:361, ai-dynamo/nixl@8770b65
# src/api/python/_api.py:405): logger.info("Backend %s was instantiated", backend).
BACKEND_LINE = re.compile(r"Backend (\w+) was instantiated")
# NIXL's libfabric plugin, which takes the first provider of cxi, efa, tcp, sockets that fi_getinfo lists
# (src/utils/libfabric/libfabric_common.cpp:101-108 @8770b65): NIXL_INFO lines of libfabric_topology.cpp:130-134 at
# v1.0.1, printed only with NIXL_LOG_LEVEL=INFO (the C++ default is WARN, src/utils/common/nixl_log.cpp:36).
DISCOVERED_EFA = re.compile(r"Discovered (\d+) EFA devices")
DISCOVERED_TCP = re.compile(r"Discovered (\d+) (tcp|sockets) devices \(TCP fallback\)")
# NIXL's Python agent, for a backend name it has no plugin for (v1.0.1 _api.py:221-224, @8770b65 :251-254; WARNING,
# shown at its default INFO): the backend is not created, whatever LMCache asked for.
MISSING_PLUGIN = re.compile(r"Skipping backend registration (\S+) due to the missing plugin")
# NIXL's libfabric rails when the provider lacks FI_HMEM, so GPU memory is registered as system memory: no GPUDirect
# RDMA (v1.0.1 src/utils/libfabric/libfabric_rail.cpp:1344, NIXL_WARN, shown at the C++ default WARN; and :456,
# NIXL_INFO; @8770b65 :1565 and :463).
NO_HMEM = ("VRAM memory requested but provider does not support FI_HMEM",
           "Using provider without FI_HMEM support for rail")

# fi_info's short listing (util/info.c print_short_info): "provider: %s" then "    fabric: %s", "    domain: %s".
# On failure it prints "fi_getinfo: %d (%s)" and exits with -ret (61 for -FI_ENODATA, "No data available").
FI_INFO_ENTRY = re.compile(r"^provider: (\S+)\s*\n\s+fabric: (\S+)\s*\n\s+domain: (\S+)", re.MULTILINE)
FI_GETINFO_ERROR = re.compile(r"fi_getinfo: (-?\d+) \(([^)]*)\)")
# A shell's answer for a command it cannot find, with POSIX's exit status 127 (dash "sh: 1: fi_info: not found", bash
# "fi_info: command not found"); the container runtime's when exec names a binary the image lacks.
NOT_FOUND = re.compile(r"fi_\w+: (?:command )?not found|executable file not found", re.IGNORECASE)
COMMAND_NOT_FOUND = 127

# fi_pingpong's result table (util/pingpong.c show_perf, and fabtests' common/shared.c show_perf): a header naming
# "MB/sec", then one row per size; MB/sec is bytes / elapsed microseconds, i.e. 10^6 bytes per second.
PERF_HEADER = "MB/sec"


@dataclass(frozen=True, kw_only=True)
class StoreTotals:
    """LMCache store lines summed over TP ranks: bytes and the time that contains the NIXL write."""

    lines: int
    bytes: float
    seconds: float
    put_time_lines: int  # lines that carried put_time; the others contribute their whole cost (a lower bound)
    # lines faster than the ceiling: their size counts chunks that were not written. The PD backend sends only the
    # chunks the decoder does not hold yet (0.4.3 pd_backend.py:436-445, already_sent_indexes), while the line's size
    # is every chunk of the store (cache_engine.py:495, tot_kv_size)
    overstated_lines: int = 0

    @property
    def lower_bound(self) -> bool:
        return self.put_time_lines < self.lines


def store_totals(texts: Iterable[str], *, ceiling_gbps: float | None = None) -> StoreTotals | None:
    """Σ size ÷ Σ put_time over the prefillers' store lines (cost where put_time is missing); None without any.
    ``ceiling_gbps``: the most one rank's write can reach (GB/s); a line above it is counted as overstated."""
    lines = put_lines = over = 0
    moved = took = 0.0
    for text in texts:
        for found in STORED.finditer(text):
            size, cost, put = float(found.group(3)), float(found.group(4)), found.group(6)
            if int(found.group(1)) <= 0 or size <= 0:
                continue
            lines += 1
            moved += size * GIB
            seconds = float(put) / 1000 if put is not None and float(put) > 0 else cost / 1000
            put_lines += 1 if put is not None and float(put) > 0 else 0
            took += seconds
            if ceiling_gbps and (seconds <= 0 or size * GIB / seconds / 1e9 > ceiling_gbps):
                over += 1
    if not lines or took <= 0:
        return None
    return StoreTotals(lines=lines, bytes=moved, seconds=took, put_time_lines=put_lines, overstated_lines=over)


@dataclass(frozen=True, kw_only=True)
class RetrieveCounts:
    """The decoder's retrieve lines: full hits, partial ones, misses (Retrieved 0), and buffer-full retries."""

    full: int = 0
    partial: int = 0
    misses: int = 0
    buffer_full: int = 0

    @property
    def hits(self) -> int:
        return self.full + self.partial


def retrieve_counts(text: str) -> RetrieveCounts:
    full = partial = misses = 0
    for found in RETRIEVE_COUNT.finditer(text):
        got, wanted = int(found.group(1)), int(found.group(2))
        if wanted <= 0:
            continue
        if got <= 0:
            misses += 1
        elif got < wanted:
            partial += 1
        else:
            full += 1
    return RetrieveCounts(full=full, partial=partial, misses=misses, buffer_full=text.count(BUFFER_FULL))


@dataclass(frozen=True, kw_only=True)
class LMCacheConfig:
    """The fields of LMCache's effective configuration that say how the KV moves (None: not in the line)."""

    enable_pd: bool | None = None
    pd_role: str | None = None
    transfer_channel: str | None = None
    nixl_backends: tuple[str, ...] | None = None  # None: LMCache's None (NIXL is then asked for UCX), or not read
    fields: frozenset[str] = frozenset()  # the fields the line carried


def lmcache_configs(text: str) -> list[LMCacheConfig]:
    """Every ``Creating LMCacheEngine with config`` line of a log (one per engine LMCache created)."""
    found = []
    for line in text.splitlines():
        at = line.find(LMCACHE_CONFIG_LINE)
        if at < 0:
            continue
        body = line[at + len(LMCACHE_CONFIG_LINE) - 1:]
        values: dict[str, object] = {}
        for name, pattern in CONFIG_FIELDS.items():
            match = pattern.search(body)
            if match:
                try:
                    values[name] = ast.literal_eval(match.group(1))
                except (ValueError, SyntaxError):
                    continue
        enable, role, channel, backends = (values.get(n) for n in CONFIG_FIELDS)
        found.append(LMCacheConfig(
            enable_pd=enable if isinstance(enable, bool) else None, pd_role=role if isinstance(role, str) else None,
            transfer_channel=channel if isinstance(channel, str) else None,
            nixl_backends=tuple(str(b) for b in backends) if isinstance(backends, list) else None,
            fields=frozenset(values)))
    return found


def missing_plugins(text: str) -> set[str]:
    """Backend names NIXL skipped because it has no plugin of that name."""
    return set(MISSING_PLUGIN.findall(text))


def no_gpu_direct(text: str) -> bool:
    """NIXL's libfabric rails registered GPU memory as system memory (the provider has no FI_HMEM)."""
    return any(line in text for line in NO_HMEM)


@dataclass(frozen=True, kw_only=True)
class DecoderLoad:
    """The decoder's KV load: LMCache copying the KV the prefiller wrote into its buffer into paged KV (local)."""

    lines: int
    bytes: float
    seconds: float

    @property
    def mean_ms(self) -> float:
        return self.seconds / self.lines * 1000 if self.lines else 0.0

    def to_json(self) -> dict[str, float | int]:
        return {"lines": self.lines, "gib": round(self.bytes / GIB, 4), "total_ms": round(self.seconds * 1000, 3),
                "mean_ms": round(self.mean_ms, 3)}


def decoder_load(text: str) -> DecoderLoad | None:
    lines, moved, took = 0, 0.0, 0.0
    for found in RETRIEVED.finditer(text):
        if int(found.group(1)) > 0:
            lines += 1
            moved += float(found.group(3)) * GIB
            took += float(found.group(4)) / 1000
    return DecoderLoad(lines=lines, bytes=moved, seconds=took) if lines else None


def backends(text: str) -> set[str]:
    """NIXL backends the log says were instantiated (``LIBFABRIC``, ``UCX``)."""
    return {name.upper() for name in BACKEND_LINE.findall(text)}


def nixl_provider(text: str) -> tuple[str, int] | None:
    """The libfabric provider NIXL's plugin discovered and its device count, when NIXL logs at INFO."""
    tcp = DISCOVERED_TCP.findall(text)
    if tcp:
        return tcp[-1][1], int(tcp[-1][0])
    efa = DISCOVERED_EFA.findall(text)
    if efa:
        return "efa", int(efa[-1])
    return None


@dataclass(frozen=True, kw_only=True)
class FiInfo:
    """``fi_info -p efa`` run somewhere: what it listed, or why not."""

    exit_code: int  # -1: it did not finish
    domains: tuple[str, ...] = ()  # efa domains (rdmap...) listed
    fabrics: tuple[str, ...] = ()
    error: str = ""

    @property
    def missing(self) -> bool:
        return self.exit_code == COMMAND_NOT_FOUND

    @property
    def efa(self) -> bool:
        return self.exit_code == 0 and bool(self.domains)

    @property
    def inconclusive(self) -> bool:
        """It could not say: fi_info is missing, or it did not finish (exit code -1)."""
        return self.missing or self.exit_code < 0


def fi_info(output: str, exit_code: int) -> FiInfo:
    entries = [m for m in FI_INFO_ENTRY.finditer(output) if m.group(1) == "efa"]
    domains = tuple(dict.fromkeys(m.group(3) for m in entries))
    fabrics = tuple(dict.fromkeys(m.group(2) for m in entries))
    error = ""
    failed = FI_GETINFO_ERROR.search(output)
    if failed:
        error = f"fi_getinfo: {failed.group(1)} ({failed.group(2)})"
    elif exit_code == COMMAND_NOT_FOUND or (exit_code and NOT_FOUND.search(output)):
        error = "fi_info not found"
        exit_code = COMMAND_NOT_FOUND
    elif exit_code and not domains:
        error = " ".join(output.split())[-200:] or f"exit code {exit_code}"
    return FiInfo(exit_code=exit_code, domains=domains, fabrics=fabrics, error=error)


def perf_mb_per_second(output: str) -> float | None:
    """The MB/sec of the last result row of fi_pingpong (or a fabtests benchmark); None without a result table."""
    column: int | None = None
    best: float | None = None
    for line in output.splitlines():
        cells = line.split()
        if PERF_HEADER in cells:
            column = cells.index(PERF_HEADER)
            continue
        if column is not None and len(cells) > column:
            try:
                best = float(cells[column])
            except ValueError:
                continue
    return best
