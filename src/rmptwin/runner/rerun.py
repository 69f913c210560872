"""`rmptwin rerun RUN_DIR`: repeat a run from its manifest.json alone.

The experiment and topology come from the manifest, where they are stored resolved with
every default filled, and not from the YAML files, which may have changed since. The
seed and the backend come from it too, and for an emulated run the node mode, the
impairment backend actually used and the captured hosts; a simulated run with captures
(`--pcap`) writes them again. The new run goes into a new run
directory, through the same ``runner.pipeline.run_experiment`` as `rmptwin sim` and `rmptwin
run`. Then one line says where the environment differs from the original's, and one
whether the summary does (`rmptwin rerun` in rmptwin.cli.main prints them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rmptwin.emulation.env import has_netem, is_root
from rmptwin.errors import UserError
from rmptwin.model import Experiment, LoadedExperiment, Topology, cross_check
from rmptwin.node.event_loop import EVENT_LOOPS
from rmptwin.rundir.provenance import differences
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import EmulationOptions, ProgressFn, RunOutcome, run_experiment

NODE_MODES = ("docker", "ns", "flat")
# summary.json keys that measure the machine rather than the run (wall clock, drain time).
UNREPRODUCIBLE_SUMMARY_KEYS = ("runtime",)


@dataclass(frozen=True)
class Replay:
    """Everything a run is repeated from, as the manifest recorded it."""

    loaded: LoadedExperiment
    seed: int
    backend: str                        # "sim" or "emulation"
    nodes: str | None = None            # emulation: docker, ns or flat
    impair: str | None = None           # emulation: netem, relay, or auto for the flat network
    capture: list[str] | None = None    # emulation: None is the runner's default (customers)
    limits: dict[str, Any] | None = None   # emulation: {cpus, memory_mb} per Docker host, as recorded
    pcap: bool = False                  # sim: every host's capture (`rmptwin sim --pcap`)
    event_loop: str | None = None       # emulation: the nodes' event loop (None: recorded before it was)
    servers: tuple[str, ...] = ()       # emulation: the servers it was spread over (docs/cluster.md)
    placement: str = "regions"          # emulation over servers: the placer it used


def _first_error(key: str, err: ValidationError) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in (key, *first["loc"]))
    return f"{field}: {first['msg'].removeprefix('Value error, ')}"


def loaded_from_manifest(manifest: dict[str, Any], where: str) -> LoadedExperiment:
    """The experiment and topology the manifest recorded, validated as a YAML file would be."""
    for key in ("experiment", "topology"):
        if not isinstance(manifest.get(key), dict):
            raise UserError(f"{where}: no resolved {key} (was it written by rmptwin sim or run?)")
    try:
        exp = Experiment.model_validate(manifest["experiment"])
    except ValidationError as e:
        raise UserError(f"{where}: {_first_error('experiment', e)}") from None
    try:
        topo = Topology.model_validate(manifest["topology"])
    except ValidationError as e:
        raise UserError(f"{where}: {_first_error('topology', e)}") from None
    cross_check(Path(where), exp, topo)  # the same cross-references load_experiment checks
    path = manifest.get("experiment_file")
    return LoadedExperiment(experiment=exp, topology=topo, path=Path(path if isinstance(path, str) else where))


def replay_from_manifest(manifest: dict[str, Any], where: str) -> Replay:
    """The simulator's or the runtime runner's arguments for repeating the run."""
    loaded = loaded_from_manifest(manifest, where)
    seed = manifest.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise UserError(f"{where}: seed: missing or not an integer")
    backend = manifest.get("backend")
    if backend == "sim":   # a manifest lists the captures of a run that wrote them
        return Replay(loaded, seed, "sim", pcap=bool(manifest.get("pcaps")))
    if backend != "emulation":
        raise UserError(f"{where}: backend: expected 'sim' or 'emulation', got {backend!r}")
    nodes = manifest.get("nodes")
    if nodes not in NODE_MODES:
        raise UserError(f"{where}: nodes: expected one of {', '.join(NODE_MODES)}, got {nodes!r}")
    # The backend actually used, not 'auto': auto could pick another one on this machine.
    impair = manifest.get("impair")
    if impair not in ("netem", "relay"):
        impair = manifest.get("impair_requested") or "auto"  # the flat network records 'none'
    capture = manifest.get("capture")
    if capture is not None and not (isinstance(capture, list) and all(isinstance(c, str) for c in capture)):
        raise UserError(f"{where}: capture: expected a list of host names")
    limits = manifest.get("limits")
    if limits is not None and not (isinstance(limits, dict) and set(limits) <= {"cpus", "memory_mb"}):
        raise UserError(f"{where}: limits: expected {{cpus, memory_mb}}")
    event_loop = manifest.get("event_loop")
    if event_loop is not None and event_loop not in EVENT_LOOPS:
        raise UserError(f"{where}: event_loop: expected one of {', '.join(EVENT_LOOPS)}, got {event_loop!r}")
    servers = manifest.get("servers") or []
    if not (isinstance(servers, list) and all(isinstance(s, str) for s in servers)):
        raise UserError(f"{where}: servers: expected a list of server names")
    placed = manifest.get("placement") or {}
    how = placed.get("how", "regions") if isinstance(placed, dict) else "regions"
    return Replay(loaded, seed, "emulation", nodes=nodes, impair=impair, capture=capture, limits=limits,
                  event_loop=event_loop, servers=tuple(servers), placement=how)


def read_replay(original: RunDir) -> tuple[dict[str, Any], Replay]:
    """The original run's manifest, and how to repeat the run (one UserError line if it cannot be)."""
    manifest = original.read_manifest()
    return manifest, replay_from_manifest(manifest, str(original.manifest_path))


