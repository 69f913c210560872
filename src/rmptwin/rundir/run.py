"""The run directory, results/<experiment>/<run-id>/, the same for every backend: the one
place that names its files and writes them.

    manifest.json      resolved spec, seed, backend, environment (rmptwin.rundir.provenance), git commit
    events/*.parquet   one row per protocol event (tables.EVENT_SCHEMA)
    links/drops.parquet, links/counts.parquet   ground-truth drops and packet counts per link
    summary.json       headline figures (rmptwin.analysis.summary)
    pcaps/             packet captures, one per host: tcpdump's (emulation), or the simulator's (`sim --pcap`)
    nodes/             what the emulated nodes need and leave: their config, logs, stderr, venue state
    analysis/          written by `rmptwin analyze`: metrics.json, report.html, tables, plots

Every other module asks a ``RunDir`` for a path or to read or write a file;
tests/unit/test_rundir.py fails if another module under src/ spells one of these names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rmptwin.errors import UserError
from rmptwin.model import Protocol, Topology
from rmptwin.rundir import provenance

# The names, spelled here and nowhere else.
MANIFEST = "manifest.json"
SUMMARY = "summary.json"
EVENTS = "events"
LINKS = "links"
DROPS = "drops.parquet"
COUNTS = "counts.parquet"
PCAPS = "pcaps"
NODES = "nodes"
ANALYSIS = "analysis"
METRICS = "metrics.json"
# A node's own files in nodes/, which the node names from these patterns (node.node_config's
# NodeConfig.node_files): its event log and what its self-shaped access link counted and dropped.
EVENT_LOG_SUFFIX = ".jsonl"
ACCESS_LINK_SUFFIX = ".access-link.json"
NODE_FILES = {"events": "{host}.{incarnation}" + EVENT_LOG_SUFFIX,
              "access_link": "{host}.{incarnation}" + ACCESS_LINK_SUFFIX}
REPORT = "report.html"


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def derived_timers(experiment: dict[str, Any] | None) -> dict[str, Any] | None:
    """tau_t, tau_r, Delta_A and the null-token interval as this code computed them where the
    experiment left them to the seed's formulas, so a reader of the manifest sees the numbers."""
    try:
        p = Protocol.model_validate((experiment or {}).get("protocol") or {})
    except ValueError:
        return None
    return {"tau_t_ms": p.tau_t, "tau_r_ms": p.tau_r, "delta_a_ms": p.delta_a, "null_token_ms": p.null_token}


