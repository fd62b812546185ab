"""How many examples a property test draws: its own default, or ``HPDPD_HYPOTHESIS_EXAMPLES`` when that is set
(``make test-fast`` draws 20 of each for a quick loop; exploring draws more, e.g. 10000 with
``HYPOTHESIS_PROFILE=explore``). ``make test`` leaves it unset, so every property test draws its full default."""

from __future__ import annotations

import os


def examples(default: int) -> int:
    return int(os.environ.get("HPDPD_HYPOTHESIS_EXAMPLES") or default)
