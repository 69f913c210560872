"""The venue, customer and application checkers on hand-made histories, each with a
planted violation of its own kind; and the pcap reader on a hand-written capture."""

from __future__ import annotations

import struct

import pandas as pd
import pytest

from rmptwin.checkers.apps import floor_verdict, orders_verdict
from rmptwin.checkers.customers import (
    CustomerHistory,
    gap_free,
    mold_sequences,
    pcap_frames,
)
from rmptwin.checkers.histories import event_dict
from rmptwin.checkers.linearizable import linearizable
from rmptwin.checkers.venue_checker import VenueHistory, cas_history, venue, venue_history
from rmptwin.core.striping import session_name


def _pos(node, pos, key, t, inc=0):
    return (node, inc, pos, key, event_dict(t, node, "seq_position", key[0], key[1], pos))


def _state(node, pos, h, t):
    return (node, pos, (h, "t" + h), event_dict(t, node, "venue_state", gseq=pos))


def clean_venue() -> VenueHistory:
    positions = [_pos(ev, p, ("gw1", p), 10 * p + k) for p in range(6) for k, ev in enumerate(("ev1", "ev2"))]
    states = [_state(ev, 5, "abc", 100 + k) for k, ev in enumerate(("ev1", "ev2"))]
    produced = {2: (1, event_dict(25, "ev1", "trade", gseq=2))}
    return VenueHistory(positions, states, produced, {2: 1})


def _twice_at_ev(h):
    h.positions.append(_pos("ev1", 3, ("gw1", 3), 999))
    return h


def _disagree(h):
    h.positions[-1] = _pos("ev2", 5, ("gw2", 9), 51)
    return h


def _request_twice(h):
    h.positions.append(_pos("ev1", 6, ("gw1", 2), 999))
    return h


def _states_differ(h):
    h.states[1] = _state("ev2", 5, "abd", 101)
    return h


def _trade_lost(h):
    h.stored = {}
    return h


PLANTED_VENUE = {"position_executed_twice": _twice_at_ev, "evs_disagree": _disagree,
                 "request_executed_twice": _request_twice, "states_differ": _states_differ,
                 "trade_lost": _trade_lost}


def test_clean_venue_passes():
    assert venue(clean_venue()) is None


@pytest.mark.parametrize("plant", list(PLANTED_VENUE))
def test_venue_catches_planted(plant):
    v = venue(PLANTED_VENUE[plant](clean_venue()))
    assert v is not None and v.checker == "venue" and v.events


class _Topo:
    def hosts_with_role(self, role):
        names = {"venue": ["ev1", "ev2"], "history": ["hr1"]}.get(role, [])
        return [type("Host", (), {"name": n})() for n in names]


class _Loaded:
    topology = _Topo()


def _trades_at_20(hr_stored: int) -> pd.DataFrame:
    """ev1 and ev2 each produce position 20's two trades; ev2 is killed, restarts and replays
    position 20 (its second incarnation logs the same two trades); the HR stored ``hr_stored``."""
    trade = lambda t, node: (t, node, "trade", "IBM", 7, 20, "{}")
    rows = [trade(10, "ev2"), trade(10, "ev2"), trade(11, "ev1"), trade(11, "ev1"),
            (12, "hr1", "hr_store", "gw0", 13, 20, f'{{"trades": {hr_stored}}}'),
            (20, "ev2", "crash", "", -1, -1, "{}"), (30, "ev2", "recover", "", -1, -1, "{}"),
            trade(40, "ev2"), trade(40, "ev2")]
    return pd.DataFrame(rows, columns=["t_ns", "node", "kind", "src", "src_seq", "gseq", "detail"])


def test_a_restarted_evs_replayed_trades_are_not_counted_twice():
    # measured emulated (ev_kill9, with a spare): ev2's second incarnation replayed position 20
    # from the HR, and the checker counted 4 trades against the HR's 2
    assert venue(venue_history(_trades_at_20(2), _Loaded())) is None
    v = venue(venue_history(_trades_at_20(1), _Loaded()))
    assert v is not None and "position 20 produced 2 trade(s), the history recorder stored 1" in v.message


def test_cas_history_from_events_makes_retries_indeterminate():
    rows = [(0, "ev1", "cas_invoke", 0, '{"keys":[[0,1]]}'),
            (50, "ev1", "cas_invoke", 0, '{"keys":[[0,1]]}'),                 # a retry
            (60, "ev1", "cas_ok", 0, '{"status":0,"next":1,"keys":[[0,1]]}'),
            (70, "ev2", "cas_invoke", 1, '{"keys":[[1,1]]}'),
            (80, "ev2", "crash", -1, "{}")]
    df = pd.DataFrame(rows, columns=["t_ns", "node", "kind", "gseq", "detail"])
    ops = cas_history(df, {"ev1", "ev2"})
    # the answer may be the first copy's: the answered operation is invoked with the first copy
    assert [(o.call_ns, o.output) for o in ops] == [(0, None), (0, (0, 1, ((0, 1),))), (70, None)]


