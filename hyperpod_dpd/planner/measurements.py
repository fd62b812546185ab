"""Published measurements the planner is calibrated on or checked against, and its prediction for each.

Every row names its source and what was measured. ``role`` says whether the row fixed a calibration constant
(``calibration``: its error is near zero by construction) or was left out of every fit (``held-out``: its error is
the model's real error). ``bench/calibration.py`` (``make bench``) prints the table; tests bound the held-out errors.

Sources:

* DYNAMO: NVIDIA Dynamo, "Disaggregated Inference Communication Guide" (ai-dynamo/dynamo
  docs/kubernetes/disagg-communication-guide.md, "Performance Expectations"): Llama-3.1-8B-Instruct BF16 on AWS
  p5.48xlarge, one H100 per worker, 4 EFA interfaces, NIXL + libfabric + GDRCopy, OSL 50, concurrency 10, one
  aggregated worker against one prefill and one decode worker (vLLM NixlConnector).
* NIM: NVIDIA NIM 1.8.0, Llama-3.3-70B-Instruct FP8 TP2 on 2 x H100 80GB (TensorRT-LLM engine; FP8 KV cache assumed),
  one aggregated engine, AIPerf at fixed concurrency (``published.py`` names the page, its checked copy and the rule
  that chose the rows).
* NIXLBENCH: ai-dynamo/nixl pull request #1647, nixlbench UCX backend, 16 MiB blocks, 341 of 400 Gbit/s.
* VLLM_CI, DATACRUNCH: vLLM's nightly latency tests on H100 and H200 and SGLang's open-loop Llama-3.3-70B and
  Llama-3.1-405B runs on H200 (``published.py`` names the builds, files and commits).
* TRANSFERENGINE: Licker et al., "RDMA Point-to-Point Communication for LLM Systems" (arXiv 2510.27656, MLSys'26):
  400 Gbit/s peak per GPU on AWS EFA.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, partial

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.planner import published
from hyperpod_dpd.planner.calibration import (
    DEFAULT_CALIBRATION,
    DYNAMO_NIXL,
    MOONCAKE_EFA,
    NIM_TRTLLM,
    SGLANG,
    Calibration,
)
from hyperpod_dpd.planner.formulas import efa_bytes_per_s, rank_line_rate, rdma_rank_bytes_per_s
from hyperpod_dpd.planner.serving import Colocated, Disaggregated, Point
from hyperpod_dpd.planner.workload import LengthDistribution, Workload

P5 = instance("ml.p5.48xlarge")
P5EN = instance("ml.p5en.48xlarge")
P5E = instance("ml.p5e.48xlarge")  # H200, as in TensorRT-LLM's DGX H200 rows
_GPU_NODES = {"H100": P5, "H200": P5E, "B200": instance("ml.p6-b200.48xlarge")}
OFFLINE_IN_FLIGHT = 2048  # requests the offline runs keep in flight; the KV cache binds first on every row [?]
UNLOADED = 1e-6  # requests per second: an idle system (unqueued TTFT)


@dataclass(frozen=True)
class Measurement:
    key: str
    source: str
    what: str
    published: float
    unit: str  # "ms", "tok/s", "Gbit/s", "%" (relative changes: the error is in percentage points)
    role: str  # "calibration" or "held-out"
    fits: str = ""  # the calibration constant this row fixed
    gpu: str = ""  # "H100", "H200", ... (the bucket the held-out bounds are kept per)
    metric: str = ""  # "ttft", "tpot", "throughput", "bandwidth" or "change"


@dataclass(frozen=True)
class Row:
    measurement: Measurement
    predicted: float

    @property
    def error(self) -> float:
        """Relative error (predicted / published - 1), or the difference in percentage points for % rows."""
        if self.measurement.unit == "%":
            return self.predicted - self.measurement.published
        return self.predicted / self.measurement.published - 1


def _dynamo(isl: int, calibration: Calibration) -> tuple[Point, Point, Point, Point]:
    """(aggregated, disaggregated) at concurrency 10, then both unloaded."""
    workload = Workload(inputs=LengthDistribution.fixed(isl), outputs=LengthDistribution.fixed(50),
                        concurrency=(10,))
    model = MODELS["Llama-3.1-8B"]
    aggregated = Colocated(model=model, instance=P5, tensor_parallel=1, workload=workload, nodes=1,
                           calibration=calibration)
    dpd = Disaggregated(model=model, instance=P5, tensor_parallel=1, workload=workload, prefill=1, decode=1,
                        threshold=0, pd_buffer_bytes=0, calibration=calibration.with_overrides(**DYNAMO_NIXL))
    return (aggregated.at_concurrency(10), dpd.at_concurrency(10), aggregated.at_rate(UNLOADED),
            dpd.at_rate(UNLOADED))


# AIPerf sends chat completions: Llama 3.x's chat template wraps every prompt in its system block (emitted even
# without a system message: "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024") and the user and
# assistant headers (meta-llama/Llama-3.3-70B-Instruct tokenizer_config.json, chat_template). Counted by hand under the
# tokenizer's splitting (special tokens, words, numbers in runs of at most three digits): about 34 tokens.
LLAMA3_CHAT_TEMPLATE_TOKENS = 34


@cache
def _nim(inputs: int, outputs: int, users: int, calibration: Calibration) -> Point:
    """A NIM row: AIPerf's users start together with fixed lengths, so the engine is stepped (``lockstep``)."""
    model = MODELS["Llama-3.3-70B"].with_precision(weights="fp8", kv="fp8")
    workload = Workload(inputs=LengthDistribution.fixed(inputs + LLAMA3_CHAT_TEMPLATE_TOKENS),
                        outputs=LengthDistribution.fixed(outputs), concurrency=(users,), start="together")
    return Colocated(model=model, instance=P5, tensor_parallel=2, nodes=1, workload=workload,
                     calibration=calibration.with_overrides(**NIM_TRTLLM)).at_concurrency(users)


