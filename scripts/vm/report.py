"""`make test-vm`'s closing table (scripts/vm/test-vm.sh hands it everything in the
environment): per part what the guest measured, the wall seconds of each VM step, and one
line saying whether every part passed; exit 1 naming the part and VM step that failed."""

from __future__ import annotations

import json
import os
import sys

e = os.environ


def line(name: str) -> dict:
    raw = e.get(name, "")
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {}


def say(text: str) -> None:
    print(f"[test-vm] {text}")


def selftest(r: dict) -> bool:
    rep = r.get("report") or {}
    checks = rep.get("checks", [])
    say(f"selftest: kernel {r.get('kernel')}, TDF {r.get('tdf', 0):g}, {r.get('count')} probes, "
        f"{r.get('bw_count')} bandwidth probes, backend {rep.get('backend')}")
    for c in checks:
        def f(v: float, q: str = c["quantity"]) -> str:
            return f"{v * 100:.2f} %" if q == "loss" else f"{v:.2f}"
        say(f"  {c['link']:<10} {c['quantity']:<22} configured {f(c['configured']):>9}  "
            f"measured {f(c['measured']):>9}  wall {f(c['wall']):>9}  {c['tolerance']:<12} "
            f"{'ok' if c['ok'] else 'OUT OF TOLERANCE'}")
    ok = r.get("rc") == 0 and rep.get("backend") == "netem" and bool(checks) and all(c["ok"] for c in checks)
    if not ok:
        say(f"  selftest FAILED: exit {r.get('rc')}, backend {rep.get('backend')}, "
            f"{sum(not c['ok'] for c in checks)} of {len(checks)} checks out of tolerance")
    return ok


def pytest(r: dict) -> bool:
    n, bad, skipped = r.get("tests", 0), r.get("failures", 0) + r.get("errors", 0), r.get("skipped", 0)
    say(f"pytest: {', '.join(r.get('paths') or [])}: {n} tests, {n - bad - skipped} passed, {bad} failed, "
        f"{skipped} skipped, {r.get('pytest_s')} s in the guest")
    for name in r.get("failed_names", []):
        say(f"  failed: {name}")
    # Never nothing against nothing: a part that ran no test did not pass.
    return r.get("rc") == 0 and n > 0 and bad == 0


def experiment(r: dict) -> bool:
    s = r.get("summary") or {}
    say(f"experiment: {r.get('experiment')} at TDF {r.get('tdf')}, exit {r.get('rc')}, "
        f"{r.get('run_s')} s in the guest, run directory {e.get('VMRUN') or 'not brought back'}")
    rt = s.get("runtime") or {}
    cust = s.get("customers") or {}
    say(f"  agreement {s.get('agreement')}, {s.get('messages_lost')} lost of {s.get('messages_sent')}, "
        f"customers {cust.get('guaranteed_complete', '?')}/{cust.get('guaranteed', '?')} guaranteed complete, "
        f"overloaded {rt.get('overloaded')}, drain {rt.get('drain_s')} s, wall {rt.get('wall_s')} s")
    verdict = e.get("VERDICT_RC", "")
    if verdict != "":
        say(f"  twin verdict against the simulator: {'PASS' if verdict == '0' else 'FAIL'}")
        for text in failed_rules(e.get("COMPARE_LOG", "")):
            say(f"    {text}")
    return r.get("rc") == 0 and bool(e.get("VMRUN")) and verdict == "0"


def failed_rules(log: str) -> list[str]:
    """The compare log's lines naming each failed rule (analysis.compare.failed_lines), so the
    closing table, which is all a CI log's tail shows, says which rule failed and by how much."""
    try:
        with open(log, encoding="utf-8") as f:
            return [ln.strip() for ln in f if ln.startswith("failed: ")]
    except OSError:
        return []


def step_seconds() -> list[tuple[str, str]]:
    at = dict(kv.split("=", 1) for kv in e.get("AT_STEPS", "").split())
    marks = [(k, float(v)) for k, v in at.items() if v]
    ends = [t for _, t in marks[1:]] + [float(e["T_LINE"])]
    rows = [("checkout disk", e["DISK_S"]), ("boot (to mount)", e["BOOT_S"])]
    rows += [(k, f"{end - t:.1f}") for (k, t), end in zip(marks, ends)]
    rows += [("power off", e["OFF_S"]), ("twin verdict (host)", e["JUDGE_S"]), ("whole", e["TOTAL_S"])]
    return rows


def main() -> int:
    parts = e["PARTS"].split(",")
    judges = {"selftest": (selftest, "SELFTEST"), "pytest": (pytest, "PYTEST"), "experiment": (experiment, "EXPERIMENT_LINE")}
    say(f"accelerator {e['VM_ACCEL']}")
    failed = []
    for p in parts:
        fn, var = judges[p]
        r = line(var)
        if not r:
            say(f"{p}: no result line from the guest")
            failed.append(p)
        elif not fn(r):
            failed.append(p)
    say("wall seconds per step:")
    for k, v in step_seconds():
        say(f"  {k:<20} {v:>7}")
    if failed:
        say(f"FAILED in the VM part(s) {', '.join(failed)} (console: build/vm/test-console.log)")
        return 1
    say("ok: " + ", ".join(parts) + " passed on netem links and the kernel datapath in the VM")
    return 0


sys.exit(main())
