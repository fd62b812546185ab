"""Published measurements beyond Dynamo (``measurements.py`` turns each into a planner prediction).

Data only: each record names its source, the setup it was measured on and its role. Sources:

* TRTLLM: NVIDIA TensorRT-LLM, "Performance Overview", throughput table (NVIDIA/TensorRT-LLM
  docs/source/performance/perf-overview.md @00f37686): ``trtllm-bench throughput``, an offline run with every request
  queued at once, total output tokens per second; ModelOpt FP8 checkpoints (nvidia/Llama-3.1-8B-Instruct-FP8,
  nvidia/Llama-3.3-70B-Instruct-FP8; FP8 KV cache assumed, as those checkpoints quantize it), H100 SXM 80GB (DGX
  H100) and H200 SXM 141GB (DGX H200); nvidia/Llama-3.3-70B-Instruct-FP4 (NVFP4 weights, FP8 KV assumed) on one
  B200 (DGX B200). The engine is TensorRT-LLM, not vLLM: these rows measure how far the
  roofline is from a tuned engine on the same GPU.
* NIM: NVIDIA NIM for LLMs benchmarking guide, "Performance" (docs.nvidia.com/nim/benchmarking/llm), NIM 1.8.0,
  Llama-3.3-70B-Instruct FP8 TP2 on 2 x H100 80GB, AIPerf at fixed concurrency (a closed loop), fixed input and
  output lengths; mean TTFT, mean ITL and total output tokens per second. The values were checked against a public
  copy of the table (zivbeker42/llm-guesstimator tested_benchmarks/nim_llama33_70b_v1.8.0_2xH100_fp8TP2.csv
  @cf11e664). Rule, fixed before any row was compared with the planner: every input/output pair the page
  publishes, concurrency 1 to 50, all three quantities (the 100 to 250 runs are not in the table yet; no row was
  chosen or dropped for its error).
* MOONCAKE: Mooncake's EFA transport, "block_size sweep" and p5 table (kvcache-ai/Mooncake
  docs/source/design/transfer-engine/transport/efa_transport.md @2f45fbe2): ``transfer_engine_bench`` GPU to GPU
  between two nodes, all 8 GPUs, write, GB/s per node.
* VLLM_CI: vLLM's nightly "Performance Benchmark" pipeline, latency tests (buildkite.com/vllm/performance-benchmark,
  build 9513 on H200, build 9555 on 8 x H100): ``benchmark_latency.py`` with its defaults of the time, one batch of 8
  prompts of 32 tokens generating 128 each, BF16, dummy weights; mean end-to-end latency of the batch. Models and TP
  from vllm-project/vllm .buildkite/nightly-benchmarks/tests/latency-tests.json @d5ce9249: Meta-Llama-3-8B TP1 and
  Meta-Llama-3-70B-Instruct TP4 (the architectures of the catalogue's Llama-3.1-8B and Llama-3.3-70B). 127 of the 128
  steps are decode steps at batch 8, so the row measures the decode step.
* DATACRUNCH: datacrunch-research/h200-benchmarks @c091ef53, SGLang ``bench_serving`` open-loop runs on H200 (launch
  lines in sglang/experiments/*.sh): Llama-3.3-70B-Instruct BF16 TP4 on 4 x H200
  (sglang/outputs/llama_3_3_70b_online_output.jsonl) and Llama-3.1-405B-Instruct BF16 TP8 on 8 x H200
  (sglang/outputs/llama_405b_online_output.jsonl, ``--disable-radix-cache --enable-torch-compile``). Random dataset
  with ``random_range_ratio`` 0 (input and output lengths uniform on 1...1,024; the files' totals give means of about
  509 and 534), Poisson arrivals; median TTFT and median ITL. Runs whose median ITL or TTFT shows a growing queue are
  left out (overload): the 70B's 8 and 16 requests/s and the 405B's 4 and 8 requests/s (405B at 4 requests/s: median
  ITL 135 ms against 43 ms at 2, median end-to-end 111 s against 30 s).
"""

from __future__ import annotations

from dataclasses import dataclass

