"""One deadline per command: every remote call, its retries included, ends by the time the command was given.

A command makes a :class:`Deadline` from its ``--timeout`` (or its default budget) and hands it to everything that
calls out: the AWS clients (:class:`hyperpod_dpd.aws.ClientFactory` bounds each attempt's read timeout by the time
left and refuses to start an attempt, a retry included, once it has passed) and the Kubernetes client
(:class:`hyperpod_dpd.ops.kube.Kube` bounds each request's connect and read timeouts the same way and disables
urllib3's own retries). When the time is up the next call raises :class:`OutOfTime`: one line naming the option that
set the budget and the call that could not start, exit 2 (``hpdpd wait`` turns it into its documented timeout).

Nothing here sleeps or calls out; ``clock`` is injectable so tests need not wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hyperpod_dpd.errors import HpdpdError

# The shortest timeout handed to a socket: a request made with a few milliseconds left fails at once rather than
# being given no timeout at all (urllib3 reads None as "wait forever").
MIN_REQUEST_SECONDS = 0.05


class OutOfTime(HpdpdError):
    """The command's budget ran out before a call (or a retry of it) could start."""

    def __init__(self, what: str, budget: str) -> None:
        super().__init__(f"{what}: {budget} ran out before it could be done")
        self.what, self.budget = what, budget


@dataclass(frozen=True, kw_only=True)
class Deadline:
    """``seconds`` from the moment it is made; ``option`` is what the user sets it with (named when it runs out)."""

    seconds: float
    option: str = "--timeout"
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"a deadline needs a positive number of seconds, not {self.seconds!r}")
        if self.started < 0:
            object.__setattr__(self, "started", self.clock())

    def remaining(self) -> float:
        """Seconds left (0 once it has passed)."""
        return max(0.0, self.started + self.seconds - self.clock())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0

    def bound(self, seconds: float, *, what: str) -> float:
        """``seconds``, or the time left when that is shorter; :class:`OutOfTime` for ``what`` once none is left."""
        left = self.remaining()
        if left <= 0:
            raise self.out_of_time(what)
        return max(MIN_REQUEST_SECONDS, min(seconds, left))

    def out_of_time(self, what: str) -> OutOfTime:
        return OutOfTime(what, self.describe())

    def describe(self) -> str:
        return f"the {self.seconds:g} s of {self.option}"

    def extended(self, seconds: float) -> Deadline:
        """The same start, ``seconds`` later: the allowance of a clean-up that must still run after the deadline
        (stopping a remote build that outlived it)."""
        return Deadline(seconds=self.seconds + seconds, option=self.option, clock=self.clock, started=self.started)
