"""A secondary ring holder whose successor stays silent passes around it: the token it sends
next is its last one with only the successor and the token number changed (SecondaryRing.on_wait
builds it field by field since frames are no longer dataclasses; no other test reaches it)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmptwin import corebuild
from rmptwin.rmp import wire
from rmptwin.rmp.secondary_ring import SecondaryRing

# the ring's collaborators are stand-ins: a compiled SecondaryRing takes only a real CoreBase
# (tests/sim/test_compiled_builds.py runs this file interpreted beside a compiled session)
pytestmark = pytest.mark.skipif(corebuild.ACTIVE.compiled, reason="stand-in collaborators; "
                                "tests/sim/test_compiled_builds.py runs it with RMPTWIN_PURE=1")


class _Timers:
    def set(self, key: object, when: int) -> None:
        pass

    def cancel(self, key: object) -> None:
        pass


def test_a_silent_successor_is_passed_around_with_the_last_token_otherwise_unchanged():
    sent: list[wire.SecToken] = []
    reports: list[tuple] = []
    core = SimpleNamespace(name="rs1", timers=_Timers(), multicast=lambda stripe, tok: sent.append(tok),
                           send=lambda tok, dest: sent.append(tok), emit=lambda event: None)
    receiver = SimpleNamespace(stripe=3, epoch=5, t_r=42, next_gseq=100, acks={})
    reporter = SimpleNamespace(report=lambda *args, **kw: reports.append(args))
    tm = SimpleNamespace(tau_t=1, tau_r=1, dn=1, k_r=0)
    ring = SecondaryRing(core, receiver, "eu", ["rp1", "rs1", "rs2", "rs3"], tm, reporter)
    ring.last_sent = wire.SecToken(3, 5, "eu", 30, "rs1", "rs2", 7)
    ring.on_wait(10)
    assert reports == [(3, 5, "rs2", wire.REASON_SECONDARY, 30, 10)]
    assert sent == [wire.SecToken(3, 5, "eu", 41, "rs1", "rs3", 7)]
    assert ring.last_sent == sent[0] and ring.pass_attempts == 0
