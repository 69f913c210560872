"""The attacker role's factory (see ``rmptwin.factories.FACTORIES``): host spec -> ``AttackerConfig``."""

from __future__ import annotations

import random

from rmptwin.errors import UserError
from rmptwin.factories.adapters import Adapters
from rmptwin.model import AttackerHost, LoadedExperiment
from rmptwin.rmp.attacker import AttackerConfig, AttackerCore

FLOOD_FACTOR = 10.0     # seed 6's denial of service: a flood at 10 x the legitimate rate


def legitimate_rate(loaded: LoadedExperiment) -> float:
    """Messages per second the sources publish on one stripe (their total over the stripes)."""
    w = loaded.experiment.workload
    n_sources = len(w.sources) if w.sources is not None else len(loaded.topology.hosts_with_role("source"))
    return w.rate_per_source * n_sources / w.stripes


def attacker_config(host: AttackerHost, loaded: LoadedExperiment) -> AttackerConfig:
    topo, w = loaded.topology, loaded.experiment.workload
    if host.region is not None:
        if host.region not in topo.regions:
            raise UserError(f"attacker {host.name}: unknown region {host.region!r}; known: {', '.join(topo.regions)}")
        if host.switch not in topo.regions[host.region]:
            raise UserError(f"attacker {host.name}: its switch {host.switch} is not in region {host.region!r}")
    if host.stripe >= w.stripes:
        raise UserError(f"attacker {host.name}: stripe {host.stripe} but the workload has {w.stripes} stripe(s)")
    factor = host.rate_factor if host.rate_factor is not None else (FLOOD_FACTOR if host.mode == "flood" else 1.0)
    start = host.start_s if host.start_s is not None else w.start_s + 0.5
    stop = host.stop_s if host.stop_s is not None else w.start_s + w.duration_s
    security = getattr(loaded.experiment, "security", None)
    claim = ""
    if host.mode == "forge":
        claim = next((h.name for h in topo.hosts if h.role in ("primary", "secondary")
                      and host.region in h.regions), "")
    return AttackerConfig(
        name=host.name, mode=host.mode, stripe=host.stripe, region=host.region,
        rate=max(legitimate_rate(loaded) * factor, 0.1), start_ns=round(start * 1e9), stop_ns=round(stop * 1e9),
        sealed=bool(security is not None and security.enabled), claim=claim, message_bytes=w.message_bytes)


def build_attacker(host: AttackerHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                   adapters: Adapters | None = None) -> AttackerCore:
    return AttackerCore(attacker_config(host, loaded), rng)
