"""Print a short summary per environment after ``make synth``: stacks, instance groups, GPUs."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.config import EnvironmentConfig, load_all, load_environment
from hyperpod_dpd.config.pipeline import load_pipeline


def _stacks(assembly: Path, stage: str) -> list[tuple[str, int]]:
    nested = assembly / f"assembly-{stage}"
    manifest = json.loads((nested / "manifest.json").read_text())
    out = []
    for artifact in manifest.get("artifacts", {}).values():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        template = json.loads((nested / artifact["properties"]["templateFile"]).read_text())
        out.append((artifact["properties"].get("stackName", artifact["displayName"]), len(template.get("Resources", {}))))
    return sorted(out)


def summarize(config: EnvironmentConfig, assembly: Path) -> list[str]:
    lines = [f"{config.name}  account {config.account}  region {config.region}  GPU AZ {config.network.gpu_availability_zone}"]
    for name, resources in _stacks(assembly, config.name):
        lines.append(f"  stack {name:<28} {resources:>4} resources")
    gpus: Counter[str] = Counter()
    for group in config.hyperpod.instance_groups:
        spec = INSTANCE_TYPES[group.instance_type]
        hardware = f"{spec.gpu_count}x {spec.gpu.model} each, EFA {spec.efa_bandwidth_gbps:,} Gbps" if spec.gpu else f"{spec.vcpus} vCPU"
        nodes = f"{group.autoscaling.min_nodes}..{group.max_nodes}" if group.autoscaling else str(group.count)
        lines.append(f"  group {group.name:<12} {group.role:<8} {nodes:>3} x {group.instance_type:<22} ({hardware})"
                     + ("  parked" if group.parked else "  autoscaled" if group.autoscaling else ""))
        if spec.gpu:
            gpus[group.role] += group.max_nodes * spec.gpu_count  # at most (an autoscaled group at its maximum)
    lines.append(f"  GPUs  {sum(gpus.values())} total: " + ", ".join(f"{role} {n}" for role, n in sorted(gpus.items())))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    assembly = Path(args[0] if args else "cdk.out")
    manifest: dict[str, Any] = json.loads((assembly / "manifest.json").read_text())
    stages = sorted(a.removeprefix("assembly-") for a, v in manifest["artifacts"].items() if v.get("type") == "cdk:cloud-assembly")
    for stage in stages:
        print("\n".join(summarize(load_environment(stage), assembly)))
    pipeline = [a for a in manifest["artifacts"].values()
                if a.get("type") == "aws:cloudformation:stack" and a.get("displayName") == "pipeline"]
    if pipeline:
        config = load_pipeline()
        environments = {e.name: e for e in load_all(names=list(config.order))}
        print(f"pipeline  account {config.account}  region {config.region}  stack {pipeline[0]['properties'].get('stackName')}")
        print("  promotes " + " -> ".join(
            f"{p.name}{' (approval first)' if p.needs_approval(environments[p.name]) else ''}" for p in config.environments))
    return 0


if __name__ == "__main__":
    sys.exit(main())
