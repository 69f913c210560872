"""`rmptwin run` on the real emulated network (Mininet + Open vSwitch + the os-ken
controller + the link impairment the machine offers: netem, else the user-space relay):
the issue's must-show behaviours.

- quickstart: agreement, no acknowledged message lost although links lose packets (seen in
  the event log as first copies that arrived only as repairs, on either backend; the
  relay's drop log also has each one's lost data frame), every guaranteed customer has
  every message;
- the customers' captures decode as MoldUDP64 with tshark, sequence numbers consecutive per
  session apart from what the links dropped, and every gap repaired by a re-request;
- the same experiment in the simulator gives the same delivered order per source and the
  same message counts;
- a ring member crashes mid-run: the ring is re-formed, agreement holds, no acknowledged
  message is lost, and summary.json carries reformation_ms.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from twin_checks import ORDER_RULE, assert_twin_verdict

from rmptwin.analysis.summary import summarize
from rmptwin.analysis.twin_verdict import NOT_COMPARABLE, NOT_DETERMINISTIC, PASS
from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT, group_ip, region_group
from rmptwin.core.striping import session_name
from rmptwin.emulation.losscheck import repaired_first_copies, repairs_without_a_drop
from rmptwin.model import load_experiment
from rmptwin.model.queries import customer_stripes
from rmptwin.rmp.repair import FIRST_MOLD_SEQ
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]


def _emulate(loaded, out: Path, nodes: str, capture: list[str] | None = None) -> tuple:
    """(loaded, run directory, summary) of one emulated run."""
    outcome = run_experiment(loaded, "emulation", out=out, options=EmulationOptions(nodes=nodes, capture=capture))
    return loaded, outcome.run_dir, outcome.summary


def _docker_usable() -> bool:
    import importlib.util

    return (shutil.which("dockerd") is not None and shutil.which("docker") is not None
            and importlib.util.find_spec("rmptwin.emulation.dockerhost") is not None)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    """One emulated quickstart run with containers as hosts (the default node kind), at the
    time dilation factor this host needs, as `make run` runs it (``time_dilation: auto``)."""
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    loaded = loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"time_dilation": "auto"})})
    nodes = "docker" if _docker_usable() else "ns"
    return _emulate(loaded, tmp_path_factory.mktemp("rt") / "quickstart", nodes)


@pytest.fixture(scope="module")
def crash_run(tmp_path_factory):
    loaded = load_experiment(REPO / "experiments" / "line3-crash.yaml")
    return _emulate(loaded, tmp_path_factory.mktemp("rt") / "crash", "ns")


@pytest.fixture(scope="module")
def lossy_edge(tmp_path_factory):
    """line3 with lossy customer access links (8 % and 5 % for the guaranteed customers):
    the regional remulticast loses packets that only re-requests can bring back.

    rp2 remulticasts to east only, so c1 (west) hears a single copy of each packet: with two
    overlapping sources a loss is usually covered by the other copy and nothing is repaired.
    k_r = 6 because the re-requests and their answers cross the same lossy access link."""
    from rmptwin.model import LoadedExperiment, Topology

    base = load_experiment(REPO / "experiments" / "line3.yaml")
    topo = base.topology.model_dump(mode="json")
    loss = {"c1": 0.08, "c2": 0.05, "c3": 0.05}
    for h in topo["hosts"]:
        if h["name"] in loss:
            h["link"]["loss"] = {"model": "bernoulli", "p": loss[h["name"]]}
        if h["name"] == "rp2":
            h["regions"] = ["east"]
    proto = base.experiment.protocol.model_copy(update={"k_r": 6})
    exp = base.experiment.model_copy(update={"name": "line3-lossy-edge", "protocol": proto})
    loaded = LoadedExperiment(experiment=exp, topology=Topology.model_validate(topo), path=base.path)
    return _emulate(loaded, tmp_path_factory.mktemp("rt") / "edge", "ns")


def _events(run_dir: RunDir):
    return run_dir.read_events().to_pandas()


@pytest.mark.docker
def test_quickstart_agreement_no_loss_and_guaranteed_customers_complete(quickstart):
    loaded, run_dir, s = quickstart
    on_disk = run_dir.read_summary()
    assert on_disk["agreement"] is True and s["agreement"] is True
    assert s["messages_sent"] > 0 and s["messages_lost"] == 0
    assert s["messages_delivered_min"] == s["messages_sent"]
    c = s["customers"]
    assert c["guaranteed"] == sum(1 for h in loaded.topology.hosts_with_role("customer") if h.grade == "guaranteed")
    assert c["guaranteed_complete"] == c["guaranteed"]
    # The configured link loss really cost receivers packets (else "nothing lost" is vacuous):
    # messages whose first copy at some receiver was a repair, from the event log on any backend.
    repaired = repaired_first_copies(run_dir.read_events())
    assert repaired, "the configured link loss must really have cost receivers first copies"
    manifest = run_dir.read_manifest()
    assert manifest["backend"] == "emulation"
    if manifest["impair"] == "relay":
        # The relay's ground truth names each one's lost data frame (netem keeps no log).
        drops = run_dir.read_drops()
        assert not repairs_without_a_drop(repaired, drops), sorted(repairs_without_a_drop(repaired, drops))[:5]
    for key in ("receivers", "agreement", "messages_sent", "messages_delivered_min", "messages_lost",
                "control_per_data", "delivery_latency_ms", "fairness_spread_ms", "reformation_ms", "customers"):
        assert key in on_disk
    # Timers keep time, or the run says the machine could not (issue 10, items 2 and 5): every
    # release-path role measured its timers, and a fairness p99 above 5 ms is either the
    # protocol's (scheduled releases already that far apart) or flagged as an overloaded machine.
    lateness = on_disk["timer_lateness_ms"]
    assert all(lateness[r]["n"] > 0 for r in ("primary", "secondary", "source")), lateness
    fair, protocol = on_disk["fairness_spread_ms"]["p99"], on_disk["fairness_protocol_ms"]["p99"]
    assert fair <= max(5.0, protocol + 5.0) or on_disk["runtime"]["overloaded"], (fair, protocol, lateness)



@pytest.mark.docker
def test_quickstart_summary_has_each_containers_cpu_and_memory(quickstart):
    """summary.json's runtime.container_stats: every Docker host sampled by the engine over the run."""
    loaded, run_dir, _ = quickstart
    rt = run_dir.read_summary()["runtime"]
    if rt["nodes"] != "docker":
        pytest.skip("namespace hosts (no Docker engine here): no containers to sample")
    stats = rt["container_stats"]
    assert set(stats) == {h.name for h in loaded.topology.hosts}
    for node, f in stats.items():
        assert f["samples"] >= 2 and f["cpu_s"] > 0 and 0 < f["mem_max_mib"] < rt["limits"]["memory_mb"], (node, f)
        # the CPU limit holds: a sample interval is about a second, so allow a little jitter
        assert f["cpu_max_pct"] <= 120 * rt["limits"]["cpus"], (node, f)


