"""The command line is a thin layer over ``rmptwin.api``: loading, simulating, running emulated,
rerunning, analysing, comparing and sweeping go through the API, and cli/ keeps what is for a
person (arguments, rich display, exit codes).

Read from the source with ast (lazy imports inside functions included): every name cli/
imports from a lower layer of rmptwin must be in ``MAY_IMPORT``, which says which cli files
may import it and why. The API's own territory (``rmptwin.runner.pipeline``, ``rmptwin.sweeps``,
the Spark job and session, ``rmptwin.analysis.compare``, ``spec.load_experiment`` and
``load_topology``) is in no entry, so a command that bypasses the API fails here; the layers
themselves are tests/unit/test_layers.py's.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import rmptwin

CLI = Path(rmptwin.__file__).resolve().parent / "cli"


class May(NamedTuple):
    module: str          # a module, or "pkg.*" for pkg and every module under it
    files: frozenset     # the cli files that may import it; empty: any
    names: frozenset     # the names they may take from it; empty: any
    why: str


def may(module: str, files: str, names: str, why: str) -> May:
    return May(module, frozenset(files.split()), frozenset(names.split()), why)


MAY_IMPORT = [
    may("rmptwin.api", "", "", "what the commands do"),
    may("rmptwin.errors", "", "UserError", "the one exception users see; main prints it as one line"),
    # display: what the commands print, computed from what the API returns
    may("rmptwin.analysis.sections", "display.py", "headline_sections", "which summary rows each application adds"),
    may("rmptwin", "display.py net.py", "corebuild", "which cores ran (compiled or interpreted), printed by `sim` and `env`"),
    may("rmptwin.core.groups", "display.py", "REGION_PORT REREQUEST_PORT", "the tshark hint under the captures"),
    may("rmptwin.runner.rerun", "main.py", "replay_line environment_line summary_line",
        "the lines `rerun` prints about the original run (the rerun itself is api.rerun)"),
    may("rmptwin.model", "bound_warnings.py net.py", "LoadedExperiment Topology read_yaml",
        "types; read_yaml: a warning's line number, and which kind of file `net` was given"),
    may("rmptwin.model", "main.py", "json_schemas", "`rmptwin schema` prints them"),
    may("rmptwin.model.bounds", "bound_warnings.py", "format_violation violated_bounds",
        "the seed-bound warnings `validate`, `sim` and `run` print"),
    may("rmptwin.model.role_checks", "bound_warnings.py", "Finding experiment_warnings topology_warnings",
        "the role warnings `validate`, `sim` and `run` print"),
    may("rmptwin.model.drain", "bound_warnings.py", "run_length_warnings workload_end_s",
        "the duration_vs_drain warning and how long a run lasts, which `validate`, `sim` and `run` print"),
    may("rmptwin.model.overrides", "bound_warnings.py", "make_points",
        "each point of a sweep, for the duration_vs_drain warning `sweep` prints before it runs"),
    may("rmptwin.model.loading", "bound_warnings.py", "finding_line", "a warning as file:line: field: problem"),
    may("rmptwin.model.overrides", "overrides.py", "time_dilation_value",
        "--tdf's value checked by the rule the API's time_dilation and --set time_dilation use"),
    may("rmptwin.planning.plan", "plan_commands.py", "HEADROOM LADDER describe",
        "the plan's one line and the limits it is held to, printed as the planner words them"),
    # commands the API has no equivalent of
    may("rmptwin.analysis", "spark_commands.py", "cluster", "`spark up/down/status`: a standalone cluster"),
    may("rmptwin.analysis.taxonomy_report", "taxonomy_commands.py", "", "`taxonomy compare`'s report"),
    may("rmptwin.checkers.*", "check.py", "", "`check`: the history checkers on a run"),
    may("rmptwin.chaos.*", "chaos_commands.py", "", "`chaos`: fault campaigns"),
    may("rmptwin.claims.*", "claims.py", "", "`claims`: the seeds' claims"),
    may("rmptwin.emulation.*", "net.py", "", "`net`, `image`, `env`: the emulated network itself"),
    may("rmptwin.factories.keys", "keys_commands.py", "", "`keys gen`"),
    may("rmptwin.rundir.run", "check.py taxonomy_commands.py venue_commands.py", "RunDir",
        "`check`, `taxonomy measure`, `venue timeline` read a run directory"),
    may("rmptwin.model.traces", "topo_commands.py", "read_trace", "`trace fit`"),
    may("rmptwin.studies.*", "taxonomy_commands.py topo_commands.py venue_commands.py", "", "`taxonomy`, `campaign twin`, `venue`"),
    may("rmptwin.topotools.*", "topo_commands.py", "", "`topo gen`, `topo import`, `trace fit`"),
]


def imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every rmptwin import in a cli file; name "*" for ``import m``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, "*") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:   # relative: from the package rmptwin.cli
                base = ["rmptwin", "cli"][:3 - node.level]
                module = ".".join(base + ([module] if module else []))
            found += [(node.lineno, module, a.name) for a in node.names]
    return sorted((line, m, n) for line, m, n in found if m.split(".")[0] == "rmptwin")


def allowed(file: str, module: str, name: str) -> May | None:
    if module == "rmptwin.cli" or module.startswith("rmptwin.cli."):
        return May(module, frozenset(), frozenset(), "cli itself")
    if module == "rmptwin" and name == "api":
        module, name = "rmptwin.api", "*"
    for m in MAY_IMPORT:
        package = m.module.removesuffix(".*") if m.module.endswith(".*") else None
        here = m.module == module or (package is not None and (module == package or module.startswith(package + ".")))
        if here and (not m.files or file in m.files) and (not m.names or name in m.names):
            return m
    return None


def bypasses(cli: Path) -> tuple[list[str], set[May]]:
    bad, used = [], set()
    for path in sorted(cli.glob("*.py")):
        for line, module, name in imports(path):
            m = allowed(path.name, module, name)
            if m is None:
                bad.append(f"cli/{path.name}:{line}: {module}.{name}")
            else:
                used.add(m)
    return bad, used


def test_the_command_line_goes_through_the_api():
    bad, _ = bypasses(CLI)
    assert bad == [], ("cli/ imports what rmptwin.api should give it (call the API, extending it where it "
                       "lacks something), or add the import to MAY_IMPORT with the reason:\n" + "\n".join(bad))


def test_every_allowance_is_used():
    """An entry no import needs any more goes, so the list stays what cli/ really imports."""
    _, used = bypasses(CLI)
    assert [m for m in MAY_IMPORT if m not in used] == []


def test_the_check_sees_a_bypass(tmp_path):
    """A command calling the runner, the sweep engine or the loader itself, lazily or not, fails."""
    (tmp_path / "run_commands.py").write_text("from rmptwin.runner.pipeline import run_experiment\n"
                                     "from rmptwin import api\n"
                                     "def f():\n    from rmptwin.sweeps.sweep_loop import run_sweep\n"
                                     "from rmptwin.model import load_experiment, read_yaml\n")
    bad, _ = bypasses(tmp_path)
    assert bad == ["cli/run_commands.py:1: rmptwin.runner.pipeline.run_experiment", "cli/run_commands.py:4: rmptwin.sweeps.sweep_loop.run_sweep",
                   "cli/run_commands.py:5: rmptwin.model.load_experiment", "cli/run_commands.py:5: rmptwin.model.read_yaml"]
