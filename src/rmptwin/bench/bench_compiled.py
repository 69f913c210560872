"""Compiled against interpreted cores, side by side in one run (rmptwin.corebuild).

Each measurement is a child process running one build (``RMPTWIN_PURE=1`` for the
interpreted one), the two builds taking turns, three times: the simulator's heap events per
second of wall time on the quickstart (real cores, the run loop only: no start-up, no event
table), and RMP wire frames encoded and decoded per second (the codec itself, uncached).
Each figure is the median of the three with their min and max; the speed-ups are the
medians of the three pairs' ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from rmptwin import corebuild
from rmptwin.bench.harness import REPO

RUNS = 1     # the three measurements per build are taken in run(), alternating the builds
PAIRS = 3
CHILD = """
import json, sys, time
from pathlib import Path
from rmptwin import corebuild
from rmptwin.cli.overrides import apply_set_options
from rmptwin.rmp import wire
from rmptwin.sim.simulate import simulate
from rmptwin.model import load_experiment

duration, frames = float(sys.argv[1]), int(sys.argv[2])
loaded = apply_set_options(load_experiment(Path("experiments/quickstart.yaml")), [f"duration_s={duration}"])
stats = simulate(loaded).stats
msgs = tuple((f"src{i % 3 + 1}", i) for i in range(32))
batch = [wire.Data(0, "src1", i, i, bytes(64)) for i in range(frames // 2)]
batch += [wire.Ack(0, 1, i, 32 * i, i, "rp1", "rp2", msgs) for i in range(frames // 2)]
t0 = time.perf_counter()
blobs = [wire.encode(f) for f in batch]
for b in blobs:
    wire._decode(b, 0)          # uncached: the codec itself
codec_s = time.perf_counter() - t0
print(json.dumps({"cores": corebuild.ACTIVE.kind, "events": stats["scheduler_events"],
                  "events_per_s": stats["scheduler_events"] / stats["wall_s"], "frames_per_s": len(batch) / codec_s}))
"""


def _measure(pure: bool, duration: float, frames: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != corebuild.PURE_ENV}
    if pure:
        env[corebuild.PURE_ENV] = "1"
    r = subprocess.run([sys.executable, "-c", CHILD, str(duration), str(frames)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"the {'interpreted' if pure else 'compiled'} child failed: {r.stderr.strip()[-300:]}")
    figures: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return figures


def run(quick: bool) -> list[dict[str, Any]]:
    build, _ = corebuild.check()
    if not build.compiled:
        return [{"metric": "compiled cores", "value": "skipped", "note": build.why}]
    duration, frames = (3.0, 20_000) if quick else (8.0, 200_000)
    interp: list[dict[str, Any]] = []
    comp: list[dict[str, Any]] = []
    for _ in range(PAIRS):
        interp.append(_measure(True, duration, frames))
        comp.append(_measure(False, duration, frames))
    assert {m["cores"] for m in interp} == {corebuild.INTERPRETED} and {m["cores"] for m in comp} == {corebuild.COMPILED}
    sim = f"quickstart, {duration:g} s simulated ({comp[0]['events']:,} heap events), run loop only"
    codec = f"{frames:,} frames, half DATA (64 B), half 32-message ACKs, uncached"
    pairs = f"{PAIRS} alternating pairs of child processes"
    return [
        {"metric": "simulator heap events/s, interpreted cores", "samples": [m["events_per_s"] for m in interp],
         "unit": "events/s", "better": "higher", "conditions": sim},
        {"metric": "simulator heap events/s, compiled cores", "samples": [m["events_per_s"] for m in comp],
         "unit": "events/s", "better": "higher", "goal": ">= 500k/s", "goal_min": 500_000, "conditions": sim},
        {"metric": "simulator speed-up, compiled / interpreted",
         "samples": [c["events_per_s"] / i["events_per_s"] for c, i in zip(comp, interp)],
         "unit": "x", "better": "higher", "goal": ">= 3x", "goal_min": 3.0, "conditions": f"{sim}; {pairs}"},
        {"metric": "RMP wire encode+decode, interpreted", "samples": [m["frames_per_s"] for m in interp],
         "unit": "frames/s", "better": "higher", "conditions": codec},
        {"metric": "RMP wire encode+decode, compiled", "samples": [m["frames_per_s"] for m in comp],
         "unit": "frames/s", "better": "higher", "goal": ">= 1M/s", "goal_min": 1_000_000, "conditions": codec},
        {"metric": "RMP wire speed-up, compiled / interpreted",
         "samples": [c["frames_per_s"] / i["frames_per_s"] for c, i in zip(comp, interp)],
         "unit": "x", "better": "higher", "conditions": f"{codec}; {pairs}"},
    ]