TRTLLM = "TRTLLM perf-overview @00f37686"
VLLM_CI = "VLLM_CI latency tests"
DATACRUNCH = "DATACRUNCH h200-benchmarks @c091ef53"
MOONCAKE = "MOONCAKE efa_transport.md @2f45fbe2"
NIM_SOURCE = "NIM 2xH100 Llama-3.3-70B FP8"


@dataclass(frozen=True, kw_only=True)
class Offline:
    """A TensorRT-LLM offline throughput row: one engine of ``tp`` GPUs, FP8 weights and KV."""

    model: str
    gpu: str  # "H100" or "H200"
    tp: int
    isl: int
    osl: int
    tokens_per_s: float
    role: str = "held-out"
    weights: str = "fp8"  # FP4 (NVFP4) on B200; the KV cache is FP8 throughout


@dataclass(frozen=True, kw_only=True)
class Rdma:
    """A Mooncake EFA row: node-to-node write bandwidth in ``block`` byte messages."""

    instance: str
    block: int
    gbytes_per_s: float
    role: str = "held-out"
    fits: str = ""


_LENGTHS = ((128, 128), (128, 2048), (128, 4096), (500, 2000), (1000, 1000), (1000, 2000), (2048, 128),
            (2048, 2048), (5000, 500), (20000, 2000))
# (model, GPU, TP): total output tokens/s for each (ISL, OSL) above, as the table prints them
_TABLE = {
    ("Llama-3.1-8B", "H200", 1): (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804),
    ("Llama-3.1-8B", "H100", 1): (28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459, 1351),
    ("Llama-3.3-70B", "H200", 1): (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283),
    ("Llama-3.3-70B", "H100", 2): (6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437),
    # nvidia/Llama-3.3-70B-Instruct-FP4 on one B200 (DGX B200): outside the H100/H200 bounds, reported per bucket
    ("Llama-3.3-70B", "B200", 1): (11147, 9922, 6831, 7762, 7007, 6271, 1339, 4783, 1459, 665),
}
# The one offline row that fixes ``overlap_loss``: the largest decode batch of the table (both HBM traffic and
# compute matter there, so how much of the shorter one hides is visible).
OVERLAP_ROW = ("Llama-3.1-8B", "H200", 128, 2048)

OFFLINE: tuple[Offline, ...] = tuple(
    Offline(model=m, gpu=g, tp=tp, isl=isl, osl=osl, tokens_per_s=value, weights="fp4" if g == "B200" else "fp8",
            role="calibration" if (m, g, isl, osl) == OVERLAP_ROW else "held-out")
    for (m, g, tp), values in _TABLE.items() for (isl, osl), value in zip(_LENGTHS, values, strict=True))

KIB = 1024
RDMA: tuple[Rdma, ...] = (
    Rdma(instance="ml.p5en.48xlarge", block=64 * KIB, gbytes_per_s=97.11, role="calibration",
         fits="efa_messages_per_s_per_interface (MOONCAKE_EFA)"),
    Rdma(instance="ml.p5en.48xlarge", block=128 * KIB, gbytes_per_s=190.82),
    Rdma(instance="ml.p5en.48xlarge", block=256 * KIB, gbytes_per_s=324.90),
    Rdma(instance="ml.p5en.48xlarge", block=512 * KIB, gbytes_per_s=357.62),
    Rdma(instance="ml.p5en.48xlarge", block=1024 * KIB, gbytes_per_s=352.59),
    Rdma(instance="ml.p5en.48xlarge", block=2048 * KIB, gbytes_per_s=366.87, role="calibration",
         fits="transfer_efficiency (MOONCAKE_EFA)"),
    Rdma(instance="ml.p5.48xlarge", block=1024 * KIB, gbytes_per_s=388.90),
)


@dataclass(frozen=True, kw_only=True)
class Latency:
    """A vLLM nightly latency row: one batch of ``batch`` prompts of ``isl`` tokens, ``osl`` tokens each, BF16."""

    model: str
    gpu: str
    tp: int
    build: int  # the buildkite build of vllm/performance-benchmark
    ms: float  # mean end-to-end latency of the batch
    batch: int = 8
    isl: int = 32
    osl: int = 128


