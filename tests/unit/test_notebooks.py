"""The notebooks in notebooks/ run headless from top to bottom (nbclient) and show what they
say: no cell raises, each draws its figures, and its key figures are in a sane range.

The kernel is this interpreter (a kernelspec written into a temporary JUPYTER_PATH runs
``sys.executable``, so whatever ``python3`` resolves to does not matter) with this checkout's
src/ first on its path. Each notebook writes its runs into a temporary directory
($RMPTWIN_NOTEBOOK_OUT), never into the clone. The figures are read by a cell the test
appends, which prints the notebook's variables as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
KERNEL = "rmptwin-notebook-test"
CHECK_MARK = "RMPTWIN-NOTEBOOK-CHECK "

# Per notebook: the expression the appended cell prints (a dict of figures).
PROBES = {
    "01-quickstart-tour.ipynb": """{
        "agreement": s["agreement"], "lost": s["messages_lost"],
        "latency_median_ms": float(rel.latency_ms.median()), "summary_p50_ms": s["delivery_latency_ms"]["p50"],
        "delta_a_ms": delta_a, "spread_max_ms": float(spread.max()),
        "tradeoff": {str(k): v for k, v in tradeoff.to_dict("index").items()}}""",
    "02-loss-correlation-and-minc.ipynb": """{
        "lost": run.summary["messages_lost"], "links": len(m),
        "max_error_vs_truth": float((m.estimate - m.truth).abs().max()),
        "max_error_vs_configured": float((m.estimate - m.configured).abs().max()),
        "p_rp2": float(p_b), "p_rp2_given_rp1": float(p_b_given_a),
        "sweep": [{"loss": float(k), "s1s2": float(v["s1>s2"]), "s2s4": float(v["s2>s4"])}
                  for k, v in by_loss.to_dict("index").items()], "sweep_rows": len(sw.table)}""",
    "03-sim-vs-emulation.ipynb": """{
        "loaded": loaded_line, "sim_seed": sim.manifest["seed"], "emu_seed": emu.manifest["seed"],
        "sim_backend": sim.manifest["backend"], "passed": comparison.passed,
        "rules": comparison.rules.to_dict("records"), "pairs": len(pairs)}""",
}


def kernelspec(tmp: Path) -> Path:
    """A JUPYTER_PATH directory with a kernelspec that runs this interpreter."""
    spec = tmp / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "rmptwin (tests)", "language": "python"}))
    return tmp / "jupyter"


def repo_files() -> set[Path]:
    return {p for p in NOTEBOOKS.rglob("*") if p.is_file()}


def run_notebook(name: str, tmp_path: Path, monkeypatch) -> tuple[dict, dict, float]:
    """Execute notebooks/NAME with the probe cell appended: (the notebook, the probe's figures, seconds)."""
    monkeypatch.setenv("JUPYTER_PATH", str(kernelspec(tmp_path)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("RMPTWIN_NOTEBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"import json as _json\nprint({CHECK_MARK!r} + _json.dumps({PROBES[name]}, "
                                              "default=str))"))
    before = repo_files()
    t0 = time.perf_counter()
    client = nbclient.NotebookClient(nb, kernel_name=KERNEL, timeout=300,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    took = time.perf_counter() - t0
    assert repo_files() == before, f"{name} wrote into the clone: {sorted(repo_files() - before)}"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    line = next(x for x in printed.splitlines() if x.startswith(CHECK_MARK))
    print(f"{name}: {took:.1f} s")
    return nb, json.loads(line[len(CHECK_MARK):]), took


def figures(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.output_type == "stream")


def test_the_notebooks_are_stored_without_outputs():
    """Clean diffs: outputs come from running them (here, or in Jupyter), not from git."""
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == sorted(PROBES)
    for name in names:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells
                   if c.cell_type == "code"), name
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), name


def test_quickstart_tour(tmp_path, monkeypatch):
    nb, f, _ = run_notebook("01-quickstart-tour.ipynb", tmp_path, monkeypatch)
    assert figures(nb) >= 2
    assert f["agreement"] is True and f["lost"] == 0
    # releases come Delta_A after the acknowledgement: the median latency is Delta_A plus at most a second
    assert f["delta_a_ms"] < f["latency_median_ms"] < f["delta_a_ms"] + 1000
    assert f["latency_median_ms"] == pytest.approx(f["summary_p50_ms"])
    assert f["spread_max_ms"] == 0
    t = f["tradeoff"]
    assert t["200"]["spread_max_ms"] > 0 and t["1500"]["spread_max_ms"] == 0
    assert t["200"]["latency_p50_ms"] < t["800"]["latency_p50_ms"] < t["1500"]["latency_p50_ms"]


def test_loss_correlation_and_minc(tmp_path, monkeypatch):
    nb, f, _ = run_notebook("02-loss-correlation-and-minc.ipynb", tmp_path, monkeypatch)
    assert figures(nb) >= 3
    assert f["lost"] == 0 and f["links"] == 15
    assert f["max_error_vs_truth"] <= 0.01          # what labs/loss-minc checks
    assert f["max_error_vs_configured"] <= 0.03
    assert f["p_rp2_given_rp1"] > 3 * f["p_rp2"]     # siblings share the links above them
    assert f["sweep_rows"] == 6
    sweep = sorted(f["sweep"], key=lambda r: r["loss"])
    assert [r["loss"] for r in sweep] == [0.0, 0.05, 0.1]
    assert sweep[0]["s1s2"] < 0.01 and abs(sweep[-1]["s1s2"] - 0.1) < 0.03
    # the loss added above s2 stays on s1-s2: the link below keeps its 3 %
    assert all(abs(r["s2s4"] - 0.03) < 0.02 for r in sweep)


def test_sim_vs_emulation(tmp_path, monkeypatch):
    if not (NOTEBOOKS / "data" / "line3-emulated").exists():
        pytest.fail("notebooks/data/line3-emulated is missing: the shipped emulated run notebook 03 loads")
    nb, f, _ = run_notebook("03-sim-vs-emulation.ipynb", tmp_path, monkeypatch)
    assert figures(nb) >= 2
    assert f["loaded"] in stdout(nb) and len(f["loaded"].splitlines()) == 1
    assert f["sim_backend"] == "sim" and f["sim_seed"] == f["emu_seed"]
    metrics = {r["metric"] for r in f["rules"]}
    assert {"agreement", "messages_lost", "first_copy_loss_per_link"} <= metrics
    assert f["passed"] == all(r["status"] != "fail" for r in f["rules"])
    assert f["pairs"] > 0
