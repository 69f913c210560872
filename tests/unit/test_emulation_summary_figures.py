"""`rmptwin run`'s summary prints its measured figures rounded: the overload line's run-queue
p90 is a percentile of samples (9.299999999999997 as numpy computes it), shown as 9.3."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from rmptwin.cli.display import print_emulation_summary


def _printed(runtime: dict[str, object], tmp_path: Path) -> str:
    console = Console(width=400, soft_wrap=True, color_system=None)
    run = SimpleNamespace(summary={"receivers": 3, "runtime": runtime}, path=tmp_path,
                          dir=SimpleNamespace(pcap_files=lambda: [], pcaps_dir=tmp_path / "pcaps"))
    with console.capture() as captured:
        print_emulation_summary(console, run)  # type: ignore[arg-type]  # a stand-in for api.Run
    return captured.get()


def test_the_overload_line_shows_rounded_figures(tmp_path: Path) -> None:
    text = _printed({"nodes": 9, "wall_s": 12.300000000000004, "overloaded": True,
                     "load": {"cpus": 4, "run_queue": {"p50": 3.0, "p90": 9.299999999999997, "max": 12, "n": 40},
                              "timer_lateness_p99_ms": 17.812000000000001, "timer_lateness_role": "primary"}},
                    tmp_path)
    line = next(ln for ln in text.splitlines() if "machine overloaded" in ln)
    assert "run queue p90 9.3 on 4 CPUs" in line and "primary timers 17.8 ms late" in line, line
    assert "12.3 s wall" in text
    assert not re.search(r"\d\.\d{4,}", text), text   # no float printed with its binary noise


def test_a_lateness_below_a_millisecond_keeps_its_digits(tmp_path: Path) -> None:
    text = _printed({"nodes": 9, "wall_s": 5.0, "overloaded": True,
                     "load": {"cpus": 1, "run_queue": {"p90": 2.0}, "timer_lateness_p99_ms": 0.042,
                              "timer_lateness_role": "primary"}}, tmp_path)
    assert "timers 0.042 ms late" in text
