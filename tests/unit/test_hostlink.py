"""A delay-only access link shaped by its host's node (``node.hostlink``): the link model's
timing, FIFO order, and the same counts and drop records a relay leaves behind."""

from __future__ import annotations

import json

from rmptwin.core.linkmodel import WIRE_HEADER_BYTES, LinkConfig, LinkDirection, stream_seed
from rmptwin.emulation.droplog import counts_table, drops_table, read_access_reports
from rmptwin.model import LinkParams
from rmptwin.node.hostlink import HostLink
from rmptwin.rmp.wire import Data, encode
from rmptwin.rundir.run import NODE_FILES


def _data(seq: int) -> bytes:
    return encode(Data(stripe=0, src="srcny", src_seq=seq, acked_below=0, payload=b"x" * 64))


def test_a_burst_leaves_after_the_delay_spaced_by_serialization_and_in_order():
    params = LinkParams(delay_ms=2.0, bandwidth_mbps=10)
    link = HostLink("cny1", "nyc", params, seed=1)
    sent = [_data(i) for i in range(5)]
    for d in sent:
        link.send(0, d, ("239.1.0.1", 7000), "10.0.0.1")
    wire_ns = (len(sent[0]) + WIRE_HEADER_BYTES) * 8000 / 10        # bits at 10 Mbit/s
    leaves = [leave for leave, _d, _a in link.up.items]
    assert leaves[0] == round(2_000_000 + wire_ns)
    assert all(abs((b - a) - wire_ns) <= 1 for a, b in zip(leaves, leaves[1:]))
    assert link.up.due(leaves[1]) and [d for _l, d, _a in link.up.items] == sent[2:]
    assert link.next_due() == leaves[2]
    # The simulator's model with the relay's seed string gives the same times.
    model = LinkDirection(LinkConfig.from_spec(params), stream_seed(1, "cny1-nyc", "cny1", "nyc"))
    assert [model.offer(0, len(d) + WIRE_HEADER_BYTES) for d in sent] == leaves


def test_a_full_queue_drops_and_leaves_the_relays_records(tmp_path):
    params = LinkParams(delay_ms=1.0, bandwidth_mbps=10, queue_packets=3)
    link = HostLink("csyd2", "syd", params, seed=1)
    for i in range(5):
        link.receive(0, _data(i), "srcny", "10.0.0.1", "10.0.0.29", 7000)
    assert len(link.down.items) == 3 and link.down.dropped[1] == 2
    path = tmp_path / NODE_FILES["access_link"].format(host="csyd2", incarnation=0)
    path.write_text(json.dumps({"counts": link.counts(), "drops": link.dropped_frames}))
    frames, counts = read_access_reports([path], clock_shift_ns=1_000)
    drops = drops_table(frames, {"10.0.0.1": "srcny"}, {}).to_pylist()
    assert [(d["link"], d["from_node"], d["to_node"], d["frame"], d["src"], d["src_seq"], d["reason"], d["t_ns"])
            for d in drops] == [("csyd2-syd", "syd", "csyd2", "DATA", "srcny", i, "queue", 1_000) for i in (3, 4)]
    rows = {(r["from_node"], r["to_node"]): (r["packets"], r["dropped"]) for r in counts_table([], counts).to_pylist()}
    assert rows == {("csyd2", "syd"): (0, 0), ("syd", "csyd2"): (5, 2)}
