"""What an emulated run checks before it starts and records of the backend it ran on: the
hosts captured by default, the arguments refused before a run directory exists, and the
environment facts the manifest keeps (``emulate`` runs the experiment itself)."""

from __future__ import annotations

import os
from typing import Any

from rmptwin.emulation.env import has_netem
from rmptwin.emulation.image import image_id
from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment
from rmptwin.node import event_loop as event_loops
from rmptwin.rundir.provenance import NA, safe


def default_capture(loaded: LoadedExperiment) -> list[str]:
    """Customers and retransmit servers: the MoldUDP64 side of the run."""
    return [h.name for h in loaded.topology.hosts if h.role in ("customer", "retransmit")]


def check_arguments(loaded: LoadedExperiment, nodes: str, capture: list[str] | None,
                    event_loop: str = event_loops.DEFAULT) -> None:
    """One UserError line for what cannot run, before a run directory is made."""
    if nodes not in ("docker", "ns", "flat"):
        raise UserError(f"unknown node mode {nodes!r}; choose docker, ns or flat")
    if event_loop not in event_loops.EVENT_LOOPS:
        raise UserError(f"--event-loop: unknown event loop {event_loop!r}; choose {' or '.join(event_loops.EVENT_LOOPS)}")
    if os.geteuid() != 0:
        raise UserError("rmptwin run builds an emulated network and needs root; run it as root or with sudo")
    names = {h.name for h in loaded.topology.hosts}
    unknown = [n for n in capture or [] if n not in names]
    if unknown:
        raise UserError(f"--capture: no host {unknown[0]!r} in topology {loaded.topology.name}")


def emulation_facts(node_mode: str, net: object) -> dict[str, Any]:
    """What the manifest records of the emulated backend a run used (``EmulatedNetwork`` or the
    flat one): node mode, impairment backend, datapath, image, and netem tried for real."""
    env = getattr(net, "env", None)
    tag = getattr(net, "image", None) if node_mode == "docker" else None
    return {
        "node_mode": node_mode,
        "impair_backend": getattr(net, "impair", None),
        "datapath": safe(lambda: env.datapath) if env is not None else NA,  # the flat network has no switches
        "node_image": tag if node_mode == "docker" else NA,
        "node_image_id": safe(image_id, tag) if node_mode == "docker" else NA,
        "sch_netem": safe(has_netem) if os.geteuid() == 0 else None,
    }
