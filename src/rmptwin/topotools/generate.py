"""Random RMP topologies with every role placed, and an experiment that fits each one.

``generate(GenParams(...), seed)`` is a pure function of its parameters and seed: the same
call gives the same topology and experiment (plain dicts, the YAML's own shape), whatever
ran before. ``rmptwin topo gen`` writes them; the random-input tests and ``rmptwin campaign
twin`` call it directly.

The rules it follows, so that what it makes is valid under the topology checks a
researcher would expect (and which ``rmptwin validate`` enforces):

- Switches ``s1..sN`` form a random spanning tree (switch i joins a random earlier one);
  ``mesh`` adds ``round(mesh x N)`` extra links between random non-adjacent pairs.
- Regions partition the switches into ``regions`` groups grown from random seed switches
  over the *tree* links (a random breadth-first growth), so each region is connected inside
  itself by tree links alone, and stays so whatever mesh links are added.
- Per region: one primary R_P on a switch of the region, remulticasting into it (the R_T
  of the region: a scoped group only reaches its region from inside it); one retransmit
  server R_x there serving the region; ``customers_per_region`` customers on the region's
  switches, the first guaranteed (re-requesting from the region's R_x), then alternating
  best effort and guaranteed. Further primaries (up to ``primaries``) join the ring with no
  region. Sources and one reformation server sit on random switches.
- Switch links: delay uniform in ``delay_ms``; loss uniform in [0, ``loss_max``], one link
  in five as Gilbert-Elliott bursts of mean 2 packets with the same mean loss. Access links
  delay 0.1 ms and never lose.
- The experiment: dN = the longest host-to-host one-way delay + 2 ms, tau_r the seed's
  2 dN + X + P, k_r the least (3..12) for which ``spec_bounds`` expects no false failure
  report and the guaranteed customers' repairs no unrepaired gap (``_expected_unrepaired``),
  tau_t = dN + 2 k_r tau_r (the recovery bound), Delta_A = tau_t, batch_limit raised to
  twice a token period's arrivals where that exceeds 256; a short Poisson
  workload, and a drain long enough for the last acknowledgement, its release and the
  customers' repairs. By construction it breaks no seed bound.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rmptwin.errors import UserError
from rmptwin.model import Experiment, GilbertElliott, LinkParams, LoadedExperiment, Topology
from rmptwin.model.bounds import violated_bounds
from rmptwin.model.tree import switch_path_links
from rmptwin.sim.random_trees import max_path_delay_ms

ACCESS = {"delay_ms": 0.1}


@dataclass(frozen=True)
class GenParams:
    switches: int = 10
    regions: int = 2
    loss_max: float = 0.02
    mesh: float = 0.0                  # extra links per switch (0: a tree)
    sources: int = 1
    primaries: int = 3                 # at least one per region
    customers_per_region: int = 2
    stripes: int = 1
    delay_ms: tuple[float, float] = (0.5, 4.0)
    rate_per_source: float = 40.0
    workload_s: float = 1.0
    name: str | None = None

    def check(self) -> None:
        if self.switches < 1:
            raise UserError(f"topo gen: --switches must be at least 1, got {self.switches}")
        if not 1 <= self.regions <= self.switches:
            raise UserError(f"topo gen: --regions must be in 1..{self.switches} (one switch at least per "
                            f"region), got {self.regions}")
        if not 0.0 <= self.loss_max < 0.5:
            raise UserError(f"topo gen: --loss-max must be in [0, 0.5), got {self.loss_max}")
        if self.mesh < 0:
            raise UserError(f"topo gen: --mesh must be >= 0, got {self.mesh}")
        if self.sources < 1 or self.customers_per_region < 1 or self.stripes < 1:
            raise UserError("topo gen: --sources, --customers-per-region and --stripes must be at least 1")
        if self.regions > 9 or self.sources > 9 or self.customers_per_region > 9 or self.primaries > 99:
            raise UserError("topo gen: at most 9 regions, 9 sources, 9 customers per region and 99 primaries "
                            "(host names are at most 10 characters)")


def _switch_links(rng: random.Random, p: GenParams,
                  sw: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Tree edges (parent, child) and all links (tree first, then mesh extras)."""
    tree = [(sw[rng.randrange(i)], sw[i]) for i in range(1, len(sw))]
    edges = {frozenset(e) for e in tree}
    extra: list[tuple[str, str]] = []
    want = round(p.mesh * len(sw))
    possible = len(sw) * (len(sw) - 1) // 2 - len(edges)
    while len(extra) < min(want, possible):
        a, b = rng.sample(sw, 2)
        if frozenset((a, b)) not in edges:
            edges.add(frozenset((a, b)))
            extra.append((a, b))
    return tree, tree + extra


