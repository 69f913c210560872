"""The venue cores as real processes (H6's runtime, flat namespaces on one bridge), with
the sequencer host running a real three-member etcd cluster on its own loopback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rmptwin.model import load_experiment

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.root, pytest.mark.emulation, pytest.mark.etcd, pytest.mark.timeout(300)]


def test_venues_on_real_sockets_with_the_etcd_sequencer(tmp_path):
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed")
    exp = tmp_path / "venue-etcd.yaml"
    exp.write_text(f"""
name: venue-etcd-rt
topology: {REPO / "topologies" / "venue.yaml"}
duration_s: 8.0
venue: {{rate: 200, symbols: [IBM], sequencer: etcd, ev_service_us: 0, start_s: 0.5, duration_s: 1.5}}
""")
    from rmptwin.runner.pipeline import EmulationOptions, run_experiment

    loaded = load_experiment(exp)
    s = run_experiment(loaded, "emulation", out=tmp_path / "run",
                       options=EmulationOptions(nodes="flat", capture=[])).summary
    assert s["requests_accepted"] > 200
    assert s["ev_consistent"] is True and s["ev_order_conflicts"] == 0
    assert s["requests_ordered"] == s["requests_accepted"]          # both gateways' requests, one order
    assert s["requests_completed"] == s["requests_accepted"]
    assert s["ev_agreement"] is True and s["trades_lost"] == 0
    # the sequencer host's etcd members are gone with it
    assert subprocess.run(["pgrep", "-f", "rmptwin-etcd-"], capture_output=True).stdout == b""