def replay_line(replay: Replay, original: RunDir) -> str:
    how = "simulator" if replay.backend == "sim" else f"emulation, --nodes {replay.nodes} --impair {replay.impair}"
    return (f"rerunning {replay.loaded.experiment.name} from {original.manifest_path} "
            f"(seed {replay.seed}, {how})")


def repeat(replay: Replay, original: RunDir, out: str | Path | None, progress: ProgressFn | None = None) -> RunOutcome:
    """Run it again into a new run directory whose manifest records which run it repeats."""
    if replay.backend == "emulation" and replay.impair == "netem" and is_root() and not has_netem():
        raise UserError(f"{original.manifest_path}: the run's links were impaired with netem, which this kernel "
                        f"lacks (no sch_netem); rerun it where netem exists")
    options = EmulationOptions(nodes=replay.nodes or "docker", impair=replay.impair or "auto",
                               capture=replay.capture, servers=replay.servers, placement=replay.placement)
    if replay.limits is not None:  # runs from before limits were recorded keep today's defaults
        options = replace(options, cpus=replay.limits.get("cpus"), memory_mb=replay.limits.get("memory_mb"))
    if replay.event_loop is not None:
        options = replace(options, event_loop=replay.event_loop)
    return run_experiment(replay.loaded, replay.backend, seed=replay.seed, out=out, options=options,
                          progress=progress, manifest_extra={"rerun_of": str(original.path.resolve())},
                          pcap=replay.pcap)


def environment_line(then: dict[str, Any], now: dict[str, Any]) -> str:
    found = differences(then, now)
    note = "" if "environment" in then else " (the original manifest records only git commit and versions)"
    if not found:
        return f"environment: the same as the original run's{note}"
    return f"environment differs from the original run's{note}: " + "; ".join(found)


def summary_line(original: RunDir, new: RunDir) -> str:
    try:
        then, now = original.read_summary(), new.read_summary()
    except (OSError, ValueError):
        return f"summary: {original} has no readable {original.summary_path.name} to compare with"
    for key in UNREPRODUCIBLE_SUMMARY_KEYS:
        then.pop(key, None)
        now.pop(key, None)
    changed = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
    if not changed:
        return "summary: identical to the original run's"
    return "summary differs from the original run's in: " + ", ".join(changed)
