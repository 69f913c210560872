"""Shrunk reproductions that campaigns found, kept as regression experiments (each YAML says
what it reproduces in its first line). Each test states the invariant and is expected to fail
while the finding stands (xfail, strict: once fixed, the test passes and must lose its mark).

- line3, retransmit server rx1 crashed and a partition: guaranteed customer c1 skipped position
  54 after its re-requests were exhausted (campaign seed 7, run 3; 2 faults after shrinking).
  Fixed: a guaranteed customer no longer gives a position up for want of an answer;
- quickstart (agreed), one clock jump of +88 ms on rptyo: rptyo never delivered srcny#79 of
  stripe 0 (bench campaign seed 1, run 4). Fixed: rptyo held ack 13, waiting for srcny#78,
  and ack 17, not 14-16; once #78 came it placed 13 and never asked for 14 (a receiver asked
  for missing acks only when one arrived), the hidden gap of the safe-delivery finding below;
- quickstart (agreed), rpsgp paused 1.6 s holding the token of stripe 1 (bench pause run 8), and
  a partition healed 1.4 s before the workload ends (bench partition run 115): the new ring's
  members went on asking the old ring's members, which lacked the acks, k_r tau_r each, instead
  of the recovery site NEW_RING names. Fixed: NEW_RING starts open requests over;
- quickstart (safe), a partition (safe partition run 134): a hidden gap in the acks (held 12
  and 14, not 13) that nothing asked for once 12 was placed; the token stopped there. Fixed;
- quickstart (safe), rpny crashed (safe crash run 67): the new ring's first ack, passing the
  token to rplon, overtook NEW_RING; rplon placed it while frozen and never took the token. Fixed.

Agreed delivery's order splits (docs/experiments.md: random trees, two racing reformation
servers) have not come up in the campaigns run so far (2,040 quickstart schedules); when one
does, its repro goes here.
"""

from __future__ import annotations

from pathlib import Path

from rmptwin.checkers import first_violation
from rmptwin.checkers.suite import check_events
from rmptwin.model import load_experiment
from rmptwin.sim.simulate import simulate

HERE = Path(__file__).resolve().parent / "regressions"


def _violation(name: str):
    loaded = load_experiment(HERE / name)
    return first_violation(check_events(simulate(loaded).events.to_pandas(), loaded))


def test_each_regression_names_what_it_reproduces():
    for path in HERE.glob("*.yaml"):
        said = [ln for ln in path.read_text().splitlines()[:3] if ln.startswith("# Reproduces: ")]
        assert said and ":" in said[0][len("# Reproduces: "):]


def test_guaranteed_customer_gap_free_with_rx_crashed_and_partition():
    """c1 (rx1 crashed) found position 54 missing after the partition healed and asked rx1,
    rx1, rp1 (rejoining: no copy yet), then gave it up after k_r = 3; it now asks on, rp2 next,
    and is repaired (rmp.customer)."""
    v = _violation("line3-rx-crash-partition-customer-gap.yaml")
    assert v is None, v.line()


def test_no_message_lost_after_a_clock_jump():
    # Fixed: the acks lost above a message rptyo waited for are asked for once it places
    # that message (receiver.StreamReceiver.advance); the jump only shifted the schedule.
    v = _violation("quickstart-clock-jump-message-lost.yaml")
    assert v is None, v.line()


def test_no_message_lost_after_the_token_site_pauses():
    v = _violation("quickstart-pause-token-site-new-ring.yaml")
    assert v is None, v.line()


def test_members_ask_the_recovery_site_after_a_new_ring():
    v = _violation("quickstart-partition-requests-after-new-ring.yaml")
    assert v is None, v.line()


def test_a_gap_in_the_acks_above_a_placed_one_is_requested():
    v = _violation("quickstart-safe-partition-hidden-ack-gap.yaml")
    assert v is None, v.line()


def test_a_token_passed_before_new_ring_arrived_is_taken():
    v = _violation("quickstart-safe-crash-token-before-new-ring.yaml")
    assert v is None, v.line()
