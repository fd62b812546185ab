#!/usr/bin/env bash
# Times the project's synth (every environment, as `make synth` runs it) against a bare app with just a VPC,
# an aws_eks_v2 cluster and a two-group HyperPod cluster per environment, and prints the ratio (target <= 1.5x).
# Usage: make bench   (or RUNS=5 bash bench/synth.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export CDK_DISABLE_CLI_TELEMETRY=true AWS_EC2_METADATA_DISABLED=true
exec .venv/bin/python - "${RUNS:-3}" <<'PY'
import shutil, subprocess, sys, time
from pathlib import Path

runs = int(sys.argv[1])
out = Path("bench/out")
shutil.rmtree(out, ignore_errors=True)

def best(*command: str) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)

full = best("cdk", "synth", "--quiet", "--output", str(out / "full"))
bare = best("cdk", "synth", "--quiet", "--app", ".venv/bin/python bench/bare_app.py", "--output", str(out / "bare"))
ratio = full / bare
print(f"hyperpod-dpd synth (all environments): {full:6.2f} s (best of {runs})")
print(f"bare app (VPC + EKS + HyperPod):        {bare:6.2f} s (best of {runs})")
print(f"ratio:                                  {ratio:6.2f}x (target <= 1.50x)")
sys.exit(1 if ratio > 1.5 else 0)
PY
