#!/usr/bin/env bash
# Times the project's synth (every environment, as `make synth` runs it) against a bare app with just a VPC,
# an aws_eks_v2 cluster and a two-group HyperPod cluster per environment, and prints the ratio (target <= 1.5x).
# The two are run side by side, alternating, so a busy moment of a shared machine slows both rather than one;
# the verdict compares the best time of each, and the median of the paired ratios is printed beside it.
# Usage: make bench   (or RUNS=7 bash bench/synth.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export CDK_DISABLE_CLI_TELEMETRY=true AWS_EC2_METADATA_DISABLED=true
exec .venv/bin/python - "${RUNS:-5}" <<'PY'
import shutil, statistics, subprocess, sys, time
from pathlib import Path

runs = int(sys.argv[1])
out = Path("bench/out")
shutil.rmtree(out, ignore_errors=True)
APPS = {
    "full": ("cdk", "synth", "--quiet", "--output", str(out / "full")),
    "bare": ("cdk", "synth", "--quiet", "--app", ".venv/bin/python bench/bare_app.py", "--output", str(out / "bare")),
}

def once(command: tuple[str, ...]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start

times: dict[str, list[float]] = {name: [] for name in APPS}
for _ in range(runs):
    for name, command in APPS.items():
        times[name].append(once(command))
full, bare = min(times["full"]), min(times["bare"])
ratio = full / bare
paired = statistics.median(f / b for f, b in zip(times["full"], times["bare"]))
print(f"hyperpod-dpd synth (all environments): {full:6.2f} s (best of {runs}; median {statistics.median(times['full']):.2f} s)")
print(f"bare app (VPC + EKS + HyperPod):        {bare:6.2f} s (best of {runs}; median {statistics.median(times['bare']):.2f} s)")
print(f"ratio:                                  {ratio:6.2f}x (target <= 1.50x; median of the paired runs {paired:.2f}x)")
sys.exit(1 if ratio > 1.5 else 0)
PY
