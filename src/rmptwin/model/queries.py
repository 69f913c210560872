"""Questions about a loaded experiment that every layer above the spec asks alike.

The stripes a host serves, a stripe's primary and secondary rings, the R_T that remulticast
a stripe into a region, the stripes a customer joins, the protocol's timing in integer
nanoseconds, the sources of the workload, the one-way delay between two hosts, the plan of
edge stripes (seed 4.4). The
factories build cores from these answers, the seed-bound checks (``model.bounds``) judge
them and the analysis reads a run with them, so each has one definition, here.
"""

from __future__ import annotations

import heapq

from rmptwin.core import striping
from rmptwin.core.timing import MS, Timing
from rmptwin.errors import UserError
from rmptwin.model import (
    CustomerHost,
    HostSpec,
    LoadedExperiment,
    PrimaryHost,
    Protocol,
    SecondaryHost,
    SourceHost,
    Topology,
)
from rmptwin.rmp import edge_stripes
from rmptwin.rmp.edge_stripes import EdgePlan, plan_edges

# the hosts that remulticast a stripe into their regions (R_T)
REMULTICAST_ROLES = ("primary", "secondary")


def timing_from_protocol(p: Protocol) -> Timing:
    """The experiment's protocol section in integer nanoseconds."""
    return Timing(
        time_driven=p.token_mode == "time_driven",
        dn=round(p.dn_ms * MS), tau_t=round(p.tau_t * MS), tau_r=round(p.tau_r * MS),
        delta_a=round(p.delta_a * MS), null_token=round(p.null_token * MS), k_r=p.k_r, k_p=p.k_p,
        batch_limit=p.batch_limit, start_policy=p.start_policy, safe=p.delivery == "safe",
    )


def protocol_timing(loaded: LoadedExperiment) -> Timing:
    return timing_from_protocol(loaded.experiment.protocol)


def all_stripes(loaded: LoadedExperiment) -> list[int]:
    return striping.host_stripes(None, loaded.experiment.workload.stripes)


def stripes_of(host: HostSpec, loaded: LoadedExperiment) -> list[int]:
    """The stripes a source, R_P or R_S serves: its own list, else every stripe of the workload."""
    return striping.host_stripes(getattr(host, "stripes", None), loaded.experiment.workload.stripes)


def primary_ring(loaded: LoadedExperiment, stripe: int) -> list[str]:
    """The initial primary token ring of a stripe: its primaries in topology order."""
    return [h.name for h in loaded.topology.hosts_with_role("primary") if stripe in stripes_of(h, loaded)]


def reformation_servers(loaded: LoadedExperiment) -> list[str]:
    return [h.name for h in loaded.topology.hosts_with_role("reformation")]


def secondary_ring(loaded: LoadedExperiment, ring: str, stripe: int) -> list[str]:
    """A secondary ring on a stripe: the R_P of its first R_S, then its R_S in topology order."""
    members = [
        h for h in loaded.topology.hosts_with_role("secondary") if h.ring == ring and stripe in stripes_of(h, loaded)
    ]
    if not members:
        return []
    return [members[0].primary] + [h.name for h in members]


def remulticast_hosts(loaded: LoadedExperiment) -> list[PrimaryHost | SecondaryHost]:
    """R_T hosts (primary and secondary) in topology order (indexed by the topology itself)."""
    return loaded.topology.hosts_with_role(*REMULTICAST_ROLES)


def remulticasters(loaded: LoadedExperiment, regions: list[str], stripe: int) -> list[str]:
    """R_T hosts (primary/secondary) remulticasting ``stripe`` into any of ``regions``, in topology order."""
    want = set(regions)
    plan = edge_plan(loaded)
    if plan is not None:
        stripe = plan.core_of(stripe)   # an edge stripe comes from the R_T of its core stripe
    return [
        h.name for h in remulticast_hosts(loaded)
        if want & set(h.regions) and striping.serves_stripe(h.stripes, stripe)
    ]


