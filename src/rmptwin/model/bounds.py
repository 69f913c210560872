"""The seed's own bounds on the RMP parameters, checked against an experiment's topology.

``violated_bounds(loaded)`` returns one ``Violation`` per bound the experiment breaks. An
experiment may break a bound on purpose (a demo that passes the token faster than the
worst case allows); the CLI therefore warns, and refuses only under ``--strict``. Pure: no
I/O. Path delays and losses are the topology's own (``tree``), so "dN" below is
the real worst one-way delay, not the configured ``dn_ms``.

The bounds (seed: rmp-internet-stock-market, RMP):

- ``dn_vs_path_delay`` (5.1) "dN is the sum of the propagation delay between a source and
  receiver plus the router delays": dN >= d, the longest one-way path between two hosts
  that talk (below). A smaller dN presumes every far message or token pass lost.
- ``tau_r_vs_round_trip`` (5.1) "the interval between requests is at least 2 dN + X + P":
  tau_r >= d(a,b) + d(b,a) + X + P for every requester a and the host b it waits on: a
  source and the primaries of its stripes (acks), two primaries of a stripe (token passes,
  requests to the token site), a secondary and its primary, a customer and its retransmit
  server. This is also the bound of tau_r against tau_t. A source re-sends "at regular
  intervals until it receives an acknowledgement" (2.1), and a time-driven ring acks only
  once every tau_t (5), so an ack can take tau_t + d(s,R_P) + d(R_P,s) + X + P. Read
  literally, that asks tau_r >= tau_t + 2 d + X + P. That contradicts 5.1's own
  tau_t >= dN + 2 k_r tau_r, so tau_r < tau_t is what the seed requires and is no fault.
  The twin's source (rmp/source.py) waits tau_t + tau_r for its first ack. Its re-sends
  are needless exactly when tau_r is below the round trip, which this bound catches.
- ``delta_a_vs_tau_t`` (5, 5.1) fair "when Delta_A >= tau_t", time-driven only. With safe
  delivery a message is released only once stable, m - 1 token passes after its ack
  (2.1: all hold up to t - m + 1), so the bound becomes Delta_A >= (m - 1) tau_t + dN.
- ``tau_t_vs_recovery`` (5.1) tau_t >= dN + 2 k_r tau_r, time-driven only: the token site
  must be able to detect a lost pass, recover it and then the messages it lacks (k_r tries
  each) before its slot. Note that the seed's own formula, tau_t = (1 + 2 k_r) dN +
  k_r (X + P) = dN + k_r (2 dN + X + P), is k_r tau_r short of this bound whenever tau_r is
  its default 2 dN + X + P. The seed is inconsistent here; the bound is checked as written,
  and the warning says so when tau_t is that formula.
- ``batch_limit_vs_rate`` (3, requirement 4; 5) "the maximum token transfer rate may not
  be as fast as the message arrival rate ... Acknowledging multiple messages prevents
  this": a time-driven pass acknowledges at most ``batch_limit`` messages (the twin's cap;
  the seed has none), so a stripe's arrivals per token period, rate x tau_t, must fit in
  one. Else the queue of unacknowledged messages grows for the whole run, and sources
  re-send what waits in it.
- ``k_r_vs_loss`` (2.1, 5.1) a member "decides that receiver r + 1 is inoperable" when
  k_r tries of a token pass go unanswered. One try is a round trip: the pass to the next
  site, and that site's ack back. It fails with q = 1 - (1 - L(a,b)) (1 - L(b,a)), where
  L is the path loss 1 - prod(1 - loss) over its links. A Gilbert-Elliott link counts at
  its stationary mean loss: tries are tau_r apart, long next to a burst of 1/p_bg packets
  of the link's traffic, so they see nearly independent states. Each pass then ends in a
  false failure report with probability q^k_r. Summed over the run's token passes, spread
  evenly over the ring's neighbours, that gives the expected number of operable members
  reported failed, each one re-forming the ring for nothing. The bound warns when this
  reaches 0.1, i.e. when about one run in ten would be disturbed. Time-driven rings pass
  duration / tau_t times. Event-driven rings pass once per message plus idle null tokens.
  The twin's site sends a pass k_r + 1 times before it reports; counting k_r tries, as the
  seed does, errs by one try on the cautious side. Requests for lost messages can fail the
  same way and are not counted, so on balance the estimate is a floor. Loss faults are not
  counted either: they are perturbations the user chose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import permutations

from rmptwin.core.striping import symbol_stripe, symbols_on
from rmptwin.model import HostSpec, LinkParams, LoadedExperiment, Topology
from rmptwin.model.queries import primary_ring, stripes_of, workload_sources
from rmptwin.model.tree import links_delay_ms, switch_path_links

FALSE_FAILURES_PER_RUN = 0.1   # expected false failure reports per run that k_r_vs_loss tolerates


@dataclass(frozen=True)
class Violation:
    """One bound the experiment breaks."""

    key: str        # e.g. 'tau_r_vs_round_trip'
    section: str    # where the seed states it, e.g. 'seed 5.1'
    formula: str    # the bound as the seed writes it
    numbers: str    # the same with this experiment's values plugged in
    message: str    # what goes wrong, in one line


def violated_bounds(loaded: LoadedExperiment) -> list[Violation]:
    """Every seed bound ``loaded`` breaks, in a fixed order; [] for experiments without RMP."""
    if not loaded.topology.hosts_with_role("primary"):
        return []  # venue-only experiments run no token ring: RMP parameters are unused
    paths = _Paths(loaded.topology)
    pairs = _talking_pairs(loaded)
    checks = (_dn_vs_path_delay(loaded, paths, pairs), _tau_r_vs_round_trip(loaded, paths, pairs),
              _delta_a_vs_tau_t(loaded), _tau_t_vs_recovery(loaded), _batch_limit_vs_rate(loaded),
              _k_r_vs_loss(loaded, paths))
    return [v for v in checks if v is not None]


def format_violation(v: Violation) -> str:
    """One line: the key, the seed's formula, the numbers, what goes wrong."""
    return f"{v.key}: {v.formula} ({v.section}), but {v.numbers}: {v.message}"


