"""control_per_data counts control frames up to the end of the run (analysis.summary): an
emulated run's drain past the duration, its ring idling until the runner's STOP, is not the
protocol's control per data message. Measured on the emulated one-control-per-data run (line3
without loss, 20 msg/s, event-driven): 60 ACK and 11 NULL_TOKEN frames, 7 of the null tokens
after the 3.5 s duration (3.60-4.26 s), so 1.18 per data message against the simulator's
1.08; counted to the end of the run, 1.07."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from rmptwin.analysis.summary import summarize
from rmptwin.core.events import Event, Kind
from rmptwin.model import load_experiment
from rmptwin.records.tables import EVENT_SCHEMA, row
from rmptwin.runner.pipeline import run_experiment

REPO = Path(__file__).resolve().parents[2]
MS = 1_000_000


def _with(events: pa.Table, extra: list[dict]) -> pd.DataFrame:
    return pd.concat([events.to_pandas(), pa.Table.from_pylist(extra, schema=EVENT_SCHEMA).to_pandas()],
                     ignore_index=True)


def _null_token(t_ns: int, node: str) -> dict:
    return row(t_ns, node, "primary", Event(Kind.CTRL_SENT, bytes=40, detail={"type": "NULL_TOKEN"}))


def test_idle_null_tokens_of_a_drain_past_the_duration_are_not_counted(tmp_path):
    loaded = load_experiment(REPO / "experiments" / "claims" / "base" / "line3-lossless.yaml")
    run, s, _, _ = run_experiment(loaded, "sim", out=tmp_path / "sim")
    events = run.read_events()
    end = round(loaded.duration_s * 1e9)
    assert int(pd.Series(events.column("t_ns").to_pylist()).max()) <= end   # the simulator stops at the end
    # the emulated drain: a null token every ~108 ms past the end, as measured
    drain = [_null_token(end + 100 * MS + i * 108 * MS, f"rp{1 + i % 3}") for i in range(7)]
    assert summarize(_with(events, drain), loaded)["control_per_data"] == s["control_per_data"]


def test_control_past_the_duration_counts_while_messages_still_move(tmp_path):
    """A run behind its schedule acknowledges late: that ack, and the null token before it, count."""
    loaded = load_experiment(REPO / "experiments" / "claims" / "base" / "line3-lossless.yaml")
    run, s, _, _ = run_experiment(loaded, "sim", out=tmp_path / "sim")
    end = round(loaded.duration_s * 1e9)
    late = [_null_token(end + 50 * MS, "rp1"),
            row(end + 80 * MS, "rp2", "primary", Event(Kind.CTRL_SENT, bytes=60, detail={"type": "ACK"})),
            row(end + 80 * MS, "rp2", "primary", Event(Kind.ACK_SENT, gseq=10_000, detail={"token": 10_000})),
            _null_token(end + 300 * MS, "rp3")]   # after the last message work: the drain
    got = summarize(_with(run.read_events(), late), loaded)
    assert got["control_per_data"] == (s["control_per_data"] * s["messages_sent"] + 2) / s["messages_sent"]