def _regions(rng: random.Random, p: GenParams, sw: list[str], tree: list[tuple[str, str]]) -> dict[str, list[str]]:
    """A partition of the switches into connected groups grown over the tree links."""
    adj: dict[str, list[str]] = {s: [] for s in sw}
    for a, b in tree:
        adj[a].append(b)
        adj[b].append(a)
    owner: dict[str, int] = {}
    frontier: list[tuple[int, str]] = []
    for r, s in enumerate(rng.sample(sw, p.regions)):
        owner[s] = r
        frontier.append((r, s))
    while frontier:
        r, s = frontier.pop(rng.randrange(len(frontier)))
        for n in adj[s]:
            if n not in owner:
                owner[n] = r
                frontier.append((r, n))
    names = [f"r{i + 1}" for i in range(p.regions)]
    return {names[r]: [s for s in sw if owner[s] == r] for r in range(p.regions)}


def _loss(rng: random.Random, p: GenParams) -> float | dict[str, Any]:
    mean = round(rng.uniform(0.0, p.loss_max), 4)
    if mean > 0 and rng.random() < 0.2:
        p_bg = 0.5
        return {"model": "gilbert_elliott", "p_gb": round(mean * p_bg / (1 - mean), 5), "p_bg": p_bg}
    return mean


def generate_topology(p: GenParams, seed: int) -> dict[str, Any]:
    """The topology (YAML-shaped dict) for ``p`` and ``seed``."""
    p.check()
    rng = random.Random(f"topogen:{seed}")
    sw = [f"s{i + 1}" for i in range(p.switches)]
    tree, links = _switch_links(rng, p, sw)
    regions = _regions(rng, p, sw, tree)
    link_rows: list[dict[str, Any]] = []
    for a, b in links:
        row: dict[str, Any] = {"a": a, "b": b, "delay_ms": round(rng.uniform(*p.delay_ms), 3)}
        loss = _loss(rng, p)
        if loss:
            row["loss"] = loss
        link_rows.append(row)
    hosts: list[dict[str, Any]] = []

    def host(name: str, role: str, switch: str, **extra: Any) -> None:
        hosts.append({"name": name, "role": role, "switch": switch, "link": dict(ACCESS), **extra})

    for i in range(p.sources):
        host(f"src{i + 1}", "source", rng.choice(sw))
    n_primary = 0
    for region, members in regions.items():
        n_primary += 1
        host(f"rp{n_primary}", "primary", rng.choice(members), regions=[region])
    while n_primary < p.primaries:
        n_primary += 1
        host(f"rp{n_primary}", "primary", rng.choice(sw))
    for region, members in regions.items():
        host(f"rx{region}", "retransmit", rng.choice(members), regions=[region])
    host("xr1", "reformation", rng.choice(sw))
    for region, members in regions.items():
        for j in range(p.customers_per_region):
            extra = {"retransmit": f"rx{region}"} if j % 2 == 0 else {"grade": "best_effort"}
            host(f"c{region}n{j + 1}", "customer", rng.choice(members), regions=[region], **extra)
    name = p.name or f"gen-{p.switches}s-{seed}"
    return {"name": name, "switches": sw, "regions": regions, "links": link_rows, "hosts": hosts}


def _experiment(name: str, topo_ref: str, seed: int, p: GenParams, protocol: dict[str, Any]) -> dict[str, Any]:
    start = 0.2
    return {
        "name": name, "description": f"generated by `rmptwin topo gen` (seed {seed})", "topology": topo_ref,
        # the run lasts its workload plus the drain its protocol needs (model.drain)
        "seed": seed, "duration_s": "auto", "protocol": protocol,
        "workload": {"rate_per_source": p.rate_per_source, "arrival": "poisson", "stripes": p.stripes,
                     "symbols": max(4, p.stripes), "start_s": start, "duration_s": p.workload_s},
    }


def generate_experiment(p: GenParams, seed: int, topology: dict[str, Any], topo_ref: str) -> dict[str, Any]:
    """An experiment (YAML-shaped dict) on ``topology`` that breaks no seed bound.

    ``topo_ref`` is what its ``topology:`` field says (a path relative to the experiment)."""
    topo = Topology.model_validate(topology)
    dn = math.ceil(max_path_delay_ms(topo) + 2.0)
    p_ms = 1.0
    tau_r = 2 * dn + p_ms
    name = topology["name"]
    for k_r in range(3, 13):
        tau_t = math.ceil(dn + 2 * k_r * tau_r)
        protocol = {"token_mode": "time_driven", "dn_ms": dn, "k_r": k_r, "x_ms": 0, "p_ms": p_ms,
                    "tau_t_ms": tau_t, "delta_a_ms": tau_t}
        # one token pass must be able to acknowledge a period's arrivals (every source may
        # publish on one stripe), with room for Poisson bursts
        per_pass = math.ceil(2 * p.rate_per_source * len(topo.hosts_with_role("source")) * tau_t / 1e3)
        if per_pass > 256:
            protocol["batch_limit"] = per_pass
        exp = _experiment(name, topo_ref, seed, p, protocol)
        loaded = LoadedExperiment(experiment=Experiment.model_validate(exp), topology=topo, path=Path("<gen>"))
        if not any(v.key == "k_r_vs_loss" for v in violated_bounds(loaded)) \
                and _expected_unrepaired(loaded, k_r) < UNREPAIRED_PER_RUN:
            return exp
    return exp   # loss too high for 12 tries: the bound warning says so when it runs