class RunDir:
    """One run directory. ``RunDir(path)`` names an existing one (nothing is checked until a
    file is read); ``RunDir.create`` makes a new, empty one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    @classmethod
    def create(cls, experiment: str, out: str | Path | None = None, base: str | Path = "results") -> RunDir:
        """``out`` if given, else results/<experiment>/<UTC timestamp> (with -2, -3, ... after it
        where a run of the same second has it); created, must be empty."""
        if out:
            path = Path(out)
        else:
            stamp = Path(base) / experiment / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            path, n = stamp, 1
            while path.exists() and any(path.iterdir()):
                n += 1
                path = stamp.with_name(f"{stamp.name}-{n}")
        if path.exists() and any(path.iterdir()):
            raise UserError(f"{path}: run directory exists and is not empty; choose another --out")
        run = cls(path)
        run.events_dir.mkdir(parents=True, exist_ok=True)
        run.links_dir.mkdir(parents=True, exist_ok=True)
        return run

    def remove_if_empty(self) -> None:
        """Undo ``create`` when the run failed before writing anything: every directory in it
        that holds no file (events/, links/, an emulated run's nodes/ and pcaps/), and then the
        run directory itself if nothing is left. A file is never removed."""
        if not self.path.is_dir():
            return
        for sub in sorted((p for p in self.path.rglob("*") if p.is_dir() and not p.is_symlink()),
                          key=lambda p: len(p.parts), reverse=True):
            if not any(sub.iterdir()):
                sub.rmdir()
        if not any(self.path.iterdir()):
            self.path.rmdir()

    # ------------------------------------------------------------------ paths

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY

    @property
    def events_dir(self) -> Path:
        return self.path / EVENTS

    def events_path(self, name: str = "events") -> Path:
        return self.events_dir / f"{name}.parquet"

    def event_files(self) -> list[Path]:
        return sorted(self.events_dir.glob("*.parquet"))

    @property
    def links_dir(self) -> Path:
        return self.path / LINKS

    @property
    def drops_path(self) -> Path:
        return self.links_dir / DROPS

    @property
    def counts_path(self) -> Path:
        return self.links_dir / COUNTS

    @property
    def pcaps_dir(self) -> Path:
        return self.path / PCAPS

    def pcap_path(self, host: str) -> Path:
        return self.pcaps_dir / f"{host}.pcap"

    def pcap_files(self) -> list[Path]:
        return sorted(self.pcaps_dir.glob("*.pcap"))

    def append_pcap(self, host: str, data: bytes) -> None:
        """Add ``data`` to ``host``'s capture (made, with pcaps/, by the first call): the
        simulator writes its captures in pieces as the run goes (``sim.pcap.HostCaptures``)."""
        self.pcaps_dir.mkdir(parents=True, exist_ok=True)
        with self.pcap_path(host).open("ab") as f:
            f.write(data)

    def remove_pcaps(self) -> None:
        """Undo ``append_pcap`` when the run failed: a capture of half a run is no capture."""
        for p in self.pcap_files():
            p.unlink()
        if self.pcaps_dir.is_dir() and not any(self.pcaps_dir.iterdir()):
            self.pcaps_dir.rmdir()

    @property
    def analysis_dir(self) -> Path:
        return self.path / ANALYSIS

    def analysis_path(self, name: str) -> Path:
        """A file of the analysis (a table, a plot, a comparison) inside analysis/."""
        return self.analysis_dir / name

    @property
    def metrics_path(self) -> Path:
        return self.analysis_dir / METRICS

    @property
    def report_path(self) -> Path:
        return self.analysis_dir / REPORT

    # ------------------------------------------------------------------ emulated nodes

    @property
    def nodes_dir(self) -> Path:
        """Where the emulated nodes' config, event logs and stderr go (their log_dir)."""
        return self.path / NODES

    def node_config_path(self, host: str | None = None, incarnation: int = 0) -> Path:
        """The config every node starts from, or the one a recovered ``host`` restarts from."""
        name = "config.json" if host is None else f"config.{host}.{incarnation}.json"
        return self.nodes_dir / name

    def node_stderr_path(self, host: str, incarnation: int) -> Path:
        return self.nodes_dir / f"{host}.{incarnation}.stderr"

    @property
    def runner_log_path(self) -> Path:
        """The runner's own event log (faults it applied), merged with the nodes' logs."""
        return self.nodes_dir / ("runner" + EVENT_LOG_SUFFIX)

    def node_event_logs(self) -> list[Path]:
        """Every node's event log and the runner's, to merge."""
        return sorted(self.nodes_dir.glob("*" + EVENT_LOG_SUFFIX))

    def access_link_reports(self) -> list[Path]:
        """Counts and drops of the access links the nodes shaped themselves (``node.hostlink``)."""
        return sorted(self.nodes_dir.glob("*" + ACCESS_LINK_SUFFIX))

    @property
    def venue_state_dir(self) -> Path:
        """Durable venue state (gateway log, history database) of the emulated venue roles."""
        return self.nodes_dir / "venue-state"

    def make_node_dirs(self) -> None:
        """nodes/ and pcaps/, before the emulated nodes start."""
        self.nodes_dir.mkdir(parents=True, exist_ok=True)
        self.pcaps_dir.mkdir(exist_ok=True)

    # ------------------------------------------------------------------ manifest

    def write_manifest(self, manifest: dict[str, Any], backend: str, seed: int,
                       emulation: dict[str, Any] | None = None) -> dict[str, Any]:
        """``manifest`` (the resolved spec, ``LoadedExperiment.to_manifest()``, plus backend extras)
        with the seed, the timers the protocol derives from it, and where the run ran
        (``rmptwin.rundir.provenance``; ``emulation`` is ``emulation.run_facts.emulation_facts`` for an emulated
        run). Returns what was written."""
        full = {
            **manifest,
            "backend": backend,
            "seed": seed,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **provenance.collect(emulation),
        }
        derived = derived_timers(manifest.get("experiment"))
        if derived:
            full["protocol_derived"] = derived
        self.replace_manifest(full)
        return full

    def replace_manifest(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest`` as it is (a synthetic run; a manifest amended after the run)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.manifest_path.write_text(_dump(manifest))

    def read_manifest(self) -> dict[str, Any]:
        """manifest.json as a dict, or one UserError line saying what is wrong."""
        run, path = self.path, self.manifest_path
        if not run.exists():
            raise UserError(f"{run}: no such run directory")
        if not run.is_dir():
            raise UserError(f"{run}: not a directory (expected a run directory with {MANIFEST})")
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"{run}: no {MANIFEST} (is this a run directory?)") from None
        except OSError as e:
            raise UserError(f"{path}: cannot read ({e.strerror})") from None
        except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
            raise UserError(f"{path}: not valid JSON ({str(e).splitlines()[0]})") from None
        if not isinstance(data, dict):
            raise UserError(f"{path}: expected a JSON object at the top level")
        return data

    def check(self) -> tuple[dict[str, Any], Topology, list[Path]]:
        """The manifest, the topology it records and the event files of a finished run (what
        the analysis reads), or one UserError line saying what is missing."""
        if not self.path.is_dir():
            raise UserError(f"{self.path}: no such run directory")
        manifest = self.read_manifest()
        if "topology" not in manifest:
            raise UserError(f"{self.manifest_path}: no resolved topology (was it written by rmptwin?)")
        try:
            topo = Topology.model_validate(manifest["topology"])
        except Exception as e:  # pydantic ValidationError: the manifest was edited or is from elsewhere
            raise UserError(f"{self.manifest_path}: topology is not valid ({str(e).splitlines()[0]})") from None
        files = self.event_files()
        if not files:
            raise UserError(f"{self.path}: no {EVENTS}/*.parquet (is this a run directory?)")
        return manifest, topo, files

    # ------------------------------------------------------------------ tables

    @staticmethod
    def _write_table(path: Path, table: pa.Table) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        return path

    def write_events(self, table: pa.Table, name: str = "events") -> Path:
        return self._write_table(self.events_path(name), table)

    def write_drops(self, table: pa.Table) -> Path:
        return self._write_table(self.drops_path, table)

    def write_link_counts(self, table: pa.Table) -> Path:
        return self._write_table(self.counts_path, table)

    def read_events(self) -> pa.Table:
        files = self.event_files()
        if not files:
            raise UserError(f"{self.path}: no {EVENTS}/*.parquet (is this a run directory?)")
        return pa.concat_tables([pq.read_table(f) for f in files])

    def event_count(self) -> int:
        """Rows in the event files, from their metadata (nothing is read)."""
        return sum(pq.read_metadata(f).num_rows for f in self.event_files())

    def read_drops(self) -> pa.Table:
        return pq.read_table(self.drops_path)

    def read_link_counts(self) -> pa.Table:
        return pq.read_table(self.counts_path)

    # ------------------------------------------------------------------ summary and analysis

    def write_summary(self, summary: dict[str, Any]) -> None:
        self.summary_path.write_text(_dump(summary))

    def read_summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = json.loads(self.summary_path.read_text())
        return summary

    def write_analysis_table(self, name: str, table: pa.Table) -> Path:
        return self._write_table(self.analysis_path(f"{name}.parquet"), table)

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        self.analysis_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path.write_text(json.dumps(metrics, indent=2, sort_keys=True, default=str) + "\n")

    def read_metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = json.loads(self.metrics_path.read_text())
        return metrics

    def write_report(self, page: str) -> Path:
        self.analysis_dir.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(page)
        return self.report_path