@cache
def _offline(row: published.Offline, calibration: Calibration) -> float:
    model = MODELS[row.model].with_precision(weights=row.weights, kv="fp8")
    workload = Workload(inputs=LengthDistribution.fixed(row.isl), outputs=LengthDistribution.fixed(row.osl),
                        concurrency=(OFFLINE_IN_FLIGHT,), offline=True)
    engine = calibration.with_overrides(max_num_seqs=OFFLINE_IN_FLIGHT)
    point = Colocated(model=model, instance=_GPU_NODES[row.gpu], tensor_parallel=row.tp, nodes=1,
                      workload=workload, calibration=engine).at_concurrency(OFFLINE_IN_FLIGHT)
    return point.output_tokens_per_s


def _rdma(row: published.Rdma, calibration: Calibration) -> float:
    node = instance(row.instance)
    mooncake = calibration.with_overrides(**MOONCAKE_EFA)
    return rdma_rank_bytes_per_s(instance=node, message_bytes=row.block, calibration=mooncake) * node.gpu_count / 1e9


@cache
def _latency(row: published.Latency, calibration: Calibration) -> float:
    """vLLM's latency test: ``batch`` requests in flight, each one prefill and ``osl - 1`` decode steps (ms)."""
    model = MODELS[row.model]
    workload = Workload(inputs=LengthDistribution.fixed(row.isl), outputs=LengthDistribution.fixed(row.osl),
                        concurrency=(row.batch,), offline=True)
    point = Colocated(model=model, instance=_GPU_NODES[row.gpu], tensor_parallel=row.tp, nodes=1,
                      workload=workload, calibration=calibration).at_concurrency(row.batch)
    return (point.ttft_s + (row.osl - 1) * point.tpot_s) * 1e3


# sglang bench_serving's random dataset with range ratio 0: lengths uniform on 1...1,024, as 8 equally likely bins
UNIFORM_1024 = LengthDistribution.weighted([(64 + 128 * i, 1.0) for i in range(8)])


@cache
def _online(row: published.Online, calibration: Calibration) -> Point:
    workload = Workload(inputs=UNIFORM_1024, outputs=UNIFORM_1024, request_rates=(row.rate,))
    return Colocated(model=MODELS[row.model], instance=P5E, tensor_parallel=row.tp, nodes=1, workload=workload,
                     calibration=calibration.with_overrides(**SGLANG)).at_rate(row.rate)


def _median_ttft(row: published.Online, calibration: Calibration) -> float:
    return _online(row, calibration).quantile("ttft", 0.5) * 1e3


def _median_itl(row: published.Online, calibration: Calibration) -> float:
    """The median gap between tokens (``itl_p50_ms`` in the JSON): a bare decode step at these rates."""
    return _online(row, calibration).itl_p50_s * 1e3


# The keys of the rows built from ``published``'s records (bench/commands.py finds each row's command by them)
def latency_key(r: published.Latency) -> str:
    return f"vllm-latency-{r.model.lower()}-{r.gpu.lower()}-tp{r.tp}"


def online_key(o: published.Online, quantity: str) -> str:
    """``quantity``: "ttft" or "itl". The 70B rows keep their first keys; other models name themselves."""
    tag = "" if o.model == "Llama-3.3-70B" else f"{o.model.lower()}-"
    return f"datacrunch-{tag}{quantity}-r{o.rate:g}"


def offline_key(r: published.Offline) -> str:
    return f"trtllm-{r.model.lower()}-{r.gpu.lower()}-tp{r.tp}-{r.isl}-{r.osl}"


