"""The relay's release slack (no root, no sockets): a frame due within its direction's slack
leaves with the wake-up that is already running, never earlier than the slack allows, and
the relay's next wake-up is the earliest frame's own release time (the slack never adds one)."""

from __future__ import annotations

from rmptwin.emulation.relay import MAX_SLACK_NS, RELEASE_SLACK_NS, Direction, Relay, release_slack_ns
from rmptwin.model import LinkParams

MS = 1_000_000


class _Out:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, frame: bytes) -> None:
        self.sent.append(frame)


def _relay(delay_ms: float) -> tuple[Relay, _Out]:
    r = object.__new__(Relay)               # only the delay line and the sockets, no namespace
    p = LinkParams(delay_ms=delay_ms)
    r.dirs = (Direction("ab", p, 1, "x-y", "x", "y"), Direction("ba", p, 1, "x-y", "y", "x"))
    out = _Out()
    r.socks = (_Out(), out)                 # a->b frames leave through b's socket
    return r, out


def test_slack_is_two_percent_of_the_delay_between_its_floor_and_cap():
    assert release_slack_ns(LinkParams(delay_ms=0.1)) == RELEASE_SLACK_NS
    assert release_slack_ns(LinkParams(delay_ms=28)) == 28 * MS // 50
    assert release_slack_ns(LinkParams(delay_ms=80)) == MAX_SLACK_NS


def test_an_access_link_frame_leaves_in_the_wake_up_that_read_it():
    r, out = _relay(0.1)
    r.dirs[0].admit(b"f" * 100, 0)
    assert r._release(20_000) is None       # read 20 us after it arrived: out at once
    assert out.sent == [b"f" * 100]


def test_a_long_link_frame_leaves_no_earlier_than_its_slack_and_is_woken_for_on_time():
    r, out = _relay(28)
    r.dirs[0].admit(b"g" * 100, 0)
    due = r.dirs[0].line[0][0]
    slack = r.dirs[0].slack_ns
    assert due >= 28 * MS
    assert r._release(due - slack - 1) == due and out.sent == []   # too early: wait, until its own time
    assert r._release(due - slack) is None and out.sent == [b"g" * 100]
