#!/usr/bin/env bash
# Times the project's synth (every environment, as `make synth` runs it) against a bare app with just a VPC,
# an aws_eks_v2 cluster and a two-group HyperPod cluster per environment, and prints the ratio (target <= 1.5x).
# The two run side by side in pairs (the order alternates from pair to pair), so a busy moment of a shared machine
# slows both rather than one. The verdict is the median of the paired ratios; the best time of each is printed too.
# Usage: make bench   (or RUNS=9 bash bench/synth.sh)
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
for pair in range(runs):
    for name in (("full", "bare") if pair % 2 == 0 else ("bare", "full")):
        times[name].append(once(APPS[name]))
ratio = statistics.median(f / b for f, b in zip(times["full"], times["bare"]))
for name, label in (("full", "hyperpod-dpd synth (all environments):"), ("bare", "bare app (VPC + EKS + HyperPod):       ")):
    print(f"{label} {statistics.median(times[name]):6.2f} s (median of {runs}; best {min(times[name]):.2f} s)")
print(f"ratio:                                  {ratio:6.2f}x (median of the paired ratios; target <= 1.50x; "
      f"best against best {min(times['full']) / min(times['bare']):.2f}x)")
sys.exit(1 if ratio > 1.5 else 0)
PY