def _tshark_mold(pcap: Path) -> list[dict]:
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-d", f"udp.port=={REGION_PORT},moldudp64",
         "-d", f"udp.port=={REREQUEST_PORT},moldudp64", "-Y", "moldudp64",
         "-T", "fields", "-E", "separator=;", "-e", "ip.src", "-e", "ip.dst", "-e", "udp.dstport",
         "-e", "moldudp64.session", "-e", "moldudp64.sequence", "-e", "moldudp64.count", "-e", "_ws.malformed"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = []
    for line in out.stdout.splitlines():
        src, dst, port, session, seq, count, malformed = line.split(";")
        rows.append({"src": src, "dst": dst, "port": int(port), "session": session, "seq": int(seq),
                     "count": int(count), "malformed": bool(malformed)})
    return rows


@pytest.mark.parametrize("which", [pytest.param("quickstart", marks=pytest.mark.docker), "lossy_edge"])
def test_customer_captures_decode_as_moldudp64_with_gaps_repaired(which, request):
    if which == "quickstart" and not _docker_usable():
        pytest.skip("the quickstart run uses Docker hosts")
    loaded, run_dir, s = request.getfixturevalue(which)
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"]
    topo = loaded.topology
    ips = json.loads(run_dir.node_config_path().read_text())["hosts"]
    ev = _events(run_dir)
    released = defaultdict(set)
    for g, d in zip(ev[ev.kind == "release"].gseq, ev[ev.kind == "release"].detail):
        released[json.loads(d).get("stripe", 0)].add(int(g))
    checked = repaired_total = 0
    for h in topo.hosts_with_role("customer"):
        if h.grade != "guaranteed":
            continue
        rows = _tshark_mold(run_dir.pcap_path(h.name))
        assert rows and not any(r["malformed"] for r in rows), h.name
        me = ips[h.name]
        for k in customer_stripes(h, loaded):
            session = session_name(k)
            groups = {group_ip(region_group(r, k)) for r in h.regions}
            heard, repaired, asked = set(), set(), set()
            for r in rows:
                if r["session"] != session:
                    continue
                span = set(range(r["seq"], r["seq"] + r["count"])) if r["count"] < 0xFFFF else set()
                if r["dst"] in groups and r["port"] == REGION_PORT:
                    heard |= span                     # the regional multicast
                elif r["dst"] == me and r["port"] == REGION_PORT:
                    repaired |= span                  # retransmissions to us
                elif r["src"] == me and r["port"] == REREQUEST_PORT:
                    asked |= span                     # our re-requests
            want = set(range(FIRST_MOLD_SEQ, max(released[k]) + 1))
            assert want == released[k], "the rings released consecutive sequence numbers"
            # Consecutive per session apart from loss; everything lost was asked for and repaired.
            assert heard | repaired >= want, (h.name, k, sorted(want - heard - repaired)[:10])
            assert want - heard <= asked, (h.name, k)
            # ... and the customer's own log agrees with its capture about what was a repair.
            mine = ev[(ev.node == h.name) & (ev.kind == "cust_recv")]
            logged = {int(g) for g, d in zip(mine.gseq, mine.detail)
                      if json.loads(d)["stripe"] == k and json.loads(d)["repair"]}
            assert want - heard <= logged, (h.name, k)
            checked += 1
            repaired_total += len(want - heard)
    assert checked >= 2
    if which == "lossy_edge":
        assert repaired_total > 0, "8 % and 5 % access loss must have cost the guaranteed customers something"