def customer_stripes(host: CustomerHost, loaded: LoadedExperiment) -> list[int]:
    """The stripes a customer joins (``striping.customer_stripes`` on its spec and the workload's rate)."""
    w = loaded.experiment.workload
    plan = edge_plan(loaded)
    if plan is not None:   # edge stripes: those subscribed to that the access link carries
        unknown = sorted(set(host.stripes or ()) - set(plan.ids()))
        if unknown:
            raise UserError(f"{loaded.path}: customer {host.name} names stripes {unknown}, which are not edge "
                            f"stripes (this experiment's are {plan.ids()[0]}..{plan.ids()[-1]})")
        mbps = host.link.bandwidth_mbps
        return edge_stripes.stripes_within(plan, mbps * 1000 if mbps is not None else None, host.stripes,
                                           len(host.regions))
    n_sources = len(w.sources) if w.sources is not None else len(loaded.topology.hosts_with_role("source"))
    return striping.customer_stripes(
        host.stripes, w.stripes, link_mbps=host.link.bandwidth_mbps,
        msgs_per_stripe=w.rate_per_source * n_sources / w.stripes, message_bytes=w.message_bytes,
        regions=len(host.regions))


def workload_sources(loaded: LoadedExperiment) -> list[SourceHost]:
    wl = loaded.experiment.workload
    hosts = loaded.topology.hosts_with_role("source")
    if wl.sources is not None:
        wanted = set(wl.sources)
        hosts = [h for h in hosts if h.name in wanted]
    return hosts


def path_delay_ms(topo: Topology, a: str, b: str) -> float:
    """One-way propagation delay from host ``a`` to host ``b``: access links plus the
    switch path of least total delay (jitter and queueing left out)."""
    ha, hb = topo.host(a), topo.host(b)
    adj: dict[str, list[tuple[str, float]]] = {s: [] for s in topo.switches}
    for link in topo.links:
        adj[link.a].append((link.b, link.delay_ms))
        adj[link.b].append((link.a, link.delay_ms))
    best = {ha.switch: 0.0}
    heap = [(0.0, ha.switch)]
    while heap:
        d, s = heapq.heappop(heap)
        if d > best.get(s, float("inf")):
            continue
        for nxt, w in adj[s]:
            if d + w < best.get(nxt, float("inf")):
                best[nxt] = d + w
                heapq.heappush(heap, (d + w, nxt))
    return ha.link.delay_ms + best[hb.switch] + hb.link.delay_ms


# ----------------------------------------------------------------------------- edge stripes (seed 4.4)


def msgs_per_symbol(loaded: LoadedExperiment) -> float:
    """The busiest symbol's expected message rate: each source spreads its rate evenly over
    the symbols of the stripes it serves (``ticker_workload``)."""
    w = loaded.experiment.workload
    hosts = loaded.topology.hosts_with_role("source")
    if w.sources is not None:
        hosts = [h for h in hosts if h.name in set(w.sources)]
    per = [0.0] * w.symbols
    for h in hosts:
        mine = striping.symbols_on(striping.host_stripes(getattr(h, "stripes", None), w.stripes), w.symbols, w.stripes)
        for i in mine:
            per[i] += w.rate_per_source / len(mine)
    return max(per) if per else 0.0


def edge_plan(loaded: LoadedExperiment) -> EdgePlan | None:
    w = loaded.experiment.workload
    if w.edge_stripes is None:
        return None
    try:
        return plan_edges(symbols=w.symbols, stripes=w.stripes, msgs_per_symbol=msgs_per_symbol(loaded),
                          message_bytes=w.message_bytes, line_kbps=w.edge_stripes.line_kbps)
    except ValueError as e:
        raise UserError(f"{loaded.path}: workload.edge_stripes: {e}") from None


def stripe_count(loaded: LoadedExperiment) -> int:
    """How many stripe numbers the run uses: the core stripes and, after them, the edge ones."""
    plan = edge_plan(loaded)
    w = loaded.experiment.workload
    return w.stripes + (len(plan.ids()) if plan is not None else 0)
