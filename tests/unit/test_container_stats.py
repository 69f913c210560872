"""The Docker hosts' CPU and memory (emulation.containerstats) from recorded engine stats records,
their table in the report, and the one line a missing engine gives (emulation.engine): no engine needed."""

from __future__ import annotations

import socket

import pytest

from rmptwin.analysis import report
from rmptwin.emulation import cleanup, env
from rmptwin.emulation import docker_engine as engine
from rmptwin.emulation.containerstats import (
    ContainerStatsSampler,
    StatsSample,
    mem_bytes,
    node_figures,
    read_ns,
    sample_of,
)
from rmptwin.errors import UserError

S = 1_000_000_000
MIB = 1 << 20

# A record of dockerd 20.10 on cgroup v1 (one_shot), trimmed to what is read, from a container
# limited to 0.5 CPU running a busy loop.
V1_RECORD = {
    "read": "2026-11-26T12:19:55.293746529Z", "preread": "0001-01-01T00:00:00Z",
    "cpu_stats": {"cpu_usage": {"total_usage": 1021695430, "percpu_usage": [11837036, 1009858394]},
                  "system_cpu_usage": 27684750000000, "online_cpus": 2,
                  "throttling_data": {"periods": 22, "throttled_periods": 15, "throttled_time": 254783107}},
    "precpu_stats": {"cpu_usage": {"total_usage": 0}, "throttling_data": {"periods": 0}},
    "memory_stats": {"usage": 4968448, "max_usage": 5492736, "limit": 67108864,
                     "stats": {"cache": 4337664, "inactive_file": 2637824, "total_inactive_file": 2637824,
                               "rss": 114688}},
    "name": "/rmptwin-probe-1",
}
# cgroup v2 names the cache inactive_file only (and the engine reports usage in ns all the same).
V2_RECORD = {"read": "2026-11-26T12:19:56.000000001Z",
             "cpu_stats": {"cpu_usage": {"total_usage": 1_500_000_000}},
             "memory_stats": {"usage": 100 * MIB, "stats": {"inactive_file": 30 * MIB, "anon": 60 * MIB}}}
# a stopped container: the engine sends zero stamps and no memory figures
STOPPED_RECORD = {"read": "0001-01-01T00:00:00Z", "cpu_stats": {"cpu_usage": {}}, "memory_stats": {}}


def test_engine_timestamps_are_read_to_the_nanosecond_and_the_zero_time_is_none():
    assert read_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert read_ns("2026-11-26T12:19:55.293746529Z") % S == 293746529
    assert read_ns("2026-11-26T12:19:55Z") % S == 0
    assert read_ns("0001-01-01T00:00:00Z") is None and read_ns("") is None and read_ns(None) is None
    assert read_ns("2026-11-26T12:19:55+01:00") is None   # the engine writes UTC only


def test_memory_is_counted_as_docker_stats_counts_it():
    assert mem_bytes(V1_RECORD["memory_stats"]) == 4968448 - 2637824           # v1: total_inactive_file
    assert mem_bytes(V2_RECORD["memory_stats"]) == 70 * MIB                     # v2: inactive_file
    assert mem_bytes({"usage": 10, "stats": {"total_inactive_file": 20}}) == 10  # cache above usage: usage
    assert mem_bytes({"usage": 10}) == 10 and mem_bytes({}) is None


def test_a_record_becomes_one_sample_and_a_stopped_containers_none():
    s = sample_of(V1_RECORD)
    assert s == StatsSample(read_ns(V1_RECORD["read"]), 1021695430, 4968448 - 2637824, 254783107)
    assert sample_of(STOPPED_RECORD) is None
    # no usable stamp: the sampler's own clock
    assert sample_of({**V2_RECORD, "read": "0001-01-01T00:00:00Z"}, now_ns=42).t_ns == 42


