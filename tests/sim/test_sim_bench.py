"""The `make bench` framework: discovery, the markdown report, a broken benchmark does not stop the rest."""

from __future__ import annotations

import sys
import types

from rmptwin.bench import __main__ as bench
from rmptwin.bench import harness
from rmptwin.bench.harness import BenchFiles


def test_discovers_benchmarks_and_rejects_unknown_names(capsys):
    assert "sim" in bench.discover()
    assert bench.main(["--only", "no_such_bench"]) == 2
    assert "no_such_bench" in capsys.readouterr().out


def test_rows_failures_and_report(tmp_path, monkeypatch):
    good = types.ModuleType("rmptwin.bench.bench_zzgood")
    good.run = lambda quick: [{"metric": "speed", "value": 1234.5, "unit": "x/s", "goal": ">= 1k", "ok": quick}]
    bad = types.ModuleType("rmptwin.bench.bench_zzbad")

    def boom(quick):
        raise RuntimeError("no")
    bad.run = boom
    monkeypatch.setitem(sys.modules, good.__name__, good)
    monkeypatch.setitem(sys.modules, bad.__name__, bad)
    rows = bench.run_one("zzgood", True) + bench.run_one("zzbad", True)
    assert rows[0] == {"bench": "zzgood", "metric": "speed", "value": 1234.5, "unit": "x/s", "goal": ">= 1k", "ok": True}
    assert rows[1]["metric"] == "benchmark wall time"
    assert rows[2]["bench"] == "zzbad" and rows[2]["ok"] is False and "RuntimeError: no" in rows[2]["note"]
    files = BenchFiles(tmp_path)
    bench.write_report(harness.merge_runs([rows]), files, bench.header(quick=True))
    text = files.markdown_path.read_text()
    assert "| zzgood | speed | 1,234 |" in text and "| zzbad | (failed) |" in text
    assert files.json_path.exists()