# ----------------------------------------------------------------------------- paths


class _Paths:
    """Host-to-host one-way delay and loss over the topology (``tree``). The switch path is
    cached per switch pair: a ring of m primaries has m (m - 1) pairs."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._switch_links: dict[tuple[str, str], list[LinkParams]] = {}

    def links(self, a: HostSpec, b: HostSpec) -> list[LinkParams]:
        key = (a.switch, b.switch)
        if key not in self._switch_links:
            self._switch_links[key] = switch_path_links(self.topo, a.switch, b.switch)
        return [a.link, b.link, *self._switch_links[key]]

    def delay(self, a: HostSpec, b: HostSpec) -> float:
        return links_delay_ms(self.links(a, b))

    def loss(self, a: HostSpec, b: HostSpec) -> float:
        return 1 - math.prod(1 - link.loss.mean for link in self.links(a, b))

    def round_trip_loss(self, a: HostSpec, b: HostSpec) -> float:
        return 1 - (1 - self.loss(a, b)) * (1 - self.loss(b, a))


def _representatives(hosts: list[HostSpec]) -> list[HostSpec]:
    """Two hosts of each kind (switch and access link), since a pair may share both: every
    other host has the delays and losses of one of these. Keeps big rings' pairs few."""
    kept: dict[tuple[str, LinkParams], int] = {}
    out = []
    for h in hosts:
        key = (h.switch, h.link)
        if kept.get(key, 0) < 2:
            kept[key] = kept.get(key, 0) + 1
            out.append(h)
    return out


