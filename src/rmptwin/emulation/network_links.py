"""The links of a running ``EmulatedNetwork`` (which mixes this in): their impairment changed
while the run goes on (loss, delay, up or down, duplicates and reordering, a relay restarted),
and their ground truth read back (the frames each relay dropped, the packets each carried)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rmptwin.core.groups import host_ip
from rmptwin.emulation.droplog import DroppedFrame, counts_table, drops_table, read_drop_file
from rmptwin.emulation.impair import NetemLink, RelayLink
from rmptwin.errors import UserError
from rmptwin.model import Bernoulli, LossModel, Topology

if TYPE_CHECKING:
    from pathlib import Path

    from rmptwin.emulation.flows import Wiring


class LinkControl:
    """The impaired links' handles and records; the network that mixes this in owns the state below."""

    topo: Topology
    impair: str | None
    links: dict[str, RelayLink | NetemLink]
    _aliases: dict[str, str]
    state_dir: Path
    wiring: Wiring

    def _record(self, **fields: Any) -> None:
        raise NotImplementedError   # the network's: its net.json

    def _link(self, link: str) -> RelayLink | NetemLink:
        name = self._aliases.get(link, link)
        if name not in self.links:
            if self.impair == "netem" and name in {lk.name for lk in self.topo.links} | set(self._aliases.values()):
                raise UserError(f"link {link} has no impairment installed (netem links are made only where configured)")
            raise UserError(f"no impaired link {link!r}; links: {', '.join(sorted(self.links))}")
        return self.links[name]

    def set_loss(self, link: str, model: LossModel | float) -> None:
        if isinstance(model, (int, float)):
            model = Bernoulli(p=float(model))
        self._link(link).set(loss=model)

    def set_delay(self, link: str, ms: float, jitter_ms: float | None = None) -> None:
        changes = {"delay_ms": float(ms)}
        if jitter_ms is not None:
            changes["jitter_ms"] = float(jitter_ms)
        self._link(link).set(**changes)

    def set_link(self, link: str, up: bool) -> None:
        self._link(link).set(up=bool(up))

    def set_chaos(self, link: str, duplicate: float = 0.0, reorder: float = 0.0, reorder_ns: int = 0) -> None:
        """The dup_reorder nemesis: the shared link model duplicates and reorders, so only a relay link can."""
        lk = self._link(link)
        if not isinstance(lk, RelayLink):
            raise UserError(f"link {link}: duplicates and reordering need the relay (run with --impair relay)")
        lk.command({"op": "set", "duplicate": float(duplicate), "reorder": float(reorder),
                    "reorder_ns": int(reorder_ns)})

    def restart_relay(self, link: str, *, fixed_delay: bool = False) -> RelayLink:
        """Stop a relay link's process and start a new one (counters from zero, changes made with
        ``set_*`` forgotten). ``fixed_delay``: it forwards with the link's configured delay and no
        link model, the floor ``bench.emulated_floors`` holds the relay's CPU to, in the same
        namespace between the same veths, so that only the model differs."""
        lk = self._link(link)
        if not isinstance(lk, RelayLink):
            raise UserError(f"link {link}: no relay process to restart ({self.impair} backend)")
        lk.stop()
        lk.fixed_delay_ns = round(lk.params.delay_ms * 1e6) if fixed_delay else None
        lk.start()
        lk.wait_ready()
        # cleanup after a crash kills what net.json names: the new pid, not the old one
        self._record(relay_pids=[r.proc.pid for r in self.links.values() if isinstance(r, RelayLink) and r.proc])
        return lk

    def link_stats(self) -> dict[str, dict[str, Any]]:
        return {name: lk.stats() for name, lk in self.links.items()}

    def _ip_names(self) -> dict[str, str]:
        return {host_ip(i): h.name for i, h in enumerate(self.topo.hosts)}

    def drops(self, extra: Sequence[DroppedFrame] = ()) -> pa.Table:
        """Ground truth: one ``DROP_SCHEMA`` row per frame a relay dropped so far, plus the
        ``extra`` frames (``droplog.DroppedFrame``, on the relays' clock) nodes dropped."""
        frames = [*extra, *self.dropped_frames()]
        return drops_table(frames, self._ip_names(), self.wiring.group_names if hasattr(self, "wiring") else {})

    def dropped_frames(self) -> list[DroppedFrame]:
        """The raw dropped frames (addresses and UDP payload prefixes), for tests and tools."""
        frames: list[DroppedFrame] = []
        for lk in self.links.values():
            if isinstance(lk, RelayLink):
                lk.flush()
                frames.extend(read_drop_file(lk.drop_path, lk.name, lk.a, lk.b))
        return frames

    def link_counts(self, extra: Sequence[dict[str, Any]] = ()) -> pa.Table:
        for lk in self.links.values():
            lk.flush()
        return counts_table(list((self.state_dir / "links").glob("*.counts.json")), extra)
