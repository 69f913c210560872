"""Timer lateness: the histogram's figures, the driver's timers, the summary's split of the
fairness spread into the protocol's part and the late timers' part, the overload verdict."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rmptwin.analysis.summary import summarize
from rmptwin.core.events import Event, Kind
from rmptwin.emulation.hostload import overload_verdict, procs_running
from rmptwin.model import load_experiment
from rmptwin.node.driver import EARLY_WAKE_NS, NodeDriver, is_release_deadline
from rmptwin.records.tables import EVENT_SCHEMA, row
from rmptwin.records.timer_lateness import LatenessHistogram
from rmptwin.rmp.corebase import Timers

REPO = Path(__file__).resolve().parents[2]
MS = 1_000_000


def test_histogram_percentiles_are_within_its_resolution_and_max_is_exact():
    rng = random.Random(3)
    values = [int(rng.expovariate(1 / 2e6)) for _ in range(20_000)]   # mean 2 ms
    h = LatenessHistogram()
    for v in values:
        h.add(v)
    s = h.summary_ms()
    assert s["n"] == len(values)
    assert s["max"] == round(max(values) / 1e6, 3)
    for q, key in ((50, "p50"), (99, "p99")):
        exact = np.percentile(values, q) / 1e6
        assert abs(s[key] - exact) / exact < 0.05, (key, s[key], exact)


def test_histograms_merge_through_their_event_detail():
    a, b = LatenessHistogram(), LatenessHistogram()
    for v in range(0, 10 * MS, MS):
        a.add(v)
    b.add(50 * MS)
    merged = LatenessHistogram.from_detail(a.to_detail())
    merged.merge(LatenessHistogram.from_detail(b.to_detail()))
    assert merged.n == 11 and merged.max_ns == 50 * MS
    assert 4 * MS <= merged.quantile_ns(0.5) <= 5.3 * MS
    assert LatenessHistogram().summary_ms() == {"p50": None, "p99": None, "max": None, "n": 0}


class _OneTimerCore:
    """A core with one release deadline, 30 ms after it starts; records the time it is handed."""

    def __init__(self, deadline: int) -> None:
        self.timers = Timers()
        self.timers.set((0, "release"), deadline)
        self.handled: list[int] = []

    def groups(self):
        return frozenset()

    def datagrams_to_send(self, now):
        return []

    def next_event(self):
        return None

    def get_timer(self):
        return self.timers.next()

    def handle_timer(self, now):
        self.handled.append(now)
        self.timers.pop_due(now)


def test_driver_fires_a_release_deadline_never_early_and_records_its_lateness(tmp_path):
    class _Log:
        def add(self, *a):
            pass

    async def run() -> tuple[_OneTimerCore, NodeDriver]:
        t0 = time.time_ns()
        core = _OneTimerCore(30 * MS)
        d = NodeDriver(core, "rp1", "primary", {"rp1": "127.0.0.1"}, t0, _Log())
        assert is_release_deadline(core, 30 * MS) and not is_release_deadline(core, 31 * MS)
        d.start(asyncio.get_running_loop())
        assert d._timer_precise
        await asyncio.sleep(0.1)
        return core, d

    core, d = asyncio.run(run())
    assert len(core.handled) == 1 and core.handled[0] >= 30 * MS
    assert d.lateness.n == 1
    assert d.lateness.max_ns == core.handled[0] - 30 * MS
    assert EARLY_WAKE_NS > 1 * MS   # the selector rounds to the ms: waking later could not be exact


# ------------------------------------------------------------------ summary


def _table(rows: list[tuple[int, str, str, Event]]) -> pa.Table:
    cols = {f.name: [] for f in EVENT_SCHEMA}
    for t, node, role, ev in rows:
        for k, v in row(t, node, role, ev).items():
            cols[k].append(v)
    return pa.table(cols, schema=EVENT_SCHEMA)


def _one_message(extra: list) -> list:
    """src1's message 1 at gseq 1, due at 1000 ms on every R_T of line3: rp1 releases on time,
    rp2's timer fires 3 ms late, rp3 places it only at 1010 ms (the protocol's lateness) and
    its timer adds 2 ms more."""
    due = 1000 * MS
    rows = [(100 * MS, "src1", "source", Event(Kind.SEND, "src1", 1, -1, 64, {"stripe": 0}))]
    for node, placed, released in (("rp1", 900, 1000), ("rp2", 900, 1003), ("rp3", 1010, 1012)):
        rows.append((placed * MS, node, "primary", Event(Kind.DELIVER, "src1", 1, 1, 64, {"stripe": 0, "token": 1})))
        rows.append((released * MS, node, "primary",
                     Event(Kind.RELEASE, "src1", 1, 1, 64, {"stripe": 0, "late_ns": released * MS - due})))
    return rows + extra


def _lateness_event(node: str, role: str, values_ms: list[float]) -> tuple:
    h = LatenessHistogram()
    for v in values_ms:
        h.add(int(v * MS))
    return (2000 * MS, node, role, Event(Kind.TIMER_LATENESS, detail={**h.to_detail(), "sched": {"got": "rr:1"}}))


def test_summary_splits_fairness_into_protocol_and_timer_parts():
    loaded = load_experiment(REPO / "experiments/line3.yaml")
    extra = [_lateness_event("rp1", "primary", [0.1, 0.2]), _lateness_event("rp2", "primary", [3.0]),
             _lateness_event("c1", "customer", [40.0])]
    s = summarize(_table(_one_message(extra)), loaded)
    assert s["fairness_spread_ms"]["max"] == pytest.approx(12.0)
    assert s["fairness_protocol_ms"]["max"] == pytest.approx(10.0)
    assert s["fairness_timer_ms"]["max"] == pytest.approx(2.0)
    lat = s["timer_lateness_ms"]
    assert set(lat) == {"primary", "customer"}
    assert lat["primary"]["n"] == 3 and lat["primary"]["max"] == 3.0
    assert lat["customer"]["p50"] == pytest.approx(40.0, rel=0.05)


def test_a_run_without_measured_timers_gets_no_emulation_keys():
    loaded = load_experiment(REPO / "experiments/line3.yaml")
    s = summarize(_table(_one_message([])), loaded)
    assert not {"fairness_protocol_ms", "fairness_timer_ms", "timer_lateness_ms"} & set(s)
    assert s["fairness_spread_ms"]["max"] == pytest.approx(12.0)


# ------------------------------------------------------------------ overload


def test_run_queue_is_read_from_proc_stat():
    assert procs_running("cpu  1 2 3\nprocs_running 7\nprocs_blocked 0\n") == 7
    assert procs_running("cpu 1\n") is None


def test_overloaded_needs_both_a_long_run_queue_and_late_timers():
    late_h, prompt_h = LatenessHistogram(), LatenessHistogram()
    for _ in range(100):
        late_h.add(20 * MS)
        prompt_h.add(MS // 10)
    # per role, as summary.json's timer_lateness_ms: the late role decides, however prompt the others
    late = {"primary": late_h.summary_ms(), "customer": prompt_h.summary_ms(), "relay": prompt_h.summary_ms()}
    prompt = {"primary": prompt_h.summary_ms(), "customer": prompt_h.summary_ms()}
    busy, idle = [6] * 50, [1] * 50
    v = overload_verdict(busy, late, cpus=2)
    assert v["overloaded"] is True
    assert v["load"]["run_queue"]["p90"] == 6 and v["load"]["timer_lateness_p99_ms"] == pytest.approx(20, rel=0.05)
    assert v["load"]["timer_lateness_role"] == "primary"
    assert v["load"]["timer_lateness_p99_ms"] == late["primary"]["p99"]
    assert overload_verdict(busy, prompt, cpus=2)["overloaded"] is False
    assert overload_verdict(idle, late, cpus=2)["overloaded"] is False
    assert overload_verdict([], late, cpus=2)["overloaded"] is False
    assert overload_verdict(busy, {}, cpus=2)["overloaded"] is False


def test_the_overload_line_and_the_summary_read_one_lateness_figure():
    """run_lateness gives summary.json's timer_lateness_ms for the same events."""
    from rmptwin.analysis.summary import timer_lateness_by_role
    from rmptwin.emulation.hostload import run_lateness

    rows = []
    for role, late_ms in (("primary", 40), ("customer", 1)):
        h = LatenessHistogram()
        for _ in range(50):
            h.add(late_ms * MS)
        rows.append({"kind": Kind.TIMER_LATENESS, "role": role, "detail": json.dumps(h.to_detail())})
    rows.append({"kind": Kind.RECV, "role": "primary", "detail": "{}"})
    table = pa.Table.from_pylist(rows)
    assert run_lateness(table) == timer_lateness_by_role(table.to_pandas())