@pytest.mark.docker
def test_same_delivered_order_per_source_and_counts_as_the_simulator(quickstart):
    from rmptwin.sim.simulate import simulate

    loaded, run_dir, s = quickstart
    seed = run_dir.read_manifest()["seed"]
    sim = simulate(loaded, seed)
    sim_summary = summarize(sim.events, loaded)
    emu_ev = _events(run_dir)
    sim_ev = sim.events.to_pandas()

    def per_source_order(ev):
        """Per receiver, source and stripe (a source numbers each stripe's messages on its own):
        the source's sequence numbers in delivery (gseq) order."""
        d = ev[ev.kind == "deliver"]
        d = d.assign(stripe=[json.loads(x).get("stripe", 0) for x in d.detail])
        d = d.sort_values(["node", "stripe", "gseq"], kind="stable")
        return {key: list(g.src_seq) for key, g in d.groupby(["node", "src", "stripe"])}

    emu_order, sim_order = per_source_order(emu_ev), per_source_order(sim_ev)
    assert emu_order == sim_order
    for key in ("messages_sent", "messages_delivered_min", "messages_lost"):
        assert s[key] == sim_summary[key], key
    assert s["customers"] == sim_summary["customers"]

    def cust_counts(ev):
        c = ev[ev.kind == "cust_recv"]
        return {n: len(g) for n, g in c.groupby("node")
                if loaded.topology.host(n).grade == "guaranteed"}
    assert cust_counts(emu_ev) == cust_counts(sim_ev)


