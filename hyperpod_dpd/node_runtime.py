"""How the Node.js process behind the CDK (jsii's kernel) is started: its V8 background thread pool fits the machine.

Node sizes V8's pool of background threads (garbage collection, compiling JavaScript and the WebAssembly of the CDK's
CloudFormation validator) at 4 whatever the machine has. On a machine with two cores (a common CI runner) those
threads compete with the main thread and with Python for the cores, and the CDK's validation of the templates
slows down rather than speeding up (figures in ``docs/testing.md``). With five cores or more the default stands.

Call :func:`fit_node_to_machine` before the first ``import aws_cdk`` of a process (jsii starts Node then, with the
environment of that moment). This module imports nothing of the CDK.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

NODE_DEFAULT_POOL_SIZE = 4  # Node's --v8-pool-size when none is given (node/src/node_options.h, v8_thread_pool_size)
POOL_OPTION = "--v8-pool-size"


def pool_size(cpus: int | None) -> int | None:
    """The V8 pool size for ``cpus`` cores: one core stays for the main thread; ``None`` where Node's default fits."""
    if not cpus or cpus - 1 >= NODE_DEFAULT_POOL_SIZE:
        return None
    return max(1, cpus - 1)


def fit_node_to_machine(environ: MutableMapping[str, str] | None = None, cpus: int | None = None) -> str | None:
    """Add ``--v8-pool-size`` to ``NODE_OPTIONS`` for this machine's cores, unless the option is already set there.

    Returns the option added, or ``None`` when nothing changed. ``environ`` and ``cpus`` default to this process's
    environment and the cores it may run on.
    """
    environ = os.environ if environ is None else environ
    cpus = _usable_cpus() if cpus is None else cpus
    options = environ.get("NODE_OPTIONS", "")
    size = pool_size(cpus)
    if size is None or any(o.split("=", 1)[0] == POOL_OPTION for o in options.split()):
        return None
    option = f"{POOL_OPTION}={size}"
    environ["NODE_OPTIONS"] = f"{options} {option}".strip()
    return option


def _usable_cpus() -> int | None:
    """The cores this process may run on (its affinity, e.g. under a container's cpuset), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count()
