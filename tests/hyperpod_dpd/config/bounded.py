"""Run a command the way a user runs it, with a wall-clock bound, an optional address-space limit, and what it cost.

A hostile configuration must not hang or exhaust memory, so each case runs in its own process: a hang ends at the
timeout instead of stalling the suite, ``RLIMIT_AS`` turns a runaway allocation into a failure, and the launcher's
``getrusage(RUSAGE_CHILDREN)`` reports the peak resident set of the largest process of the case (jsii's Node included)
and the CPU time the whole tree used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The launcher: limits its child, runs it, reports. It runs as its own process so that RUSAGE_CHILDREN covers this
# case only (the pytest worker has run other children before).
_LAUNCHER = """
import json, os, resource, subprocess, sys
limit = int(sys.argv[1])
def bound():
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
child = subprocess.run(sys.argv[2:], preexec_fn=bound, capture_output=True, text=True, errors="replace")
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": child.returncode, "out": child.stdout, "err": child.stderr, "rss_kib": usage.ru_maxrss,
                  "cpu": usage.ru_utime + usage.ru_stime}))
"""

# Loads every environment of a directory (argv[1]) as the toolkit does before any construct exists: exit 2 and the
# error's text on stderr, or the names on stdout. No CDK import, so an address-space limit can apply to it.
LOAD_ALL = """
import sys
from hyperpod_dpd.config import load_all
from hyperpod_dpd.errors import ConfigError
try:
    names = [e.name for e in load_all(sys.argv[1])]
except ConfigError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
print("loaded: " + ", ".join(names))
"""

# Root reads any file whatever its mode (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): to meet a file it may not read, a
# root test run starts the command without those capabilities (util-linux setpriv; capabilities(7), "File
# capabilities": without them in the bounding and inheritable sets, the exec'd process does not regain them).
WITHOUT_FILE_OVERRIDES = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                          "--bounding-set=-dac_override,-dac_read_search", "--"]


@dataclass(frozen=True, kw_only=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mib: float
    cpu_seconds: float

    @property
    def lines(self) -> list[str]:
        """Every line the command printed, stdout and stderr together."""
        return (self.stdout + self.stderr).splitlines()


def run_bounded(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
                wall_seconds: float, address_space_mib: int = 0, honour_file_modes: bool = False) -> Outcome:
    """Run ``argv``; a run past ``wall_seconds`` (plus a second for the launcher) fails as a hang.
    ``honour_file_modes``: run it so that file permissions apply even to root (see :data:`WITHOUT_FILE_OVERRIDES`)."""
    if honour_file_modes and os.geteuid() == 0:
        argv = [*WITHOUT_FILE_OVERRIDES, *argv]
    environment = {k: v for k, v in os.environ.items() if k != "HPDPD_ENVIRONMENTS"}
    environment.update(env or {})
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(address_space_mib * 1024 * 1024), *argv],
            env=environment, cwd=cwd, capture_output=True, text=True, timeout=wall_seconds + 1, check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{argv[-1]!r} did not finish within {wall_seconds} s (a hang)") from None
    seconds = time.monotonic() - started
    assert result.returncode == 0, f"the launcher failed: {result.stderr}"
    report = json.loads(result.stdout)
    return Outcome(returncode=report["rc"], stdout=report["out"], stderr=report["err"], seconds=seconds,
                   peak_rss_mib=report["rss_kib"] / 1024, cpu_seconds=report["cpu"])


def load_bounded(config_dir: Path, *, wall_seconds: float = 10, address_space_mib: int = 1024,
                 honour_file_modes: bool = False) -> Outcome:
    """:data:`LOAD_ALL` over ``config_dir`` under a wall-clock bound and an address-space limit."""
    return run_bounded([sys.executable, "-c", LOAD_ALL, str(config_dir)], wall_seconds=wall_seconds,
                       address_space_mib=address_space_mib, honour_file_modes=honour_file_modes)
