"""How the emulation tests know what a link lost on either impairment backend, on
synthetic input: probe sequence numbers, the link's counters (netem qdisc or relay), the
relay's drop log, and repairs in a run's event log. On this machine only the relay runs,
so the netem path is exercised here."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from rmptwin.emulation.losscheck import (
    LinkCount,
    misses_explained,
    netem_count,
    relay_count,
    repaired_first_copies,
    repairs_without_a_drop,
)
from rmptwin.emulation.measure import ProbeResult
from rmptwin.records.tables import DROP_SCHEMA, EVENT_SCHEMA, LINK_COUNT_SCHEMA


def _probe(sent: int, seqs: list[int], start_seq: int) -> ProbeResult:
    return ProbeResult("h2", sent, len(seqs), seqs, [1.0] * len(seqs), 64 * len(seqs), None, None, None, [],
                       start_seq)


def test_missing_probes_are_the_numbers_sent_and_never_received():
    r = _probe(6, [100, 101, 103, 105], start_seq=100)
    assert r.missing == {102, 104}
    assert _probe(3, [0, 1, 2], 0).missing == set()
    assert _probe(3, [], 7).missing == {7, 8, 9}


# `tc -s -j qdisc show dev r1s1-eth2` on a netem link (iproute2 6.1), after 1,000 probes
# and 4 other packets: 51 dropped, 2 still in the delay line.
NETEM_JSON = json.dumps([{
    "kind": "netem", "handle": "8001:", "root": True, "refcnt": 2,
    "options": {"limit": 1000, "delay": {"delay": 0.02, "jitter": 0, "correlation": 0},
                "loss-random": {"loss": 0.05, "correlation": 0}, "ecn": False, "gap": 0},
    "bytes": 98000, "packets": 951, "drops": 51, "overlimits": 0, "requeues": 0, "backlog": 196, "qlen": 2}])


def test_netem_counters_from_tc():
    assert netem_count(NETEM_JSON) == LinkCount(entered=1004, dropped=51)
    assert netem_count("Warning: something tc said first\n" + NETEM_JSON + "\n") == LinkCount(1004, 51)
    later = json.loads(NETEM_JSON)
    later[0].update(packets=1951, drops=101, qlen=0)
    assert netem_count(json.dumps(later)) - netem_count(NETEM_JSON) == LinkCount(1048, 50)


def test_an_interface_without_netem_is_an_error_not_zero_counts():
    noqueue = '[{"kind":"noqueue","handle":"0:","root":true,"bytes":0,"packets":0,"drops":0,"qlen":0}]'
    with pytest.raises(ValueError, match="no netem"):
        netem_count(noqueue)
    with pytest.raises(ValueError):
        netem_count("")


def test_relay_counters_per_direction():
    t = pa.Table.from_pylist([
        {"link": "s1-s2", "from_node": "s1", "to_node": "s2", "frame": "ALL", "packets": 1004, "dropped": 51},
        {"link": "s1-s2", "from_node": "s2", "to_node": "s1", "frame": "ALL", "packets": 10, "dropped": 0},
    ], schema=LINK_COUNT_SCHEMA)
    assert relay_count(t, "s1-s2", "s1") == LinkCount(1004, 51)
    with pytest.raises(ValueError):
        relay_count(t, "s1-s3", "s1")


MISSED = {1003, 1017, 1090}


@pytest.mark.parametrize("link, logged", [
    (LinkCount(1000, 3), None),            # netem: counters only
    (LinkCount(1004, 4), None),            # one of 4 other packets (ARP, IGMP) also dropped
    (LinkCount(1000, 3), set(MISSED)),     # relay: counters and the log agree
])
def test_the_links_record_accounts_for_exactly_the_missed_probes(link, logged):
    assert misses_explained(MISSED, 1000, link, logged) == []


@pytest.mark.parametrize("missed, link, logged, problem", [
    (set(), LinkCount(1000, 0), None, "did not happen"),                 # never compare nothing with nothing
    (set(), LinkCount(1000, 0), set(), "did not happen"),
    (MISSED, LinkCount(1000, 2), None, "lost elsewhere"),                # a receiver-side loss
    (MISSED, LinkCount(1001, 5), None, "more than the 3 missed"),        # drops the receiver did not notice
    (MISSED, LinkCount(900, 3), None, "only 900 packets entered"),      # probes took another path
    (MISSED, LinkCount(1000, 3), {1003, 1017, 1091}, "disagree"),      # the log names other packets
])
def test_what_the_links_record_does_not_explain_is_named(missed, link, logged, problem):
    problems = misses_explained(missed, 1000, link, logged)
    assert any(problem in p for p in problems), problems


def _events(rows: list[dict]) -> pa.Table:
    base = {"t_ns": 0, "role": "primary", "gseq": -1, "bytes": 64}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=EVENT_SCHEMA)


EVENTS = _events([
    {"node": "srcny", "role": "source", "kind": "send", "src": "srcny", "src_seq": 8, "detail": '{"stripe":1}'},
    {"node": "rplon", "kind": "recv", "src": "srcny", "src_seq": 7, "detail": '{"stripe":1,"repair":false}'},
    {"node": "rplon", "kind": "recv", "src": "srcny", "src_seq": 8, "detail": '{"stripe":1,"repair":true}'},
    {"node": "rssyd", "kind": "recv", "src": "srcny", "src_seq": 2, "detail": '{"stripe":0,"repair":true}'},
    {"node": "rptyo", "kind": "recv", "src": "srctyo", "src_seq": 1, "detail": "{}"},
])


def test_repaired_first_copies_are_read_from_the_event_log():
    assert repaired_first_copies(EVENTS) == {("rplon", "srcny", 1, 8), ("rssyd", "srcny", 0, 2)}
    assert repaired_first_copies(_events([])) == set()


def _drops(rows: list[dict]) -> pa.Table:
    base = {"t_ns": 1, "from_node": "a", "to_node": "b", "gseq": -1, "reason": "loss"}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=DROP_SCHEMA)


def test_each_repair_is_matched_with_a_dropped_data_frame_of_its_stripe():
    repaired = repaired_first_copies(EVENTS)
    drops = _drops([
        {"link": "nyc-lon", "frame": "DATA", "src": "srcny", "src_seq": 8, "group": "rmp/1"},
        {"link": "sgp-syd", "frame": "DATA", "src": "srcny", "src_seq": 2, "group": "rmp/1"},   # other stripe
        {"link": "sgp-syd", "frame": "NACK", "src": "srcny", "src_seq": 2, "group": "rmp/0"},   # not the data
    ])
    assert repairs_without_a_drop(repaired, drops) == {("rssyd", "srcny", 0, 2)}
    drops = pa.concat_tables([drops, _drops([{"link": "sgp-syd", "frame": "DATA", "src": "srcny", "src_seq": 2,
                                              "group": "rmp/0"}])])
    assert repairs_without_a_drop(repaired, drops) == set()