def test_a_retry_answered_with_the_first_copys_win_is_linearizable():
    # measured emulated (etcd member paused): ev1's first copy won n=0 while ev2 learned its key;
    # ev1 retried and the first copy's WON came back just after the retry went out
    rows = [(0, "ev1", "cas_invoke", 0, '{"keys":[[0,1]]}'),
            (20, "ev2", "cas_invoke", 0, '{"keys":[[0,1],[1,1]]}'),
            (30, "ev2", "cas_ok", 0, '{"status":1,"next":1,"keys":[[0,1]]}'),
            (40, "ev2", "cas_invoke", 1, '{"keys":[[1,1]]}'),
            (50, "ev2", "cas_ok", 1, '{"status":0,"next":2,"keys":[[1,1]]}'),
            (60, "ev1", "cas_invoke", 0, '{"keys":[[0,1]]}'),                 # the retry
            (61, "ev1", "cas_ok", 0, '{"status":0,"next":1,"keys":[[0,1]]}')]
    df = pd.DataFrame(rows, columns=["t_ns", "node", "kind", "gseq", "detail"])
    assert linearizable(cas_history(df, {"ev1", "ev2"})) is None
    # the same answer to a proposal sent only at 60 is impossible: position 0 was taken by then
    df.loc[0, "kind"] = "crash"
    assert linearizable(cas_history(df, {"ev1", "ev2"})) is not None


# ----------------------------------------------------------------------------- customers

def _ev(t, node, kind, g):
    return event_dict(t, node, kind, gseq=g)


def clean_customers() -> CustomerHistory:
    released = {0: {g: _ev(g, "rp1", "release", g) for g in range(1, 6)}}
    received = {("c1", 0): set(range(1, 6)), ("c2", 0): set(range(1, 6))}
    return CustomerHistory(released, received, {"c1": [0], "c2": [0]})


def test_gap_free_customers_pass():
    assert gap_free(clean_customers()) is None


def test_a_customer_gap_is_caught():
    h = clean_customers()
    h.received[("c2", 0)].discard(3)
    v = gap_free(h)
    assert v is not None and v.checker == "customers" and "c2" in v.message and "position 3" in v.message


def test_a_gap_on_the_wire_is_caught():
    h = clean_customers()
    h.wire = {"c1": {0: {1, 2, 4, 5}}}
    v = gap_free(h)
    assert v is not None and "wire" in v.message


def _frame(payload: bytes) -> bytes:
    eth = b"\x01" * 6 + b"\x02" * 6 + b"\x08\x00"
    ip = bytes([0x45, 0, 0, 20 + 8 + len(payload), 0, 0, 0, 0, 64, 17, 0, 0]) + bytes(8)
    udp = struct.pack(">HHHH", 1, 2, 8 + len(payload), 0)
    return eth + ip + udp + payload


def test_mold_sequences_from_a_pcap(tmp_path):
    mold = session_name(1).encode() + struct.pack(">QH", 7, 2) + struct.pack(">H", 3) + b"abc" \
        + struct.pack(">H", 3) + b"def"
    request = session_name(1).encode() + struct.pack(">QH", 3, 4)    # 20 bytes: a re-request, no data
    frames = [_frame(mold), _frame(request), b"short"]
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for f in frames:
        data += struct.pack("<IIII", 0, 0, len(f), len(f)) + f
    path = tmp_path / "c1.pcap"
    path.write_bytes(data)
    assert list(pcap_frames(path)) == frames
    assert mold_sequences(pcap_frames(path)) == {1: {7, 8}}


# ----------------------------------------------------------------------------- applications

def test_floor_and_orders_agreement_keys_are_checkers():
    df = pd.DataFrame([(5, "p1", "floor_state", "", -1, 3, '{"hash":"a"}'),
                       (6, "p2", "floor_state", "", -1, 3, '{"hash":"b"}')],
                      columns=["t_ns", "node", "kind", "src", "src_seq", "gseq", "detail"])
    assert floor_verdict({"participants_agree": True, "floor_trades_lost": 0}, df) is None
    v = floor_verdict({"participants_agree": False, "floor_trades_lost": 0}, df)
    assert v.checker == "floor" and len(v.events) == 2
    assert floor_verdict({"participants_agree": True, "floor_trades_lost": 2}, df).checker == "floor"
    assert orders_verdict({"exchanges_agree": True}, df) is None
    assert orders_verdict({"exchanges_agree": False}, df).checker == "orders"
