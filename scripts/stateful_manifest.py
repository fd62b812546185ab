"""Write security/stateful-resources.json: the logical ids of every environment's stateful resources.

Run by ``make stateful-manifest`` after a deliberate, reviewed change to stateful resources. The test
``tests/infra/guardrails/test_stateful.py`` fails when a synth no longer matches it, i.e. when a refactoring would
rename (and so replace) a VPC, subnet, cluster, bucket or key.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from hyperpod_dpd.infra.guardrails.stateful import stateful_resources
from hyperpod_dpd.stacks.application import build_app, cdk_json_context
from hyperpod_dpd.stacks.assembly import read_assembly

ROOT = Path(__file__).resolve().parents[1]

MANIFEST = ROOT / "security" / "stateful-resources.json"


def main() -> int:
    with tempfile.TemporaryDirectory() as outdir:
        app, stages = build_app(outdir=outdir, context=cdk_json_context())
        app.synth()
        assembly = read_assembly(Path(outdir))
        manifest: dict[str, dict[str, dict[str, str]]] = {}
        for (env, part), template in sorted(assembly.templates.items()):
            if env in stages and stateful_resources(template):  # a stack without stateful resources has nothing to guard
                manifest.setdefault(env, {})[part] = stateful_resources(template)
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"wrote {MANIFEST.relative_to(ROOT)}: " + ", ".join(
        f"{env} {sum(len(v) for v in parts.values())}" for env, parts in manifest.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
