"""Regenerate hyperpod_dpd/catalogue/offerings.py from the installed cfn-lint and aws-cdk-lib validators (`make offerings`)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES  # noqa: E402
from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS  # noqa: E402
from scripts.validator_probe import cdk_validator_rejections, cfn_lint_regions  # noqa: E402

TARGET = ROOT / "hyperpod_dpd" / "catalogue" / "offerings.py"


def main() -> int:
    names = list(INSTANCE_TYPES)
    regions = sorted(HYPERPOD_REGIONS)
    priced = {n: cfn_lint_regions(n, regions) for n in names}
    rejected = cdk_validator_rejections(names, regions)
    lags = {n: sorted(r for r in priced[n] if (n, r) in rejected) for n in names}
    text = TARGET.read_text()
    head = text[: text.index("PRICED:")]
    lines = ["PRICED: Mapping[str, frozenset[str]] = MappingProxyType({"]
    lines += [f'    "{n}": frozenset("{" ".join(sorted(priced[n]))}".split()),' for n in names]
    lines += ["})", "", "CDK_VALIDATOR_LAGS: Mapping[str, frozenset[str]] = MappingProxyType({"]
    lines += [f'    "{n}": frozenset("{" ".join(lags[n])}".split()),' for n in names if lags[n]]
    lines += ["})", ""]
    TARGET.write_text(head + "\n".join(lines))
    print(f"wrote {TARGET.relative_to(ROOT)}: {len(names)} types x {len(regions)} Regions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