def _talking_pairs(loaded: LoadedExperiment) -> list[tuple[HostSpec, HostSpec]]:
    """(requester, the host it waits on) for every pair whose requests repeat every tau_r."""
    topo = loaded.topology
    pairs: list[tuple[HostSpec, HostSpec]] = []
    for k in range(loaded.experiment.workload.stripes):
        ring = _representatives([topo.host(n) for n in primary_ring(loaded, k)])
        pairs += [(s, p) for s in workload_sources(loaded) if k in stripes_of(s, loaded) for p in ring]
        pairs += list(permutations(ring, 2))
    pairs += [(h, topo.host(h.primary)) for h in topo.hosts_with_role("secondary")]
    pairs += [(h, topo.host(h.retransmit)) for h in topo.hosts_with_role("customer") if h.retransmit]
    return pairs


def stripe_rate(loaded: LoadedExperiment, stripe: int) -> float:
    """Mean messages per second the workload publishes on ``stripe`` (a source draws its
    symbols uniformly from those on its stripes)."""
    wl = loaded.experiment.workload
    rate = 0.0
    for s in workload_sources(loaded):
        mine = symbols_on(stripes_of(s, loaded), wl.symbols, wl.stripes)
        if mine:
            rate += wl.rate_per_source * sum(symbol_stripe(i, wl.stripes) == stripe for i in mine) / len(mine)
    return rate



