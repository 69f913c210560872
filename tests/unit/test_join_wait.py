"""The wait for IGMP joins that runs and probes share (``rmptwin.emulation.joins``): it ends
when the controller lists every wanted member, asks for a general query only after a quiet
spell, and says which joins never came."""

from __future__ import annotations

from rmptwin.emulation.joins import wait_for_joins

G = "239.1.0.5"


class FakeController:
    """Members appear at given (virtual) times; a query brings back the ones whose reports were lost."""

    def __init__(self, arrive: dict[str, float], lost: set[str] = frozenset()):
        self.arrive, self.lost, self.now, self.queried_at = arrive, set(lost), 0.0, []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s

    def state(self) -> dict:
        members = [h for h, t in self.arrive.items() if t <= self.now and h not in self.lost]
        return {"groups": {G: {"members": members}}}

    def query(self) -> None:
        self.queried_at.append(self.now)
        self.lost.clear()   # every host answers the general query


def test_waits_for_slow_joins_without_querying():
    c = FakeController({"h2": 0.5, "h5": 4.0})   # h5 is slow but arrives: joins keep coming
    got = wait_for_joins(c.state, c.query, {(G, "h2"), (G, "h5")}, timeout_s=60, query_after_s=5,
                         clock=c.clock, sleep=c.sleep)
    assert got.missing == set() and got.queries == 0
    assert 4.0 <= c.now < 4.5


def test_a_lost_report_is_asked_for_after_a_quiet_spell():
    c = FakeController({"h2": 0.2, "h5": 0.2}, lost={"h5"})
    got = wait_for_joins(c.state, c.query, {(G, "h2"), (G, "h5")}, timeout_s=60, query_after_s=2,
                         clock=c.clock, sleep=c.sleep)
    assert got.missing == set() and got.queries == 1
    assert 2.0 < c.queried_at[0] < 3.0


def test_a_join_that_never_comes_is_named():
    c = FakeController({"h2": 0.2})
    progress = []
    got = wait_for_joins(c.state, c.query, {(G, "h2"), (G, "h6")}, timeout_s=10, query_after_s=2,
                         clock=c.clock, sleep=c.sleep, on_progress=lambda n, of: progress.append((n, of)))
    assert got.missing == {(G, "h6")}
    assert 3 <= got.queries <= 5           # one per quiet spell of 2 s in 10 s
    assert progress[-1] == (1, 2)