# Expected guaranteed-customer gaps left unrepaired per run that k_r must keep below (the
# drain leaves a customer k_r requests: RX_TRIES to its R_x, then the R_T of its region; a
# guaranteed customer asks on after that, but the run may end first).
UNREPAIRED_PER_RUN = 0.002


def _all_tries_fail(links: list[LinkParams], k: int) -> float:
    """Chance that k requests in a row (each a request and its answer over ``links``) all fail.

    A Bernoulli link loses a try with 1 - (1 - p)^2, independently. A burst link's tries
    are not independent: retries are the sparse packets of its arrival-order chain, so once
    one lands in the Bad state the next stays there with 1 - p_bg: the k tries fail
    together with about pi_bad (1 - p_bg)^(k - 1) (loss_bad 1); this term dominates."""
    ok = 1.0
    for lk in links:
        loss = lk.loss
        if getattr(loss, "model", "bernoulli") == "gilbert_elliott":
            ge = cast(GilbertElliott, loss)   # getattr does not narrow the loss model
            pi_bad = ge.p_gb / (ge.p_gb + ge.p_bg)
            ok *= 1 - min(1.0, 2 * pi_bad * (1 - ge.p_bg) ** (k - 1) * ge.loss_bad)
        else:   # Bernoulli (a trace counts at its mean)
            ok *= 1 - (1 - (1 - loss.mean) ** 2) ** k
    return 1 - ok


def _expected_unrepaired(loaded: LoadedExperiment, k_r: int) -> float:
    """Gaps a guaranteed customer cannot repair in k_r requests, summed over the customers:
    gaps (messages x loss from its R_T) x the chance every request fails."""
    topo, wl = loaded.topology, loaded.experiment.workload
    messages = wl.rate_per_source * len(topo.hosts_with_role("source")) * wl.duration_s
    total = 0.0
    for c in topo.hosts_with_role("customer"):
        if c.grade != "guaranteed" or c.retransmit is None:
            continue
        rts = [h for h in topo.hosts_with_role("primary") if set(h.regions) & set(c.regions)]
        rx = topo.host(c.retransmit)
        for rt in rts:
            down = switch_path_links(topo, rt.switch, c.switch)
            gap = 1.0 - math.prod(1 - lk.loss.mean for lk in down)
            fail = max(_all_tries_fail(switch_path_links(topo, c.switch, s.switch), k_r) for s in (rx, rt))
            total += messages * gap * fail
    return total


def generate(p: GenParams, seed: int, topo_ref: str = "topology.yaml") -> tuple[dict[str, Any], dict[str, Any]]:
    """(topology, experiment) for ``p`` and ``seed``."""
    topology = generate_topology(p, seed)
    return topology, generate_experiment(p, seed, topology, topo_ref)


def campaign_params(seed: int) -> GenParams:
    """A spread of shapes from the seed alone (sizes 2-16 switches, 1-3 regions, loss up to
    5 %, trees and meshes, 1-2 sources and stripes): what the random-input test and
    ``rmptwin campaign twin`` run."""
    r = random.Random(f"params:{seed}")
    switches = r.randint(2, 16)
    return GenParams(switches=switches, regions=r.randint(1, min(3, switches)),
                     loss_max=r.choice([0.0, 0.01, 0.03, 0.05]), mesh=r.choice([0.0, 0.0, 0.3]),
                     sources=r.randint(1, 2), primaries=r.randint(3, 4), customers_per_region=r.randint(1, 3),
                     stripes=r.randint(1, 2), rate_per_source=50.0, workload_s=1.0)


def loaded_generated(p: GenParams, seed: int) -> LoadedExperiment:
    """The generated pair as a LoadedExperiment, without files (model checks only)."""
    topology, exp = generate(p, seed)
    return LoadedExperiment(experiment=Experiment.model_validate(exp), topology=Topology.model_validate(topology),
                            path=Path(f"<gen {seed}>"))
