"""Trace what a restarted EV waits for while it synchronizes, in the simulator.

    PYTHONPATH=src python scripts/venue_sync_trace.py EXPERIMENT [--rate R ...] [--node ev1]

For each rate it runs EXPERIMENT (a venue failover: a crash and a recover of NODE) in the
simulator with the recovering EV's core wrapped, and prints, from the restart, when each
recovery step ended and what it waited for: the sequencer probe's answer (the sync target),
the checkpoint, the HR's hardened requests, the re-execution of the positions behind the
checkpoint, and SYNC_DONE. docs/venue-sync.md quotes its output.
"""

from __future__ import annotations

import argparse
from functools import partial

from rmptwin import factories
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.model.overrides import make_point
from rmptwin.sim.simulate import Simulation
from rmptwin.venue import wire
from rmptwin.venue.execution_venue import SEQ_PROBE


class Traced:
    """The recovering EV's core, noting (time, step, detail) as its recovery moves on."""

    def __init__(self, core, notes: list) -> None:
        self.core, self.notes, self.t0 = core, notes, None
        self.executed = 0

    def __getattr__(self, name):
        return getattr(self.core, name)

    def _note(self, now: int, step: str, detail: str) -> None:
        self.notes.append(((now - self.t0) / 1e6, step, detail))

    def datagrams_to_send(self, now: int):
        if self.t0 is None:
            self.t0 = now   # the driver flushes a new core at once: this is the restart
        return self.core.datagrams_to_send(now)

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if self.t0 is None:
            self.t0 = now
        c = self.core
        phase = c.phase
        ftype, f = wire.decode(data)
        c.receive_datagram(data, src, now)
        if ftype == wire.T_DECIDE and f[1] == SEQ_PROBE:
            self._note(now, "sequencer probe answered", f"sync target: position {f[2]}")
        elif phase == "checkpoint" and c.phase != "checkpoint":
            self._note(now, "checkpoint installed", f"positions up to {c.next_pos - 1}")
        elif phase == "hardened" and c.phase == "live":
            self._note(now, "hardened requests received", f"known up to {c.known_top - 1} "
                       f"({c.known_top - c.next_pos} positions to re-execute)")

    def handle_timer(self, now: int) -> None:
        c = self.core
        before, hr_top, recovering = c.next_pos, c.hr_top, c._recovering
        c.handle_timer(now)
        if c.next_pos > before and recovering:
            kind = "re-executed (hardened)" if c.next_pos - 1 <= hr_top else "executed (live)"
            self._note(now, kind, f"positions {before}..{c.next_pos - 1}")
        self.executed += c.next_pos - before

    def next_event(self):
        ev = self.core.next_event()
        if ev is not None and ev.kind == Kind.SYNC_DONE:
            self._note(self.t0 + ev.detail["sync_ns"], "SYNC_DONE",
                       f"position {ev.detail['position']}, {self.executed} positions executed since restart")
        return ev


def trace(path: str, rate: float | None, node: str) -> list:
    loaded = load_experiment(path)
    if rate is not None:
        loaded = make_point(loaded, {"venue.rate": rate}).loaded
    notes: list = []

    def build(host, loaded, rng, *, recovering=False, adapters):
        core = factories.build_core(host, loaded, rng, recovering=recovering, adapters=adapters)
        return Traced(core, notes) if recovering and host.name == node else core

    sim = Simulation(loaded)
    sim.build = partial(build, adapters=sim.adapters)
    sim.run()
    return notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment")
    ap.add_argument("--rate", type=float, action="append")
    ap.add_argument("--node", default="ev1")
    a = ap.parse_args()
    for rate in a.rate or [None]:
        print(f"== {a.experiment} rate {rate or 'as written'} req/s")
        prev = 0.0
        for t, step, detail in trace(a.experiment, rate, a.node):
            print(f"  {t:8.3f} ms  (+{t - prev:7.3f})  {step}: {detail}")
            prev = t


if __name__ == "__main__":
    main()