def nim_key(r: published.Nim, quantity: str) -> str:
    """``quantity``: "ttft", "itl" or "tput". The page's input lengths are distinct, so ISL names the pair."""
    return f"nim-{quantity}-{r.isl}-c{r.users}"


def rdma_key(link: published.Rdma) -> str:
    return f"mooncake-{link.instance.split('.')[1]}-{link.block // 1024}k"


def _serving_rows() -> tuple[tuple[Measurement, Callable[[Calibration], float]], ...]:
    out: list[tuple[Measurement, Callable[[Calibration], float]]] = []
    for r in published.LATENCY:
        out.append((Measurement(latency_key(r), f"{published.VLLM_CI} build {r.build} {r.gpu} TP{r.tp} {r.model} BF16",
                                f"{r.batch} x {r.isl} in / {r.osl} out at once: batch latency (decode steps)",
                                r.ms, "ms", "held-out", gpu=r.gpu, metric="tpot"),
                    partial(_latency, r)))
    for o in published.ONLINE:
        rate = f"{o.rate:g}"
        source = f"{published.DATACRUNCH} H200 TP{o.tp} {o.model} BF16"
        fitted = o.role == "calibration"
        out.append((Measurement(online_key(o, "ttft"), source,
                                f"uniform 1-1024 in / out, {rate} req/s Poisson: median TTFT", o.ttft_ms, "ms",
                                o.role, "request_overhead_s (SGLANG)" if fitted else "", gpu="H200", metric="ttft"),
                    partial(_median_ttft, o)))
        out.append((Measurement(online_key(o, "itl"), source,
                                f"uniform 1-1024 in / out, {rate} req/s Poisson: median ITL", o.itl_ms, "ms",
                                "held-out", gpu="H200", metric="tpot"),
                    partial(_median_itl, o)))
    return tuple(out)


def _offline_rows() -> tuple[tuple[Measurement, Callable[[Calibration], float]], ...]:
    out = []
    for r in published.OFFLINE:
        fits = "overlap_loss" if r.role == "calibration" else ""
        out.append((Measurement(offline_key(r), f"{published.TRTLLM} {r.gpu} TP{r.tp} {r.model} {r.weights.upper()}",
                                f"ISL {r.isl} / OSL {r.osl} offline output throughput", r.tokens_per_s, "tok/s",
                                r.role, fits, gpu=r.gpu, metric="throughput"),
                    lambda c, r=r: _offline(r, c)))
    for link in published.RDMA:
        node = instance(link.instance)
        gpu = node.gpu.model if node.gpu else ""
        out.append((Measurement(rdma_key(link), published.MOONCAKE,
                                f"{link.instance} GPU-to-GPU write, {link.block // 1024} KiB blocks",
                                link.gbytes_per_s, "GB/s", link.role, link.fits, gpu=gpu, metric="bandwidth"),
                    lambda c, link=link: _rdma(link, c)))
    return tuple(out)


def _gain(isl: int, metric: str, calibration: Calibration) -> float:
    aggregated, dpd, _, _ = _dynamo(isl, calibration)
    return (getattr(dpd, metric) / getattr(aggregated, metric) - 1) * 100


_NIM_READS: dict[str, tuple[str, str, Callable[[published.Nim], float], Callable[[Point], float]]] = {
    "ttft": ("TTFT", "ms", lambda r: r.ttft_ms, lambda p: p.ttft_s * 1e3),
    "itl": ("ITL", "ms", lambda r: r.itl_ms, lambda p: p.tpot_s * 1e3),
    "tput": ("output throughput", "tok/s", lambda r: r.tokens_per_s, lambda p: p.output_tokens_per_s),
}


def _nim_rows() -> tuple[tuple[Measurement, Callable[[Calibration], float]], ...]:
    out: list[tuple[Measurement, Callable[[Calibration], float]]] = []
    for r in published.NIM:
        for quantity, (what, unit, published_value, read) in _NIM_READS.items():
            fits = published.NIM_FITS.get((quantity, r.isl, r.users), "")
            out.append((Measurement(nim_key(r, quantity), published.NIM_SOURCE,
                                    f"{r.isl} in / {r.osl} out, concurrency {r.users}: {what}", published_value(r),
                                    unit, "calibration" if fits else "held-out", fits),
                        partial(_nim_prediction, r, read)))
    return tuple(out)


def _nim_prediction(r: published.Nim, read: Callable[[Point], float], calibration: Calibration) -> float:
    return read(_nim(r.isl, r.osl, r.users, calibration))


