"""`rmptwin rerun RUN_DIR`: repeat a run from its manifest.json alone.

The experiment and topology come from the manifest, where they are stored resolved with
every default filled, and not from the YAML files, which may have changed since. The
seed and the backend come from it too, and for an emulated run the node mode, the
impairment backend actually used and the captured hosts. The new run goes into a new run
directory. Then one line says where the environment differs from the original's, and one
whether the summary does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .errors import UserError
from .spec import Experiment, LoadedExperiment, Topology

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


def _first_error(key: str, err: ValidationError) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in (key, *first["loc"]))
    return f"{field}: {first['msg'].removeprefix('Value error, ')}"


def loaded_from_manifest(manifest: dict, where: str) -> LoadedExperiment:
    """The experiment and topology the manifest recorded, validated as a YAML file would be."""
    from .spec import _cross_check  # the same cross-references load_experiment checks

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
    _cross_check(Path(where), exp, topo)
    path = manifest.get("experiment_file")
    return LoadedExperiment(experiment=exp, topology=topo, path=Path(path if isinstance(path, str) else where))


def replay_from_manifest(manifest: dict, where: str) -> Replay:
    """The simulator's or the runtime runner's arguments for repeating the run."""
    loaded = loaded_from_manifest(manifest, where)
    seed = manifest.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise UserError(f"{where}: seed: missing or not an integer")
    backend = manifest.get("backend")
    if backend == "sim":
        return Replay(loaded, seed, "sim")
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
    return Replay(loaded, seed, "emulation", nodes=nodes, impair=impair, capture=capture)


def _emulate(replay: Replay, out: Path | None, console, where: str) -> Path:
    from .emulation.env import has_netem, is_root
    from .runtime import runner
    from .runtime.cli import _with_progress, print_summary

    if replay.impair == "netem" and is_root() and not has_netem():
        raise UserError(f"{where}: the run's links were impaired with netem, which this kernel lacks "
                        f"(no sch_netem); rerun it where netem exists")
    run_dir, summary = _with_progress(console, replay.loaded, replay.seed, out, replay.nodes, replay.impair,
                                      replay.capture, runner.run_experiment)
    print_summary(console, summary, run_dir)
    return run_dir


def _stamp_rerun_of(run: Path, original: Path) -> dict:
    """Record in the new manifest which run it repeats; returns the new manifest."""
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["rerun_of"] = str(original.resolve())
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def environment_line(then: dict, now: dict) -> str:
    from .provenance import differences

    found = differences(then, now)
    note = "" if "environment" in then else " (the original manifest records only git commit and versions)"
    if not found:
        return f"environment: the same as the original run's{note}"
    return f"environment differs from the original run's{note}: " + "; ".join(found)


def summary_line(original: Path, new: Path) -> str:
    try:
        then = json.loads((original / "summary.json").read_text())
        now = json.loads((new / "summary.json").read_text())
    except (OSError, ValueError):
        return f"summary: {original} has no readable summary.json to compare with"
    for key in UNREPRODUCIBLE_SUMMARY_KEYS:
        then.pop(key, None)
        now.pop(key, None)
    changed = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
    if not changed:
        return "summary: identical to the original run's"
    return "summary differs from the original run's in: " + ", ".join(changed)


def rerun_cli(run_dir: Path, out: Path | None, console) -> Path:
    """`rmptwin rerun`: read and check the manifest, repeat the run, print the comparisons."""
    from .results import read_manifest

    manifest = read_manifest(run_dir)
    where = str(run_dir / "manifest.json")
    replay = replay_from_manifest(manifest, where)
    how = "simulator" if replay.backend == "sim" else f"emulation, --nodes {replay.nodes} --impair {replay.impair}"
    console.print(f"rerunning {replay.loaded.experiment.name} from {where} (seed {replay.seed}, {how})",
                  highlight=False)
    if replay.backend == "sim":
        from .sim.runner import simulate_into_run_dir

        new = simulate_into_run_dir(replay.loaded, replay.seed, out, console)
    else:
        new = _emulate(replay, out, console, where)
    now = _stamp_rerun_of(new, run_dir)
    console.print(environment_line(manifest, now), highlight=False, soft_wrap=True)
    console.print(summary_line(run_dir, new), highlight=False, soft_wrap=True)
    return new
