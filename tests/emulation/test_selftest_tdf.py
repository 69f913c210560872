"""`rmptwin net selftest --tdf N`: at time dilation factors 1, 2, 4 and 8 the network runs its
links N times slower on the wall clock, and the self-test, measuring on the wall clock and
converting into virtual time, finds every link as configured (docs/virtual-time.md, "Fidelity")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.emulation]
RMPTWIN = [sys.executable, "-m", "rmptwin.cli.main"]
TOPO = Path(__file__).resolve().parent / "tdf_link.yaml"   # s1-s2: 20 ms + 4 ms jitter, 5 % loss, 20 Mbit/s
QUANTITIES = {"loss", "delay ms (median)", "jitter ms (2 x IQR)", "bandwidth Mbit/s"}


@pytest.mark.parametrize("tdf", [1, 2, 4, 8])
def test_selftest_at_a_time_dilation_factor_measures_the_configured_link_in_virtual_time(tdf, tmp_path):
    # 400 delay probes at 125 per virtual second (one per two jitters) and 500 bandwidth probes:
    # 3.5 s of virtual time, 28 s of wall time at factor 8. Few probes suffice for the loss:
    # the link's draws are keyed by the probe's sequence number, so every factor loses the same ones.
    out = tmp_path / "selftest.json"
    r = subprocess.run([*RMPTWIN, "net", "selftest", str(TOPO), "--tdf", str(tdf), "--count", "400",
                        "--bw-count", "500", "--json", str(out), "--state-dir", str(tmp_path / "st")],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert out.exists(), r.stdout[-3000:] + r.stderr[-2000:]
    report = json.loads(out.read_text())
    checks = {c["quantity"]: c for c in report["checks"]}
    assert set(checks) == QUANTITIES and report["tdf"] == tdf
    assert all(c["ok"] for c in checks.values()), "\n".join(map(str, checks.values()))
    assert r.returncode == 0 and f"TDF {tdf}:" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    # The dilation was applied, not just divided out: on the wall clock the link's delay is N
    # times the configured one and its rate N times smaller (an undilated network at factor 8
    # would show 22 ms of wall delay, 2.75 virtual ms: it would fail above as well).
    delay, rate = checks["delay ms (median)"], checks["bandwidth Mbit/s"]
    assert delay["wall"] == pytest.approx(tdf * delay["configured"], rel=0.1), delay
    assert rate["wall"] == pytest.approx(rate["configured"] / tdf, rel=0.1), rate
    assert checks["loss"]["wall"] == checks["loss"]["measured"]   # a chance per frame is not time