D = "DYNAMO p5 Llama-3.1-8B"
_TABLE: tuple[tuple[Measurement, Callable[[Calibration], float]], ...] = (
    (Measurement("dynamo-ttft-aggregated", D, "ISL 8000 unqueued TTFT, aggregated", 173, "ms", "calibration",
                 "prefill_efficiency"), lambda c: _dynamo(8000, c)[2].ttft_s * 1e3),
    (Measurement("dynamo-ttft-disaggregated", D, "ISL 8000 unqueued TTFT, disaggregated", 210, "ms", "calibration",
                 "transfer_fixed_s"), lambda c: _dynamo(8000, c)[3].ttft_s * 1e3),
    (Measurement("dynamo-itl-disaggregated", D, "ISL 8000 ITL, disaggregated", 16.9, "ms", "calibration",
                 "join_s_per_block"), lambda c: _dynamo(8000, c)[1].tpot_s * 1e3),
    (Measurement("dynamo-itl-aggregated", D, "ISL 8000 ITL, aggregated", 28.5, "ms", "held-out"),
     lambda c: _dynamo(8000, c)[0].tpot_s * 1e3),
    (Measurement("dynamo-tput-aggregated", D, "ISL 8000 output throughput, aggregated", 204, "tok/s", "held-out"),
     lambda c: _dynamo(8000, c)[0].output_tokens_per_s),
    (Measurement("dynamo-tput-disaggregated", D, "ISL 8000 output throughput, disaggregated", 248, "tok/s",
                 "held-out"), lambda c: _dynamo(8000, c)[1].output_tokens_per_s),
    (Measurement("dynamo-p95-aggregated", D, "ISL 8000 P95 TTFT, aggregated", 2097, "ms", "held-out"),
     lambda c: _dynamo(8000, c)[0].ttft_p95_s * 1e3),
    (Measurement("dynamo-p95-disaggregated", D, "ISL 8000 P95 TTFT, disaggregated", 1752, "ms", "held-out"),
     lambda c: _dynamo(8000, c)[1].ttft_p95_s * 1e3),
    *((Measurement(f"dynamo-gain-{isl}", D, f"ISL {isl} throughput change, disaggregated vs aggregated", gain, "%",
                   "held-out"), lambda c, isl=isl: _gain(isl, "output_tokens_per_s", c))
      for isl, gain in ((1000, 0.0), (2000, 3.0), (4000, 14.0), (8000, 22.0))),
    *((Measurement(f"dynamo-itl-change-{isl}", D, f"ISL {isl} ITL change, disaggregated vs aggregated", change, "%",
                   "held-out"), lambda c, isl=isl: _gain(isl, "tpot_s", c))
      for isl, change in ((1000, -7.0), (2000, -11.0), (4000, -18.0), (8000, -41.0))),
    *_nim_rows(),
    (Measurement("nixlbench-efficiency", "NIXLBENCH", "share of NIC line rate NIXL moves", 85.25, "%",
                 "calibration", "transfer_efficiency"), lambda c: c.transfer_efficiency * 100),
    (Measurement("transferengine-efa-peak", "TRANSFERENGINE p5en", "per-GPU KV bandwidth on EFA (bound: <= peak)",
                 400, "Gbit/s", "held-out"),
     lambda c: efa_bytes_per_s(instance=P5EN, tensor_parallel=1, calibration=c) * 8 / 1e9),
    (Measurement("p5en-line-rate", "TRANSFERENGINE p5en", "EFA line rate behind one GPU (catalogue)", 400, "Gbit/s",
                 "held-out"), lambda c: rank_line_rate(P5EN) * 8 / 1e9),
)


def _bucket(m: Measurement) -> Measurement:
    """The GPU and metric of the Dynamo and NIM rows (both on H100), from their unit and key."""
    if m.metric:
        return m
    if m.key.startswith("nixlbench"):
        return replace(m, metric="bandwidth")
    metric = {"%": "change", "Gbit/s": "bandwidth", "tok/s": "throughput"}.get(m.unit)
    if metric is None:
        metric = "ttft" if ("ttft" in m.key or "p95" in m.key) else "tpot"
    return replace(m, gpu="H200" if "p5en" in m.key or "p5en" in m.source else "H100", metric=metric)


_ALL: tuple[tuple[Measurement, Callable[[Calibration], float]], ...] = (
    *((_bucket(m), f) for m, f in _TABLE), *_offline_rows(), *_serving_rows())


@cache
def _rows(calibration: Calibration) -> tuple[Row, ...]:
    return tuple(Row(m, predict(calibration)) for m, predict in _ALL)


def rows(calibration: Calibration = DEFAULT_CALIBRATION) -> tuple[Row, ...]:
    """Every measurement with the planner's prediction under ``calibration``."""
    return _rows(calibration)


def measurements() -> tuple[Measurement, ...]:
    return tuple(m for m, _ in _ALL)


_BY_KEY = {m.key: (m, f) for m, f in _ALL}


def predict(key: str, calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """The planner's prediction for one measurement (the fit in ``fit.py`` evaluates one row at a time)."""
    return _BY_KEY[key][1](calibration)


def published_value(key: str) -> float:
    return _BY_KEY[key][0].published
