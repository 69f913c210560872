"""A node that shapes its own access link (node.hostlink) delivers and sends a datagram due
within the link's slack in the wake-up that read or made it, as a relay releases a frame due
within its slack when it is awake anyway; a datagram due later waits for the link's timer and
never reaches the core more than the slack early."""

from __future__ import annotations

import asyncio
import socket
import time

from rmptwin.core.sansio import Unicast
from rmptwin.model import LinkParams
from rmptwin.node.driver import ACCESS_SLACK_NS, NodeDriver
from rmptwin.node.hostlink import HostLink


class _Log:
    def add(self, t, node, role, ev) -> None:
        """Nothing is logged."""

    def flush(self) -> None:
        """Nothing to flush."""


class _EchoCore:
    """Answers every datagram with one to ``peer``; notes when each one reached it."""

    def __init__(self) -> None:
        self.got: list[int] = []
        self._out: list = []

    def receive_datagram(self, data, src, now) -> None:
        self.got.append(now)
        self._out.append((b"ANSWER", Unicast("peer")))

    def handle_timer(self, now) -> None:
        """No timers."""

    def groups(self):
        return frozenset()

    def datagrams_to_send(self, now):
        out, self._out = self._out, []
        return out

    def next_event(self):
        return None

    def get_timer(self):
        return None


def _exchange(delay_ms: float, wait_s: float) -> tuple[_EchoCore, NodeDriver, list, list]:
    """One datagram from ``peer`` read by a driver whose access link has ``delay_ms``: what the
    core and the wire saw right after the read, and ``wait_s`` later."""
    core, sent = _EchoCore(), []
    link = HostLink("n", "s1", LinkParams(delay_ms=delay_ms, bandwidth_mbps=100), seed=1)
    driver = NodeDriver(core, "n", "customer", {"n": "127.0.0.1", "peer": "127.0.0.2"}, time.time_ns(), _Log(),
                        access=link)
    driver._sendto = lambda data, addr: sent.append((data, addr, driver.true_now()))
    rx, tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    at_read: list = []

    async def main() -> None:
        driver.loop = asyncio.get_running_loop()
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.bind(("127.0.0.2", 0))
        tx.sendto(b"DATA", rx.getsockname())
        time.sleep(0.01)
        driver._readable(rx)
        at_read.extend([len(core.got), len(sent), driver._access_timer is not None])
        await asyncio.sleep(wait_s)

    try:
        asyncio.run(main())
    finally:
        rx.close()
        tx.close()
    return core, driver, sent, at_read


def test_on_a_short_access_link_the_datagram_and_its_answer_go_in_the_same_wake_up():
    core, driver, sent, at_read = _exchange(0.2, 0.0)
    assert at_read == [1, 1, False]    # delivered and answered, no timer of the link's own
    assert sent[0][0] == b"ANSWER" and sent[0][1][0] == "127.0.0.2"
    assert (driver.access.down.packets, driver.access.up.packets) == (1, 1)


def test_on_a_long_access_link_the_datagram_waits_for_its_time():
    core, driver, sent, at_read = _exchange(20.0, 0.06)
    assert at_read == [0, 0, True]     # still on the link when the read is done
    assert len(core.got) == 1 and len(sent) == 1   # delivered down, then the answer 20 ms up
    # neither end more than the slack early: the answer leaves >= 40 ms - 2 slacks after the read
    assert sent[0][2] - core.got[0] >= 20e6 - ACCESS_SLACK_NS