def test_node_figures_over_the_window():
    samples = [StatsSample(10 * S, 2 * S, 100 * MIB, 0),
               StatsSample(12 * S, int(2.5 * S), 300 * MIB, S // 10),    # 25 % of a CPU over 2 s
               StatsSample(11 * S, int(2.2 * S), 200 * MIB, 0),          # out of order: sorted by time
               StatsSample(13 * S, int(3.4 * S), None, S // 2)]          # 90 %, no memory figure
    f = node_figures(samples)
    assert f == {"cpu_s": 1.4, "cpu_mean_pct": 46.7, "cpu_max_pct": 90.0, "cpu_throttled_s": 0.5,
                 "mem_mean_mib": 200.0, "mem_max_mib": 300.0, "window_s": 3.0, "samples": 4}


def test_one_sample_gives_memory_but_no_cpu_and_none_gives_nothing():
    one = node_figures([sample_of(V1_RECORD)])
    assert one["samples"] == 1 and one["cpu_s"] is None and one["cpu_max_pct"] is None
    assert one["mem_max_mib"] == one["mem_mean_mib"] == round((4968448 - 2637824) / MIB, 1)
    assert node_figures([]) == {"cpu_s": None, "cpu_mean_pct": None, "cpu_max_pct": None, "cpu_throttled_s": None,
                                "mem_mean_mib": None, "mem_max_mib": None, "window_s": None, "samples": 0}


def test_a_counter_going_back_is_no_negative_rate():
    f = node_figures([StatsSample(0, 5 * S, 1, None), StatsSample(S, 4 * S, 1, None), StatsSample(2 * S, 6 * S, 1, None)])
    assert f["cpu_max_pct"] == 200.0 and f["cpu_s"] == 1.0 and f["cpu_throttled_s"] is None


def test_the_report_has_a_container_table_only_for_container_hosted_runs():
    summary = {"runtime": {"nodes": "docker", "container_stats": {
        "s1": node_figures([sample_of(V1_RECORD), sample_of({**V1_RECORD, "read": "2026-11-26T12:19:56.293746529Z"})]),
        "a1": node_figures([sample_of(V2_RECORD)])}}}
    rows = report.container_rows(summary)
    assert [r["node"] for r in rows] == ["a1", "s1"]
    page = "".join(report.containers_html({"container_stats": rows}))
    assert "Node containers: CPU and memory" in page and "<td>s1</td>" in page and "mem_max_mib" in page
    assert report.container_rows({"runtime": {"nodes": "ns"}}) == [] and report.container_rows({}) == []
    assert report.containers_html({"container_stats": []}) == []
    assert "Node containers" in report._page({"container_stats": rows}, [])
    assert "Node containers" not in report._page({}, [])


def test_a_sampler_without_containers_samples_nothing_and_needs_no_engine():
    s = ContainerStatsSampler({}).start()
    s.stop()
    assert s.figures() == {}


@pytest.fixture
def dead_engine(tmp_path, monkeypatch):
    """DOCKER_HOST at a unix socket nothing listens on."""
    path = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    return path


def test_an_unreachable_engine_is_one_line_saying_what_to_fix(dead_engine, tmp_path, monkeypatch):
    with pytest.raises(UserError) as e:
        engine.client()
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("dockerd is not running")
    assert str(dead_engine) in msg and "connection refused" in msg and "--nodes ns" in msg
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'none.sock'}")
    with pytest.raises(UserError, match=r"^dockerd is not running .*no such file or directory"):
        engine.start_container("rmptwin-x", "img", ["true"], hostname="x", labels={})


def test_without_an_engine_status_cleanup_and_removal_go_on(dead_engine):
    assert not engine.running()
    assert env.docker_state() in ("stopped", "missing")
    assert cleanup._project_containers() == []
    assert engine.remove_containers(["rmptwin-a", "rmptwin-b"]) == 0
    assert engine.image_id("rmptwin-node:0") is None and not engine.image_exists("rmptwin-node:0")
    s = ContainerStatsSampler({"s1": "rmptwin-s1"}).start()   # the run goes on unsampled
    s.stop()
    assert s.figures() == {"s1": node_figures([])}
