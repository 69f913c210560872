"""Venue role factories (registered in rmptwin.factories): gateway, venue, sequencer, history, client.

Durable stores outlive the core: a crashed and recovered gateway or HR gets the same
store back, as a restarted process finds its disk. In the simulator the stores are in
memory (kept per experiment and host); with ``RMPTWIN_VENUE_STATE_DIR`` set (the
asyncio runtime, a real process) the gateway log is a file with fsync and the HR a
SQLite database in WAL mode inside that directory; with ``RMPTWIN_ETCD_ENDPOINTS`` set
the sequencer host forwards proposals to that etcd cluster (``etcd_cluster.EtcdCluster``).
"""

from __future__ import annotations

import atexit
import os
import random
from pathlib import Path

from ..errors import UserError
from ..spec import LoadedExperiment, VenueWorkload
from ..venue.client import ClientCore
from ..venue.gateway import GatewayCore
from ..venue.history import HistoryCore
from ..venue.sequencer import SequencerCore
from ..venue.stores import FileGatewayLog, MemoryGatewayLog, MemoryHistoryStore, SqliteHistoryStore
from ..venue.venue import VenueCore

_DURABLE: dict[tuple[int, str], tuple[LoadedExperiment, object]] = {}


def durable_store(loaded: LoadedExperiment, host: str, kind: str, *, fresh: bool = False):
    """The store of one host of one experiment: ``fresh`` (a first start) begins with an empty
    one, a recovering host gets back what it had."""
    key = (id(loaded), host)
    if fresh and key in _DURABLE:
        old = _DURABLE.pop(key)[1]
        if hasattr(old, "close"):
            old.close()
    if key not in _DURABLE:
        state_dir = os.environ.get("RMPTWIN_VENUE_STATE_DIR")  # set by the runtime for real nodes
        if state_dir:
            Path(state_dir).mkdir(parents=True, exist_ok=True)
            path = Path(state_dir) / (f"{host}.gwlog" if kind == "gateway" else f"{host}.sqlite")
            if fresh:
                for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    p.unlink(missing_ok=True)
            store = FileGatewayLog(path) if kind == "gateway" else SqliteHistoryStore(path)
        else:
            store = MemoryGatewayLog() if kind == "gateway" else MemoryHistoryStore()
        _DURABLE[key] = (loaded, store)
    return _DURABLE[key][1]


def forget_stores(loaded: LoadedExperiment) -> None:
    """Drop the stores of a finished experiment (the simulator's end of run)."""
    for key in [k for k in _DURABLE if k[0] == id(loaded)]:
        store = _DURABLE.pop(key)[1]
        if hasattr(store, "close"):
            store.close()


def _venue(loaded: LoadedExperiment) -> VenueWorkload:
    if loaded.experiment.venue is None:
        raise UserError(f"{loaded.path}: the topology has venue hosts but the experiment has no 'venue:' section")
    return loaded.experiment.venue


def _names(loaded: LoadedExperiment, role: str) -> list[str]:
    return [h.name for h in loaded.topology.hosts_with_role(role)]


def build_gateway(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    v = _venue(loaded)
    gws = _names(loaded, "gateway")
    return GatewayCore(gws.index(host.name), _names(loaded, "venue"), v.symbols,
                       durable_store(loaded, host.name, "gateway", fresh=not recovering), tick=v.tick,
                       fsync_ns=int(v.gw_fsync_us * 1000), recovering=recovering)


def build_venue(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    v = _venue(loaded)
    seqs, hrs = _names(loaded, "sequencer"), _names(loaded, "history")
    sequencer = seqs[0] if (seqs and v.sequencer in ("cas", "etcd")) else None
    if v.sequencer == "none" and len(_names(loaded, "gateway")) > 1:
        raise UserError(f"{loaded.path}: venue.sequencer 'none' is only correct with one gateway "
                        "(two gateways' requests reach the EVs in different orders); use 'cas'")
    if v.sequencer != "none" and not seqs:
        raise UserError(f"{loaded.path}: venue.sequencer is {v.sequencer!r} but the topology has no sequencer host")
    mean_ns = v.ev_service_us * 1000

    def service() -> int:
        return max(1, int(rng.expovariate(1.0 / mean_ns))) if mean_ns > 0 else 0

    return VenueCore(_names(loaded, "venue").index(host.name), v.symbols, _names(loaded, "gateway"),
                     sequencer=sequencer, history=hrs[0] if hrs else None, service=service,
                     durable=v.durable_history, checkpoint_every=v.checkpoint_every, lookahead=v.lookahead,
                     recovering=recovering)


def _in_real_node() -> bool:
    """True inside a process of a real (emulated) run, not inside the simulator."""
    return os.environ.get("RMPTWIN_REAL_NODE") == "1"


def build_sequencer(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    """The in-memory CAS sequencer; in a real run of a ``sequencer: etcd`` experiment, a proxy
    to etcd: to the cluster at ``RMPTWIN_ETCD_ENDPOINTS`` (comma-separated URLs) if set, else
    to a 3-member cluster this host starts on its own loopback (stopped when it exits)."""
    v = _venue(loaded)
    if v.sequencer == "etcd" and _in_real_node():
        from ..venue.etcd_cluster import EtcdCluster
        from ..venue.etcd_sequencer import EtcdCas, EtcdProxyCore

        endpoints = [e for e in os.environ.get("RMPTWIN_ETCD_ENDPOINTS", "").split(",") if e]
        if not endpoints:
            cluster = EtcdCluster(3).start()
            atexit.register(cluster.stop)
            endpoints = cluster.endpoints
        prefix = f"rmptwin/{loaded.experiment.name}/{os.environ.get('RMPTWIN_RUN_ID', os.getpid())}"
        return EtcdProxyCore(EtcdCas(endpoints, prefix=prefix, window=v.window))
    return SequencerCore(v.window)


def build_history(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    v = _venue(loaded)
    return HistoryCore(durable_store(loaded, host.name, "history", fresh=not recovering),
                       commit_ns=int(v.hr_commit_us * 1000) if v.durable_history else 0)


def build_client(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    v = _venue(loaded)
    clients, gws = _names(loaded, "client"), _names(loaded, "gateway")
    if not gws:
        raise UserError(f"{loaded.path}: client {host.name} needs a gateway host in the topology")
    idx = clients.index(host.name)
    gateway = host.gateway or gws[idx % len(gws)]
    if gateway not in gws:
        raise UserError(f"{loaded.path}: client {host.name}: gateway {gateway!r} is not a gateway host")
    start = int(v.start_s * 1e9)
    return ClientCore(idx, gateway, v.symbols, v.rate / len(clients), rng, start_ns=start,
                      stop_ns=start + int(v.duration_s * 1e9), tick=v.tick,
                      malformed_fraction=v.malformed_fraction)
