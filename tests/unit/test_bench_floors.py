"""The floors benchmarks hold figures to (issue 36): a floor does the same work, or it is no floor.

The codec's floor packs the same fields into the same bytes as ``rmp.wire`` and reads the same
values back; a figure's ratio to its floor reads the same way for a rate and for a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rmptwin.bench.bench_rmp import _text, floor_ack, floor_data, floor_decode
from rmptwin.bench.harness import floor_ratio
from rmptwin.rmp import wire

NAMES = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=20)
I64 = st.integers(min_value=0, max_value=2**62)


@given(st.integers(0, 65535), NAMES, I64, I64, st.binary(max_size=200))
def test_the_codec_floor_writes_and_reads_a_data_frame_as_the_codec_does(stripe, src, seq, below, payload):
    blob = floor_data(stripe, _text(src), seq, below, payload)
    assert blob == wire.encode(wire.Data(stripe, src, seq, below, payload))
    assert floor_decode(blob) == (stripe, src, seq, below, payload)


@given(st.integers(0, 65535), st.integers(0, 2**32 - 1), I64, I64, I64, I64, NAMES, NAMES,
       st.lists(st.tuples(NAMES, I64), min_size=1, max_size=40))
def test_the_codec_floor_writes_and_reads_an_ack_as_the_codec_does(stripe, epoch, token, first, ts, stable,
                                                                   site, nxt, msgs):
    blob = floor_ack((stripe, epoch, token, first, ts, stable), _text(site) + _text(nxt),
                     [(_text(s), q) for s, q in msgs])
    assert blob == wire.encode(wire.Ack(stripe, epoch, token, first, ts, site, nxt, tuple(msgs), stable))
    assert floor_decode(blob) == ((stripe, epoch, token, first, ts, stable), site, nxt, tuple(msgs))


def test_a_ratio_to_the_floor_is_its_cost_over_the_floors_for_rates_and_times():
    assert floor_ratio({"value": 50_000, "floor": 100_000, "better": "higher"}) == 2.0   # half the floor's rate
    assert floor_ratio({"value": 6.0, "floor": 3.0, "better": "lower"}) == 2.0           # twice its time
    assert floor_ratio({"value": 6.0}) is None and floor_ratio({"value": "skipped", "floor": 1.0}) is None


def test_the_table_prints_a_rows_floor_and_its_ratio_and_nothing_without_one():
    from rmptwin.bench.__main__ import cell

    row = {"value": 60_000.0, "floor": 180_000.0, "floor_what": "bare struct calls", "better": "higher"}
    assert cell(row, "floor") == "180,000 (bare struct calls)" and cell(row, "x floor") == "3.00 x"
    assert cell({"value": 1.0}, "floor") == cell({"value": 1.0}, "x floor") == ""