def _ms(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


# ----------------------------------------------------------------------------- bounds


def _dn_vs_path_delay(loaded: LoadedExperiment, paths: _Paths,
                      pairs: list[tuple[HostSpec, HostSpec]]) -> Violation | None:
    p = loaded.experiment.protocol
    if not pairs:
        return None
    d, a, b = max((paths.delay(a, b), a.name, b.name) for a, b in pairs)
    if p.dn_ms >= d:
        return None
    return Violation(
        "dn_vs_path_delay", "seed 5.1", "dN >= d (the longest one-way path delay)",
        f"dN {_ms(p.dn_ms)} ms < d({a},{b}) = {_ms(d)} ms",
        "receivers presume far messages and token passes lost before they can arrive, and request them")


def _tau_r_vs_round_trip(loaded: LoadedExperiment, paths: _Paths,
                         pairs: list[tuple[HostSpec, HostSpec]]) -> Violation | None:
    p = loaded.experiment.protocol
    if not pairs:
        return None
    rtt, a, b = max((paths.delay(a, b) + paths.delay(b, a), a.name, b.name) for a, b in pairs)
    need = rtt + p.x_ms + p.p_ms
    if p.tau_r >= need:
        return None
    return Violation(
        "tau_r_vs_round_trip", "seed 5.1", "tau_r >= 2 dN + X + P, dN the real path delay",
        f"tau_r {_ms(p.tau_r)} ms < d({a},{b}) + d({b},{a}) + X + P = "
        f"{_ms(rtt)} + {_ms(p.x_ms)} + {_ms(p.p_ms)} = {_ms(need)} ms",
        "sources and receivers re-send before the answer can arrive (duplicate traffic), and after "
        "k_r tries report an operable host as failed")


def _delta_a_vs_tau_t(loaded: LoadedExperiment) -> Violation | None:
    p = loaded.experiment.protocol
    if p.token_mode != "time_driven":
        return None  # seed 5.1: the event-driven protocol trades delay for fairness, no bound
    if p.delivery == "safe":
        m = max(len(primary_ring(loaded, k)) for k in range(loaded.experiment.workload.stripes))
        need = (m - 1) * p.tau_t + p.dn_ms
        if p.delta_a >= need:
            return None
        return Violation(
            "delta_a_vs_tau_t", "seed 5.1 and 2.1 (stable at t - m + 1)", "Delta_A >= (m - 1) tau_t + dN",
            f"Delta_A {_ms(p.delta_a)} ms < ({m} - 1) x {_ms(p.tau_t)} + {_ms(p.dn_ms)} = {_ms(need)} ms",
            "with safe delivery a message is stable m - 1 token passes after its ack: R_T release late, not "
            "simultaneously (unfair)")
    if p.delta_a >= p.tau_t:
        return None
    return Violation(
        "delta_a_vs_tau_t", "seed 5.1", "Delta_A >= tau_t",
        f"Delta_A {_ms(p.delta_a)} ms < tau_t {_ms(p.tau_t)} ms",
        "an R_T that must recover a message releases it late: releases are not simultaneous (unfair)")


def _tau_t_vs_recovery(loaded: LoadedExperiment) -> Violation | None:
    p = loaded.experiment.protocol
    if p.token_mode != "time_driven":
        return None  # event-driven rings pass on arrival; tau_t is no token period there
    need = p.dn_ms + 2 * p.k_r * p.tau_r
    if p.tau_t >= need:
        return None
    note = (f" (tau_t is the default, the seed's formula (1 + 2 k_r) dN + k_r (X + P), which does not meet "
            f"this bound of the same seed: set tau_t_ms to at least {_ms(need)})") if p.tau_t_ms is None else ""
    return Violation(
        "tau_t_vs_recovery", "seed 5.1", "tau_t >= dN + 2 k_r tau_r",
        f"tau_t {_ms(p.tau_t)} ms < {_ms(p.dn_ms)} + 2 x {p.k_r} x {_ms(p.tau_r)} = {_ms(need)} ms",
        "a token site that lost the pass or a message may not recover it before its slot: the token goes "
        "out late, acks come late (sources re-send), and Delta_A >= tau_t no longer guarantees fairness" + note)


def _batch_limit_vs_rate(loaded: LoadedExperiment) -> Violation | None:
    p = loaded.experiment.protocol
    if p.token_mode != "time_driven":
        return None  # event-driven rings pass the token as messages arrive
    rate, k = max((stripe_rate(loaded, k), k) for k in range(loaded.experiment.workload.stripes))
    per_pass = rate * p.tau_t / 1e3
    if per_pass <= p.batch_limit:
        return None
    return Violation(
        "batch_limit_vs_rate", "seed 3 (requirement 4) and 5", "rate x tau_t <= batch_limit",
        f"stripe {k}: {rate:g} msg/s x {_ms(p.tau_t)} ms = {per_pass:.0f} > batch_limit {p.batch_limit}",
        "acknowledgement falls behind the arrivals for the whole run: the unacknowledged queue and the "
        "latency grow, and sources re-send what waits in it")


def _token_passes(loaded: LoadedExperiment, stripe: int) -> float:
    """Token passes of one stripe's ring over the run."""
    exp = loaded.experiment
    p, wl = exp.protocol, exp.workload
    run_ms = loaded.duration_s * 1e3
    if p.token_mode == "time_driven":
        return run_ms / p.tau_t
    return stripe_rate(loaded, stripe) * wl.duration_s + run_ms / p.null_token


def _k_r_vs_loss(loaded: LoadedExperiment, paths: _Paths) -> Violation | None:
    p = loaded.experiment.protocol
    topo = loaded.topology
    expected, passes, worst = 0.0, 0.0, (0.0, "", "")
    for k in range(loaded.experiment.workload.stripes):
        ring = [topo.host(n) for n in primary_ring(loaded, k)]
        if len(ring) < 2:
            continue
        n = _token_passes(loaded, k)
        passes += n
        for a, b in zip(ring, ring[1:] + ring[:1]):
            q = paths.round_trip_loss(a, b)
            expected += n / len(ring) * q ** p.k_r
            worst = max(worst, (q, a.name, b.name))
    if expected < FALSE_FAILURES_PER_RUN:
        return None
    q, from_name, to_name = worst
    return Violation(
        "k_r_vs_loss", "seed 2.1 and 5.1",
        f"expected false failure reports per run = sum over token passes of q^k_r < {FALSE_FAILURES_PER_RUN:g}",
        f"{passes:.0f} passes give {expected:.2f} (worst pass {from_name}->{to_name}: q = {q:.3f}, "
        f"q^{p.k_r} = {q ** p.k_r:.2g})",
        "all k_r tries of a token pass fail often enough that an operable member may be reported failed "
        "and the ring re-formed for nothing: raise k_r or lower the loss")
