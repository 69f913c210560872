"""The compiled and the interpreted cores give the same results (issue 23, rmptwin.corebuild).

- Wherever the cores can be compiled (a C compiler, the Python headers, mypyc), the build in
  build/compiled is there and matches the sources (make test builds it first).
- Every shipped experiment the simulator runs (experiments/*.yaml, experiments/taxonomy/),
  simulated once per build in two child processes: summary.json byte for byte, and the
  event, drop and link-count tables, are equal. The four longest are cut short (``CAP_S``).
- The cores' property tests (hypothesis) run in the other build too: this session runs them
  with the build it has, a child pytest with the other one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmptwin import corebuild
from rmptwin.factories.keys import generate, key_path, write_keys
from rmptwin.model import load_experiment

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((REPO / "experiments").glob("*.yaml")) + sorted((REPO / "experiments" / "taxonomy").glob("*.yaml"))
# Simulated seconds kept of the longest runs (interpreted, whole, on 2 busy CPUs: 68 s, 12 s,
# 44 s and 86 s of wall time); venue-failover keeps its crash (2 s) and recovery (3.5 s).
CAP_S = {"binary-tree-loss": 3.0, "quickstart-1000": 3.0, "venue-failover": 4.0, "venue-gap": 1.5}
TABLES = ("events/events.parquet", "links/drops.parquet", "links/counts.parquet")
# The cores' property tests, and the whole-packet customer check that only an interpreted
# build can run (it subclasses CustomerCore in Python).
PROPERTY_TESTS = [
    "tests/unit/test_rmp_properties.py", "tests/unit/test_wire.py", "tests/unit/test_moldudp64.py",
    "tests/unit/test_fuzz_frames.py", "tests/unit/test_linkmodel.py", "tests/unit/test_customer.py",
    "tests/unit/test_customer_whole_packets.py", "tests/unit/test_feed_watch.py", "tests/unit/test_striping.py",
    "tests/unit/test_rmp_ring.py", "tests/unit/test_taxonomy_codec.py", "tests/unit/test_trading_floor_rules.py",
    "tests/unit/test_unified_orders_cores.py", "tests/unit/test_frame_names.py", "tests/venue/test_orderbook.py",
    "tests/unit/test_wire_vectors.py", "tests/unit/test_secondary_ring_skip.py",
]

RUNNER = """
import json, sys
from pathlib import Path
from rmptwin import corebuild
from rmptwin.cli.overrides import apply_set_options
from rmptwin.errors import UserError
from rmptwin.runner.pipeline import run_experiment
from rmptwin.model import load_experiment
out, cases = Path(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"cores": corebuild.ACTIVE.kind}), flush=True)
for name, path, cap in cases:
    loaded = load_experiment(Path(path))
    if cap is not None and loaded.duration_s > cap:
        loaded = apply_set_options(loaded, [f"duration_s={cap}"])
    try:
        run_experiment(loaded, "sim", out=out / name)
        print(json.dumps({"name": name, "ran": True}), flush=True)
    except UserError as e:
        print(json.dumps({"name": name, "ran": False, "why": str(e)}), flush=True)
"""


def compiler_missing() -> str | None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from build_compiled import missing_tools
    finally:
        sys.path.pop(0)
    return missing_tools()


def other_build_env() -> dict[str, str]:
    """The environment of a child running the build this session does not."""
    env = {k: v for k, v in os.environ.items() if k != corebuild.PURE_ENV}
    if corebuild.ACTIVE.compiled:
        env[corebuild.PURE_ENV] = "1"
    return env


def require_both_builds() -> None:
    build, _ = corebuild.check()
    if not build.compiled:
        pytest.skip(f"no compiled build to compare with: {build.why}")


def test_the_compiled_build_is_there_wherever_it_can_be_built():
    why_not = compiler_missing()
    if why_not:
        pytest.skip(f"this machine cannot compile the cores: {why_not}")
    build, _ = corebuild.check()
    assert build.compiled, f"{build.why}: run make compiled (make test does)"


@pytest.fixture(scope="module")
def twin_runs(tmp_path_factory) -> dict[str, Path]:
    """Every experiment simulated by each build (two children in parallel): build -> run dirs."""
    require_both_builds()
    base = tmp_path_factory.mktemp("builds")
    keys_home = base / "config"   # the secure experiments' key files, the same for both
    env = {**os.environ, "XDG_CONFIG_HOME": str(keys_home)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(keys_home))
        for path in EXPERIMENTS:
            loaded = load_experiment(path)
            if loaded.experiment.security.enabled:
                write_keys(generate(loaded), key_path(loaded))
    cases = json.dumps([(p.stem, str(p), CAP_S.get(p.stem)) for p in EXPERIMENTS])
    children = {}
    for kind, pure in ((corebuild.COMPILED, False), (corebuild.INTERPRETED, True)):
        child_env = {k: v for k, v in env.items() if k != corebuild.PURE_ENV}
        if pure:
            child_env[corebuild.PURE_ENV] = "1"
        children[kind] = subprocess.Popen([sys.executable, "-c", RUNNER, str(base / kind), cases], cwd=REPO,
                                          env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for kind, child in children.items():
        out, err = child.communicate(timeout=900)
        assert child.returncode == 0, f"{kind} child failed:\n{err[-3000:]}"
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert lines[0] == {"cores": kind}, f"the {kind} child ran {lines[0]}"
        not_run = [f"{r['name']}: {r['why']}" for r in lines[1:] if not r["ran"]]
        assert not not_run, "experiments the simulator refused:\n" + "\n".join(not_run)
    return {kind: base / kind for kind in children}


@pytest.mark.parametrize("experiment", [p.stem for p in EXPERIMENTS])
def test_both_builds_simulate_an_experiment_alike(twin_runs, experiment):
    compiled, interpreted = (twin_runs[k] / experiment for k in (corebuild.COMPILED, corebuild.INTERPRETED))
    assert (compiled / "summary.json").read_bytes() == (interpreted / "summary.json").read_bytes()
    for table in TABLES:
        a, b = pq.read_table(compiled / table), pq.read_table(interpreted / table)
        assert a.num_rows == b.num_rows and a.equals(b), f"{table} differs"


def test_the_property_tests_pass_in_the_other_build():
    require_both_builds()
    env = other_build_env()
    other = corebuild.INTERPRETED if corebuild.ACTIVE.compiled else corebuild.COMPILED
    probe = subprocess.run([sys.executable, "-c", "import rmptwin; print(rmptwin.corebuild.ACTIVE.kind)"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == other, probe.stdout + probe.stderr
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *PROPERTY_TESTS],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, f"{other} build:\n" + r.stdout[-4000:] + r.stderr[-2000:]