@pytest.fixture(scope="module")
def quickstart_twin(quickstart, tmp_path_factory) -> tuple[RunDir, RunDir]:
    """(simulated, emulated) quickstart: the emulated run above and the simulator's run of the
    same experiment and seed, for the twin verdict (rmptwin compare)."""
    loaded, run_dir, _ = quickstart
    sim = run_experiment(loaded, "sim", seed=run_dir.read_manifest()["seed"],
                         out=tmp_path_factory.mktemp("rt") / "quickstart-sim")
    return sim.run_dir, run_dir


@pytest.mark.docker
def test_quickstart_twin_verdict(quickstart_twin):
    """`rmptwin compare SIM EMU` passes on the quickstart: every rule the issue names, with
    fairness p99 <= 5 ms since release timers keep time (absolute deadlines, precise finish,
    real-time priority for the release path)."""
    sim_dir, emu_dir = quickstart_twin
    skippable = {ORDER_RULE: NOT_DETERMINISTIC}
    if emu_dir.read_manifest()["impair"] == "netem":
        skippable["first_copy_loss_per_link"] = NOT_COMPARABLE   # netem keeps no drop log
    # At TDF 1 the run flagged itself overloaded on this 2-CPU machine (customers' timers 40-490
    # ms late at p99, fairness p99 up to 6 ms, control per data +13 % in one CI rehearsal), and
    # this test excused the timing rules then. At `auto` (4 here) it is on time and every rule
    # holds (docs/virtual-time.md: PASS 7/7 at every factor from 1 to 8 in one ladder).
    runtime = emu_dir.read_summary()["runtime"]
    assert not runtime["overloaded"], (runtime["time_dilation"], runtime["load"])
    rules = assert_twin_verdict(sim_dir, emu_dir, skippable=skippable)
    # Three sources feed each stripe: the token sites' arrival order decides their relative order.
    assert rules[ORDER_RULE].status == NOT_DETERMINISTIC
    for metric in ("agreement", "messages_lost", "delivery_latency_p50_ms", "control_per_data",
                   "fairness_spread_p99_ms"):
        assert rules[metric].status == PASS, rules[metric]


def test_ring_member_crash_reforms_the_ring_without_losing_acknowledged_messages(crash_run):
    loaded, run_dir, s = crash_run
    ev = _events(run_dir)
    crash = ev[ev.kind == "crash"]
    assert list(crash.node) == ["rp2"]
    done = ev[(ev.kind == "reform_done") & (ev.t_ns > int(crash.t_ns.iloc[0]))]
    assert len(done) > 0, "the reformation server re-formed the ring"
    first_ring = json.loads(done.detail.iloc[0]).get("ring")
    assert first_ring is None or "rp2" not in first_ring
    on_disk = run_dir.read_summary()
    assert on_disk["agreement"] is True
    assert on_disk["messages_lost"] == 0
    assert on_disk["reformation_ms"], "summary.json reports the outage"
    assert "container_stats" not in on_disk["runtime"]   # namespace hosts: no containers
    assert all(0 < ms < 5_000 for ms in on_disk["reformation_ms"])


def test_a_run_cut_short_drains_until_everything_is_delivered(tmp_path):
    """line3 with its duration ending with the last publication: the simulator stops there
    and reports the last messages open (ended_before_drain, never lost), the emulated run goes
    on until they are delivered."""
    from rmptwin.sim.simulate import simulate

    base = load_experiment(REPO / "experiments" / "line3.yaml")
    w = base.experiment.workload
    exp = base.experiment.model_copy(update={"name": "line3-cut", "duration_s": w.start_s + w.duration_s})
    loaded = base.model_copy(update={"experiment": exp})
    cut = summarize(simulate(loaded, 1).events, loaded)
    assert cut["ended_before_drain"]["messages"] > 0, "the cut must really leave messages in flight"
    assert cut["messages_lost"] == 0
    _, _, s = _emulate(loaded, tmp_path / "cut", "ns", capture=[])
    assert s["agreement"] and s["messages_lost"] == 0 and "ended_before_drain" not in s
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"]
    assert s["runtime"]["drain_s"] > 0 and s["runtime"]["outstanding"] is None
