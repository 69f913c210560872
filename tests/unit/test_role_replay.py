"""The replay a role's own cost is measured on (bench.role_replay) does the role's real work:
every host fed the simulator's datagrams at their times through a socketless driver logs the
same deliveries, releases and acknowledgements as the same host in the simulator."""

from __future__ import annotations

from collections import Counter

from rmptwin.bench.role_replay import RMP_ROLES, replay_gathered, replay_host, role_costs, simulated_arrivals
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.node.eventlog import read_jsonl
from rmptwin.sim.simulate import simulate
from tests.conftest import REPO

KINDS = {Kind.RELEASE, Kind.CUST_RECV, Kind.SRC_ACKED, Kind.SEND}


def test_each_replayed_host_logs_what_it_logged_in_the_simulator(tmp_path):
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    events = simulate(loaded).events.to_pylist()
    want = Counter((e["node"], e["kind"]) for e in events if e["kind"] in KINDS)
    arrivals = simulated_arrivals(loaded)
    got: Counter = Counter()
    for h in loaded.topology.hosts:
        if h.role in RMP_ROLES:
            n, cpu = replay_host(loaded, h.name, arrivals.get(h.name, []), tmp_path)
            assert n > 0 and cpu >= 0
            rows, torn = read_jsonl(tmp_path / f"{h.name}.jsonl")
            assert torn == 0
            got.update((r["node"], r["kind"]) for r in rows if r["kind"] in KINDS)
    assert want and got == want


def test_role_costs_cover_every_rmp_role_of_the_experiment():
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    costs = role_costs(loaded)
    assert set(costs) == {h.role for h in loaded.topology.hosts if h.role in RMP_ROLES}
    assert all(c.datagrams > 0 and c.us_per_datagram > 0 for c in costs.values())


def test_the_hosts_interleaved_in_one_process_do_the_same_work_as_one_at_a_time():
    """bench_crowd's gathered process: every host's steps in true time on one heap handles the
    datagrams each host handles replayed alone, no more and no fewer."""
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    apart = role_costs(loaded)
    gathered = replay_gathered(loaded)
    assert gathered.hosts == sum(c.hosts for c in apart.values()) > 0
    assert gathered.datagrams == sum(c.datagrams for c in apart.values()) > 0
    assert gathered.cpu_s > 0