def test_the_cpu_cgroup_of_a_process_is_read_from_proc(tmp_path):
    from rmptwin.node.priority import cpu_cgroup_of

    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cgroup").write_text("12:pids:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/x\n")
    assert cpu_cgroup_of(42, proc=tmp_path) == "/docker/abc"
    assert cpu_cgroup_of(43, proc=tmp_path) is None


def test_release_priority_raises_a_containers_shares_and_restores_them(tmp_path, monkeypatch):
    from rmptwin.node import priority as priority

    container = tmp_path / "docker" / "abc"
    container.mkdir(parents=True)
    (tmp_path / "docker" / "cpu.shares").write_text("1024\n")
    (container / "cpu.shares").write_text("1024\n")
    (tmp_path / "cpu.shares").write_text("1024\n")
    monkeypatch.setattr(priority, "cpu_cgroup_of", lambda pid: {1: "/docker/abc", 2: "/"}[pid])
    p = priority.ReleasePriority(cgroup_cpu=tmp_path)
    assert p._raise_container_shares(2) is False            # not a container: left alone
    assert (tmp_path / "cpu.shares").read_text().strip() == "1024"
    assert p._raise_container_shares(1) is True
    assert int((container / "cpu.shares").read_text()) == priority.CPU_SHARES
    assert int((tmp_path / "docker" / "cpu.shares").read_text()) == priority.DOCKER_SHARES
    p.restore()
    assert (tmp_path / "docker" / "cpu.shares").read_text().strip() == "1024"


def test_an_rt_budget_is_given_parent_first_and_taken_back_child_first(tmp_path, monkeypatch):
    from rmptwin.node import priority as priority

    container = tmp_path / "docker" / "abc"
    container.mkdir(parents=True)
    for d in (tmp_path / "docker", container):
        (d / "cpu.rt_runtime_us").write_text("0\n")
    order: list[str] = []
    real_write = priority.Path.write_text

    def write(path, text, *a, **k):
        order.append(f"{path.parent.name}={text}")
        return real_write(path, text, *a, **k)

    monkeypatch.setattr(priority.Path, "write_text", write)
    monkeypatch.setattr(priority, "cpu_cgroup_of", lambda pid: "/docker/abc")
    p = priority.ReleasePriority(n_release=9, cgroup_cpu=tmp_path)
    monkeypatch.setattr(p, "_rr", lambda pid: True)
    assert p._rr_with_budget(1) is True
    assert int((container / "cpu.rt_runtime_us").read_text()) == priority.RT_BUDGET_US // 9
    p.restore()
    assert order == [f"docker={priority.RT_BUDGET_US}", f"abc={priority.RT_BUDGET_US // 9}", "abc=0", "docker=0"]
