"""What a node process needs to know, as one JSON file in the run directory.

The resolved experiment and topology travel inside it (not as paths), so a node in a
container sees exactly the spec the runner loaded, wherever the YAML files live. Keys do
not: a secure experiment's key file stays outside the run directory and only its absolute
path (``keys_file``) travels, for the node to read (``rmptwin.factories.keys``; the runner mounts it
read-only into Docker nodes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmptwin.factories.keys import key_path
from rmptwin.model import Experiment, LoadedExperiment, Topology
from rmptwin.node import event_loop as event_loops


@dataclass
class NodeConfig:
    experiment: dict[str, Any]
    topology: dict[str, Any]
    experiment_file: str
    seed: int
    hosts: dict[str, str]          # host name -> IP
    log_dir: str
    t0_ns: int | None = None       # None: wait for "GO <t0>" on stdin
    state_dir: str | None = None   # the venue roles' durable stores (RunDir.venue_state_dir)
    keys_file: str | None = None   # security on: the key file (outside the run directory)
    access_in_node: list[str] | None = None   # hosts whose node shapes its own access link (hostlink)
    # What a node names its own files in log_dir: kind -> a pattern of {host} and {incarnation}.
    # The run directory's owner gives them (``rundir.run.NODE_FILES``); a node never spells one.
    node_files: dict[str, str] | None = None
    event_loop: str = event_loops.DEFAULT   # node.event_loop: uvloop, or asyncio (the stdlib's)

    @classmethod
    def for_run(cls, loaded: LoadedExperiment, seed: int, hosts: dict[str, str], log_dir: Path,
                node_files: dict[str, str], t0_ns: int | None = None, state_dir: Path | None = None,
                access_in_node: Iterable[str] | None = None,
                event_loop: str = event_loops.DEFAULT) -> NodeConfig:
        """``state_dir`` defaults to ``log_dir`` (a test's one scratch directory)."""
        m = loaded.to_manifest()
        keys = str(key_path(loaded)) if loaded.experiment.security.enabled else None
        return cls(m["experiment"], m["topology"], m["experiment_file"], seed, dict(hosts), str(log_dir), t0_ns,
                   str(state_dir or log_dir), keys, sorted(access_in_node or []), dict(node_files), event_loop)

    def node_file(self, kind: str, host: str, incarnation: int) -> Path:
        """Where the node ``host`` (its ``incarnation``-th start) writes its file of ``kind``
        (``events``: its event log; ``access_link``: its access link's counts and drops)."""
        pattern = (self.node_files or {}).get(kind)
        if pattern is None:
            raise KeyError(f"the node config names no {kind!r} file (node_files)")
        return Path(self.log_dir) / pattern.format(host=host, incarnation=incarnation)

    def loaded(self) -> LoadedExperiment:
        exp = Experiment.model_validate(self.experiment)
        if self.keys_file is not None:   # resolved by the runner: the node's HOME is not the runner's
            exp = exp.model_copy(update={"security": exp.security.model_copy(update={"keys": self.keys_file})})
        return LoadedExperiment(experiment=exp, topology=Topology.model_validate(self.topology),
                                path=Path(self.experiment_file))

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=1))
        return path

    @classmethod
    def read(cls, path: str | Path) -> NodeConfig:
        return cls(**json.loads(Path(path).read_text()))
