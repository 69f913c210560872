"""The venue I/O a real node hands its core's factory: durable stores and the etcd sequencer.

``node_adapters`` makes them for one host of an emulated run. A gateway or history
recorder keeps its store as a file in the run's venue state directory (``RunDir.venue_state_dir``,
handed over in the node's config). The sequencer host of a ``sequencer: etcd`` experiment starts a
3-member etcd cluster on its own loopback and asks it through an ``EtcdCasClient``; the
driver's event loop gets the answers (``attach``). ``close`` releases all of it; a
cluster is also stopped if the process exits without ``close`` (its members die with the
process in any case).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rmptwin.factories.adapters import Adapters
from rmptwin.model import HostSpec, LoadedExperiment
from rmptwin.node.durable_stores import DurableStores
from rmptwin.node.etcd_client import CAS_GIVE_UP_S, CAS_TIMEOUT_S, Answer, EtcdCasClient, etcd_cas
from rmptwin.node.etcd_cluster import EtcdCluster, dilated_raft_timers
from rmptwin.venue.sequencer import CasProxyCore

if TYPE_CHECKING:
    from rmptwin.node.driver import NodeDriver

ETCD_MEMBERS = 3


@dataclass
class NodeAdapters(Adapters):
    cluster: EtcdCluster | None = None
    closed: bool = False

    def attach(self, driver: NodeDriver, loop: asyncio.AbstractEventLoop) -> None:
        """Start asking etcd; each answer goes to ``driver``'s core on ``loop``'s thread."""
        if not isinstance(self.cas_client, EtcdCasClient):
            return

        def deliver(request_id: int, answer: Answer) -> None:
            if self.closed:
                return   # an answer that arrived while the node was stopping: nobody to tell
            t = driver.true_now()
            cast(CasProxyCore, driver.core).receive_answer(request_id, *answer, driver.clock.local(t))
            driver.after(t)

        self.cas_client.start(lambda request_id, answer: loop.call_soon_threadsafe(deliver, request_id, answer))

    def close(self) -> None:
        self.closed = True
        if self.cas_client is not None:
            cast(EtcdCasClient, self.cas_client).close()   # the only client node_adapters makes
        if isinstance(self.stores, DurableStores):
            self.stores.close()
        if self.cluster is not None:
            self.cluster.stop()


def node_adapters(host: HostSpec, loaded: LoadedExperiment, state_dir: Path) -> NodeAdapters:
    """The adapters of ``host`` in a real run whose venue roles keep their stores in ``state_dir``."""
    adapters = NodeAdapters(stores=DurableStores(state_dir))
    venue = loaded.experiment.venue
    if host.role == "sequencer" and venue is not None and venue.sequencer == "etcd":
        # At time dilation N everything the run controls lasts N times longer in wall time,
        # etcd's raft timers and the client's deadlines too: a paused member is timed out
        # after the same run time at every factor.
        factor = loaded.time_dilation
        heartbeat_ms, election_ms = dilated_raft_timers(factor)
        cluster = EtcdCluster(ETCD_MEMBERS, heartbeat_ms=heartbeat_ms, election_ms=election_ms)
        cluster.start(timeout_s=20.0 + election_ms / 1e3)   # a first election: 9.7 s at factor 64
        weakref.finalize(adapters, cluster.stop)
        prefix = f"rmptwin/{loaded.experiment.name}/{os.getpid()}"
        adapters.cluster = cluster
        adapters.cas_client = EtcdCasClient(etcd_cas(cluster.endpoints, api=venue.etcd_api, prefix=prefix,
                                                         window=venue.window, timeout_s=CAS_TIMEOUT_S * factor,
                                                         give_up_s=CAS_GIVE_UP_S * factor))
    return adapters
