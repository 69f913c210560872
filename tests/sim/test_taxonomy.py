"""The sequencer taxonomy in the simulator (rmptwin.taxonomy through
rmptwin.studies.taxonomy_compare): total order, repair of lost packets, a sequencer's
(locker's) crash, and the orderings the seed's protocol descriptions imply."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmptwin.analysis.taxonomy_report import COLUMNS, write_outputs
from rmptwin.studies.taxonomy_compare import TAXONOMY, Point, run_point

# GUP moves one update at a time (2 round trips each): it is given a load it can carry.
RATE = {"ub": 100.0, "bb": 100.0, "uub": 100.0, "gup": 20.0}


@pytest.mark.parametrize("protocol", TAXONOMY)
def test_two_percent_loss_everywhere_keeps_total_order_and_loses_nothing(protocol):
    row = run_point(Point(protocol, 6, RATE[protocol], "steady", seed=3, duration_s=1.0, link_loss=0.02))
    assert row["sent"] > 10 and row["naks"] > 0, "no loss was repaired: the test would prove nothing"
    assert row["agree"], "two receivers put different messages at one gseq"
    assert row["lost"] == 0 and row["delivered_pct"] == 100.0


@pytest.mark.parametrize("protocol", TAXONOMY)
def test_sequencer_crash_survivors_agree_and_resume_with_nothing_lost(protocol):
    row = run_point(Point(protocol, 5, RATE[protocol], "crash", seed=2, duration_s=1.0))
    assert row["agree"]
    assert row["lost"] == 0, "a message some survivor should hold was lost in the takeover"
    assert row["resume_ms"] is not None and row["resume_ms"] < 1000
    assert row["seq_node"] == "r1" or protocol == "gup"   # the successor took over the work


@pytest.mark.parametrize("protocol", TAXONOMY)
def test_a_falsely_suspected_sequencer_never_makes_survivors_disagree(protocol):
    # seq is cut off for 0.3 s and comes back: r1 has taken over meanwhile. The old sequencer
    # steps down or leaves the group; every operable member agrees and nothing is lost.
    row = run_point(Point(protocol, 5, RATE[protocol], "partition", seed=2, duration_s=1.0))
    assert row["agree"] and row["lost"] == 0


@pytest.mark.parametrize("protocol", TAXONOMY)
def test_a_receiver_losing_packets_is_repaired(protocol):
    row = run_point(Point(protocol, 5, RATE[protocol], "lossy", seed=4, duration_s=1.0))
    assert row["lost"] == 0 and row["agree"]
    assert row["lossy_p99_ms"] > row["latency_p50_ms"]   # its repairs cost it time, not messages


@pytest.fixture(scope="module")
def steady() -> dict[str, dict]:
    return {p: run_point(Point(p, 8, 100.0, "steady", seed=5, duration_s=1.0)) for p in TAXONOMY}


def test_seed_bb_delivers_every_message_to_every_process_twice_ub_once(steady):
    # Seed, Broadcast-Broadcast: "all processes receive it ... broadcasts it to all processes again";
    # Unicast-Broadcast: the sender submits to the sequencer only, which broadcasts once.
    assert steady["ub"]["rx_per_delivered"] < steady["bb"]["rx_per_delivered"]
    assert steady["bb"]["rx_per_delivered"] > 1.8 * 8


def test_seed_uub_costs_a_unicast_round_trip_more_than_ub(steady):
    # Seed, Unicast-Unicast-Broadcast: submit, the sequencer's response, then the broadcast.
    assert steady["ub"]["msgs_per_delivered"] < steady["uub"]["msgs_per_delivered"]
    assert steady["ub"]["latency_p50_ms"] < steady["uub"]["latency_p50_ms"]


def test_seed_uub_sequencer_answers_with_a_number_so_carries_fewer_bytes_than_ubs(steady):
    # Seed: "Sequencer responds to the sender with a sequence number, or a permission to send".
    assert steady["uub"]["seq_bytes_per_s"] / steady["uub"]["seq_msgs_per_s"] < \
        steady["ub"]["seq_bytes_per_s"] / steady["ub"]["seq_msgs_per_s"]


def test_seed_gup_blocks_while_awaiting_the_lockers_permission(steady):
    # Seed, Tandem GUP: "communications are blocked while awaiting permission from the Locker".
    assert steady["gup"]["latency_p50_ms"] > 2 * steady["ub"]["latency_p50_ms"]


def test_the_comparison_table_has_one_row_per_point_and_every_column(tmp_path: Path):
    rows = [run_point(Point(p, 3, 50.0, sc, duration_s=0.5)) for p in ("ub", "rmp_time") for sc in ("steady", "crash")]
    paths = write_outputs(rows, tmp_path)
    table = pq.read_table(tmp_path / "table.parquet")
    assert table.num_rows == 4 and set(COLUMNS) <= set(table.column_names)
    text = (tmp_path / "table.md").read_text()
    assert "Loses (latency)" in text and "Sequencer crash" in text
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_compare_cli_says_what_to_fix_in_one_line():
    from typer.testing import CliRunner

    from rmptwin.cli.taxonomy_commands import app
    result = CliRunner().invoke(app, ["compare", "--receivers", "5,abc"])
    assert result.exit_code == 2
    assert "--receivers" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["compare", "--protocols", "ub,isis"])
    assert result.exit_code == 2 and "unknown isis" in result.output