LATENCY: tuple[Latency, ...] = (
    Latency(model="Llama-3.1-8B", gpu="H200", tp=1, build=9513, ms=834.059),
    Latency(model="Llama-3.3-70B", gpu="H200", tp=4, build=9513, ms=2075.08),
    Latency(model="Llama-3.1-8B", gpu="H100", tp=1, build=9555, ms=997.542),
    Latency(model="Llama-3.3-70B", gpu="H100", tp=4, build=9555, ms=2444.47),
)


@dataclass(frozen=True, kw_only=True)
class Online:
    """A DATACRUNCH open-loop row: ``model`` BF16 at ``tp`` on H200, Poisson ``rate``, uniform 1...1,024 lengths."""

    model: str
    tp: int
    rate: float
    ttft_ms: float  # median
    itl_ms: float  # median
    role: str = "held-out"  # of the TTFT row; "calibration" fits calibration.SGLANG (every ITL row is held out)


ONLINE: tuple[Online, ...] = (
    Online(model="Llama-3.3-70B", tp=4, rate=1.0, ttft_ms=85.745, itl_ms=13.639, role="calibration"),
    Online(model="Llama-3.3-70B", tp=4, rate=2.0, ttft_ms=87.556, itl_ms=14.830),
    Online(model="Llama-3.3-70B", tp=4, rate=4.0, ttft_ms=106.063, itl_ms=19.420),
    Online(model="Llama-3.1-405B", tp=8, rate=1.0, ttft_ms=218.808, itl_ms=38.782),
    Online(model="Llama-3.1-405B", tp=8, rate=2.0, ttft_ms=244.264, itl_ms=43.301),
)


@dataclass(frozen=True, kw_only=True)
class Nim:
    """A NIM 1.8.0 row: Llama-3.3-70B FP8 TP2 on 2 x H100, ``users`` requests in a closed loop, fixed lengths."""

    isl: int
    osl: int
    users: int
    ttft_ms: float  # mean
    itl_ms: float  # mean
    tokens_per_s: float  # output tokens per second, all users together


# (ISL, OSL): (concurrency, TTFT ms, ITL ms, output tok/s) as the page prints them
_NIM_TABLE = {
    (5000, 500): ((1, 406.77, 18.58, 51.67), (5, 546.7, 21.83, 218.48), (25, 688.69, 38.75, 623.4),
                  (50, 834.51, 59.73, 814.37)),
    (500, 2000): ((1, 47.77, 18.91, 52.85), (5, 126.53, 19.04, 261.83), (25, 147.63, 21.69, 1149.05),
                  (50, 181.64, 23.97, 2078.43)),
    (200, 200): ((1, 31.22, 18.8, 53.0), (5, 88.7, 18.83, 260.67), (25, 138.98, 20.61, 1178.68),
                 (50, 156.28, 23.33, 2081.24)),
    (1000, 1000): ((1, 82.46, 18.67, 53.37), (5, 145.62, 19.07, 260.48), (25, 250.49, 22.45, 1102.23),
                   (50, 278.62, 25.87, 1912.93)),
    (20000, 2000): ((1, 1833.01, 19.58, 48.8), (5, 2910.33, 25.24, 186.8), (25, 18781.26, 48.26, 415.33),
                    (50, 123969.71, 49.22, 418.65)),
}
NIM: tuple[Nim, ...] = tuple(
    Nim(isl=isl, osl=osl, users=users, ttft_ms=ttft, itl_ms=itl, tokens_per_s=tput)
    for (isl, osl), runs in _NIM_TABLE.items() for users, ttft, itl, tput in runs)
# The NIM rows that fix a constant (quantity, ISL, concurrency): every other NIM row is held out
NIM_FITS = {("itl", 500, 1): "hbm_efficiency", ("ttft", 5000, 1): "low_precision_efficiency",
            ("ttft", 200, 25): "chunk_tokens (NIM_TRTLLM)"}
