"""The asyncio driver on real sockets in two+ network namespaces (a flat bridge network).

An R_T reduced to its remulticast half (it deliberately leaves 10 % of its multicast
packets unsent), a real retransmit server and a real guaranteed customer run as separate
processes in their own namespaces: the customer must end with every message, in order,
repaired through R_x, which itself re-requests from the R_T by unicast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rmptwin.emulation.flatnet import FlatNetwork, leftover_namespaces
from rmptwin.model import Experiment, LoadedExperiment, Topology
from rmptwin.node.eventlog import merge_logs
from rmptwin.node.node_config import NodeConfig
from rmptwin.rmp.repair import FIRST_MOLD_SEQ
from rmptwin.rundir.run import NODE_FILES

pytestmark = [pytest.mark.root]

N_MESSAGES = 300

NODE_SCRIPT = textwrap.dedent('''
    import asyncio, random, sys, time
    from rmptwin.node.node_config import NodeConfig
    from rmptwin.node.driver import NodeDriver
    from rmptwin.node.eventlog import EventWriter
    from rmptwin.factories.rmp import build_customer, build_retransmit
    from rmptwin.rmp.repair import FIRST_MOLD_SEQ
    from rmptwin.rmp.remulticast import Remulticaster
    from rmptwin.core.trade_report import TradeReport

    class LossyRT:
        """Releases N messages 5 ms apart; skips 10 % of its multicast packets (seeded)."""
        def __init__(self, regions, n):
            self.rm = Remulticaster(regions, 0, heartbeat_ns=50_000_000)
            self.n, self.next, self.rng, self.out = n, 0, random.Random(5), []
            self.skipped = 0
        def groups(self): return frozenset()
        def receive_datagram(self, data, src, now): self.out += self.rm.serve_rerequest(data, src)
        def datagrams_to_send(self, now):
            out, self.out = self.out, []
            for data, dest in self.rm.datagrams(now):
                if self.rng.random() < 0.1:
                    self.skipped += 1
                    continue
                out.append((data, dest))
            return out
        def get_timer(self):
            t = 100_000_000 + self.next * 5_000_000 if self.next < self.n else None
            hb = self.rm.get_timer()
            return min(x for x in (t, hb) if x is not None) if (t or hb) else None
        def handle_timer(self, now):
            while self.next < self.n and 100_000_000 + self.next * 5_000_000 <= now:
                g = FIRST_MOLD_SEQ + self.next
                self.rm.release(g, TradeReport(f"S{g % 5:04d}", 100 + g, 1, "TEST", now).encode(64))
                self.next += 1
            self.rm.handle_timer(now)
        def next_event(self): return None

    cfg = NodeConfig.read(sys.argv[1]); name = sys.argv[2]
    loaded = cfg.loaded(); host = loaded.topology.host(name)
    core = {"primary": lambda: LossyRT(host.regions, N),
            "retransmit": lambda: build_retransmit(host, loaded, random.Random(1)),
            "customer": lambda: build_customer(host, loaded, random.Random(2))}[host.role]()
    log = EventWriter(cfg.node_file("events", name, 0))
    d = NodeDriver(core, name, host.role, cfg.hosts, cfg.t0_ns, log)
    d.open()
    async def main():
        await asyncio.sleep(max(0, (cfg.t0_ns - time.time_ns()) / 1e9))
        d.start(asyncio.get_running_loop())
        await asyncio.sleep(3.5)
        d.close(); log.close()
        extra = {"skipped": core.skipped} if host.role == "primary" else {}
        print("DONE", d.sent, d.received, extra, flush=True)
    asyncio.run(main())
''').replace("N),", f"{N_MESSAGES}),")


def flat_loaded() -> LoadedExperiment:
    topo = Topology.model_validate({
        "name": "flat3", "switches": ["s1"], "regions": {"eu": ["s1"]},
        "hosts": [
            {"name": "rt", "role": "primary", "switch": "s1", "regions": ["eu"]},
            {"name": "rx", "role": "retransmit", "switch": "s1", "regions": ["eu"]},
            {"name": "cu", "role": "customer", "switch": "s1", "regions": ["eu"], "retransmit": "rx"},
        ]})
    exp = Experiment.model_validate({"name": "flat", "topology": "flat3.yaml",
                                     "protocol": {"dn_ms": 20, "k_r": 5, "p_ms": 0}})
    return LoadedExperiment(experiment=exp, topology=topo, path="/tmp/flat.yaml")


def test_driver_multicast_unicast_and_repairs_across_namespaces(tmp_path: Path):
    loaded = flat_loaded()
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = {}
    with FlatNetwork(loaded.topology, tag="t1") as net:
        hosts = {n: h.ip for n, h in net.hosts.items()}
        cfg = NodeConfig.for_run(loaded, 1, hosts, logs, NODE_FILES, t0_ns=time.time_ns() + 1_500_000_000)
        path = cfg.write(tmp_path / "node.json")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
        try:
            for name in hosts:
                procs[name] = net.host(name).popen([sys.executable, str(script), str(path), name],
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            outs = {n: p.communicate(timeout=30) for n, p in procs.items()}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
    assert not any(ns.startswith("rmptft1") for ns in leftover_namespaces())
    for n, (out, err) in outs.items():
        assert procs[n].returncode == 0, (n, err.decode()[-2000:])
    assert "'skipped': 0" not in outs["rt"][0].decode()  # the R_T really withheld packets
    events, bad = merge_logs(list(logs.glob("*.jsonl")))
    assert bad == 0
    ev = events.to_pandas()
    recv = ev[(ev.node == "cu") & (ev.kind == "cust_recv")]
    assert list(recv.gseq) == list(range(FIRST_MOLD_SEQ, FIRST_MOLD_SEQ + N_MESSAGES))  # all, in order, once
    repaired = recv[recv.detail.str.contains('"repair":true')]
    assert len(repaired) > 0
    asked_rt = ev[(ev.node == "rx") & (ev.kind == "nack_sent")]
    assert len(asked_rt) > 0 and set(asked_rt.detail.map(lambda d: json.loads(d)["to"])) == {"rt"}
