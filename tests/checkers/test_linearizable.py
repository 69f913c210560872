"""The CAS linearizability checker: histories produced by a real CasLog with overlapping
operations pass (a property test), and each planted kind of violation is caught."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.checkers.linearizable import CasOp, linearizable
from rmptwin.venue import wire
from rmptwin.venue.sequencer import CasLog

WON, LOST, TOO_FAR = wire.WON, wire.LOST, wire.TOO_FAR


def op(i, proc, call, ret, n, keys, out=None):
    return CasOp(i, proc, call, n, tuple(keys), float("inf") if ret is None else ret,
                 None if out is None else (out[0], out[1], tuple(out[2])))


A1, A2, B1, B2 = (0, 1), (0, 2), (1, 1), (1, 2)


def test_sequential_history_is_linearizable():
    ops = [op(0, "ev1", 0, 10, 0, [A1], (WON, 1, [A1])),
           op(1, "ev2", 20, 30, 0, [B1], (LOST, 1, [A1])),
           op(2, "ev2", 40, 50, 1, [B1], (WON, 2, [B1]))]
    assert linearizable(ops) is None


def test_concurrent_proposals_one_wins():
    ops = [op(0, "ev1", 0, 30, 0, [A1], (LOST, 1, [B1])),
           op(1, "ev2", 5, 20, 0, [B1], (WON, 1, [B1]))]
    assert linearizable(ops) is None


def test_an_indeterminate_proposal_may_have_taken_effect():
    # ev1's proposal timed out; ev2 later learns that ev1's key stands at 0
    ops = [op(0, "ev1", 0, None, 0, [A1]),
           op(1, "ev2", 50, 60, 0, [B1], (LOST, 1, [A1]))]
    assert linearizable(ops) is None


def test_an_indeterminate_proposal_may_have_had_no_effect():
    ops = [op(0, "ev1", 0, None, 0, [A1]),
           op(1, "ev2", 50, 60, 0, [B1], (WON, 1, [B1]))]
    assert linearizable(ops) is None


def test_a_retry_answered_as_lost_with_its_own_keys():
    # the first copy won, its answer was lost; the retry's answer says the keys already stand
    ops = [op(0, "ev1", 0, None, 0, [A1]),
           op(1, "ev1", 100, 120, 0, [A1], (LOST, 1, [A1]))]
    assert linearizable(ops) is None


def test_many_pending_indeterminate_copies_are_decided_quickly():
    # measured emulated: 100-180 indeterminate copies (late retries whose answers were lost, a
    # crash) made the search give up after 2 M steps on a violation: it tried every subset of the
    # copies at every point. A copy that can no longer change anything is placed without branching.
    ops, t = [], 0
    for n in range(40):
        ops.append(op(len(ops), "ev1", t, t + 4, n, [(0, n)], (WON, n + 1, [(0, n)])))
        ops.append(op(len(ops), "ev1", t + 5, None, n, [(0, n)]))          # a late copy, answer lost
        t += 10
    assert linearizable(ops, max_steps=20_000) is None
    ops.append(op(len(ops), "ev2", t, t + 4, 0, [(1, 0)], (WON, 1, [(1, 0)])))   # planted: position 0 won twice
    v = linearizable(ops, max_steps=20_000)
    assert v is not None and "undecided" not in v.message, v


PLANTED = {
    # two proposals at one position both told they won
    "two_winners": [op(0, "ev1", 0, 10, 0, [A1], (WON, 1, [A1])),
                    op(1, "ev2", 20, 30, 0, [B1], (WON, 1, [B1]))],
    # a key nobody proposed stands at 0
    "phantom_key": [op(0, "ev1", 0, 10, 0, [A1], (LOST, 1, [B2]))],
    # a stale read: after 0 and 1 were filled, ev2 is told only 0 is
    "stale_next": [op(0, "ev1", 0, 10, 0, [A1], (WON, 1, [A1])),
                   op(1, "ev1", 20, 30, 1, [A2], (WON, 2, [A2])),
                   op(2, "ev2", 40, 50, 1, [B1], (WON, 2, [B1]))],
    # real-time order broken: ev2 finished before ev1 started, yet ev1 won position 0
    "real_time": [op(0, "ev2", 0, 10, 0, [B1], (WON, 1, [B1])),
                  op(1, "ev1", 20, 30, 0, [A1], (WON, 1, [A1]))],
    # a key placed twice inside the window
    "placed_twice": [op(0, "ev1", 0, 10, 0, [A1], (WON, 1, [A1])),
                     op(1, "ev2", 20, 30, 1, [A1], (WON, 2, [A1]))],
}


@pytest.mark.parametrize("plant", list(PLANTED))
def test_planted_violation_is_caught(plant):
    v = linearizable(PLANTED[plant])
    assert v is not None and v.checker == "cas_linearizable"


def test_too_far_below_the_window():
    ops = [op(0, "ev1", 0, 10, 0, [A1, A2], (WON, 2, [A1, A2])),
           op(1, "ev2", 20, 30, 0, [B1], (TOO_FAR, 2, []))]
    assert linearizable(ops, window=1) is None
    assert linearizable(ops, window=8) is not None


@st.composite
def executions(draw):
    """Proposals by 3 EVs against one CasLog, each applied at an instant inside its interval;
    some answers are dropped (indeterminate)."""
    log = CasLog(window=draw(st.integers(2, 16)))
    n_ops = draw(st.integers(1, 25))
    ops, t = [], 0
    known = {p: 0 for p in ("ev0", "ev1", "ev2")}
    seq = {p: 0 for p in known}
    pending = []
    for i in range(n_ops):
        proc = draw(st.sampled_from(sorted(known)))
        n = known[proc] if draw(st.booleans()) else draw(st.integers(0, log.next + 1))
        k = draw(st.integers(0, 3))
        keys = [(int(proc[-1]), seq[proc] + j) for j in range(k)]
        seq[proc] += k
        call = t
        t += draw(st.integers(1, 5))
        status, nxt, got = log.propose(n, keys)        # the linearization point
        t += draw(st.integers(1, 5))
        known[proc] = max(known[proc], nxt)
        ret = None if draw(st.integers(0, 5)) == 0 else t + draw(st.integers(0, 20))
        ops.append(op(i, proc, call, ret, n, keys, None if ret is None else (status, nxt, got)))
        pending.append(i)
    return ops, log.window


@settings(max_examples=150, deadline=None)
@given(executions())
def test_real_executions_are_linearizable(case):
    ops, window = case
    assert linearizable(ops, window=window) is None
