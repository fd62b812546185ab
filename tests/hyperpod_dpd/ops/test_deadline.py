"""One deadline per command: the time left, the bound of each call, and the one line when it has run out."""

from __future__ import annotations

import pytest

from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.deadline import MIN_REQUEST_SECONDS, Deadline, OutOfTime


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_shrinks_with_the_clock_and_stops_at_zero() -> None:
    # GIVEN a 30 s deadline made at t=100
    clock = Clock()
    deadline = Deadline(seconds=30, clock=clock)
    # WHEN the clock moves
    clock.now = 112.5
    left = deadline.remaining()
    clock.now = 200.0
    # THEN the time left follows it, and is 0 (expired) once the deadline has passed, never negative
    assert left == 17.5
    assert deadline.remaining() == 0.0 and deadline.expired


def test_a_call_gets_its_own_timeout_or_the_time_left_whichever_is_shorter() -> None:
    clock = Clock()
    deadline = Deadline(seconds=10, clock=clock)
    assert deadline.bound(30, what="GET /x") == 10  # the deadline is nearer than the call's own timeout
    assert deadline.bound(4, what="GET /x") == 4  # the call's own timeout is nearer
    clock.now = 109.99
    assert deadline.bound(4, what="GET /x") == MIN_REQUEST_SECONDS  # never "no timeout" for a socket


def test_no_call_starts_once_the_time_is_up_and_the_line_says_what_and_why() -> None:
    # GIVEN a deadline set with --request-timeout that has passed
    clock = Clock()
    deadline = Deadline(seconds=3, option="--request-timeout", clock=clock)
    clock.now = 103.0
    # WHEN a call asks for its timeout
    with pytest.raises(OutOfTime) as raised:
        deadline.bound(30, what="DescribeCluster at https://eks.us-west-2.amazonaws.com")
    # THEN it is refused with one line naming the call and the option, an error the command reports with exit 2
    assert str(raised.value) == ("DescribeCluster at https://eks.us-west-2.amazonaws.com: the 3 s of "
                                 "--request-timeout ran out before it could be done")
    assert isinstance(raised.value, HpdpdError)


def test_an_extended_deadline_keeps_the_start_and_adds_the_grace() -> None:
    # GIVEN a 10 s deadline extended by 30 s for a clean-up
    clock = Clock()
    deadline = Deadline(seconds=10, clock=clock)
    grace = deadline.extended(30)
    # WHEN the original has passed
    clock.now = 115.0
    # THEN the extension still has the rest of its 40 s from the same start
    assert deadline.expired and grace.remaining() == 25.0 and grace.option == "--timeout"


@pytest.mark.parametrize("seconds", [0, -1])
def test_a_deadline_needs_time(seconds: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        Deadline(seconds=seconds)
