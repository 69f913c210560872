"""What a run ran on, for manifest.json: code, packages, tools, machine and emulation backends.

``collect()`` is cheap (a few short subprocesses and /proc reads, well under a second; it
never starts a JVM or Spark) and never raises: whatever is missing or does not answer is
recorded as None. Fields that only an emulated run has are ``"n/a"`` in a simulated run.
``differences()`` says in words where two manifests' environments differ (`rmptwin rerun`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rmptwin import __version__, corebuild

REPO = Path(__file__).resolve().parents[3]
LOCK = REPO / "requirements.lock"
NA = "n/a"  # a field that does not apply to this backend (e.g. the datapath of a simulated run)
EMULATION_FIELDS = ("node_mode", "impair_backend", "datapath", "node_image", "node_image_id")
_TIMEOUT_S = 2.0

_T = TypeVar("_T")


def _output(cmd: list[str], timeout: float = _TIMEOUT_S) -> str | None:
    """Stdout of a successful ``cmd``, else None (missing tool, error, timeout)."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


# ----------------------------------------------------------------------------- code


def _git(*args: str) -> list[str]:
    # safe.directory: as root in a checkout another user owns (a Vagrant synced folder), git
    # would otherwise refuse to answer.
    return ["git", "-c", f"safe.directory={REPO}", "-C", str(REPO), *args]


def git_commit() -> str | None:
    out = _output(_git("rev-parse", "HEAD"))
    return (out or "").strip() or None


def git_dirty() -> bool | None:
    """True when tracked or untracked files differ from the commit; results/ does not count."""
    out = _output(_git("status", "--porcelain", "--", ".", ":(exclude)results"))
    return None if out is None else bool(out.strip())


def locked_names(lock: Path = LOCK) -> list[str]:
    """Package names pinned in requirements.lock (``name==version``, hashes and comments allowed)."""
    text = _read(lock) or ""
    names = []
    for line in text.splitlines():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==", line)
        if m:
            names.append(m.group(1))
    return names


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


# ----------------------------------------------------------------------------- tools


def ovs_version() -> str | None:
    out = _output(["ovs-vsctl", "--version"]) if shutil.which("ovs-vsctl") else None
    m = re.search(r"Open vSwitch\)\s*(\S+)", out or "")
    return m.group(1) if m else None


def mininet_version() -> str | None:
    """From the package metadata, else mininet/net.py's VERSION (importing Mininet is slow)."""
    found = package_version("mininet")
    if found:
        return found
    try:
        spec = importlib.util.find_spec("mininet")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    text = _read(Path(list(spec.submodule_search_locations)[0]) / "net.py") or ""
    m = re.search(r"^VERSION\s*=\s*['\"]([^'\"]+)", text, re.M)
    return m.group(1) if m else None


def java_version() -> str | None:
    """JAVA_VERSION from the JDK's release file; ``java -version`` (a JVM start) only without one."""
    java = shutil.which("java")
    if not java:
        return None
    home = Path(os.path.realpath(java)).parent.parent
    m = re.search(r'^JAVA_VERSION="([^"]+)"', _read(home / "release") or "", re.M)
    if m:
        return m.group(1)
    try:
        r = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=1.0)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "([^"]+)"', r.stderr + r.stdout)
    return m.group(1) if m else None


# ----------------------------------------------------------------------------- machine


def sch_netem() -> bool | None:
    """Whether the kernel offers netem, read from its modules and config; None when neither says.
    An emulated run knows better (it tried a netem qdisc for real): its backend passes that
    fact in ``emulation_facts``, which overrides this reading."""
    if Path("/sys/module/sch_netem").exists():
        return True
    modules = Path("/lib/modules") / platform.release()
    if any(modules.glob("kernel/net/sched/sch_netem.ko*")):
        return True
    config = _read(f"/boot/config-{platform.release()}") or ""
    if re.search(r"^CONFIG_NET_SCH_NETEM=[ym]", config, re.M):
        return True
    if "CONFIG_NET_SCH_NETEM" in config or modules.is_dir():
        return False
    return None


def cpu_model(cpuinfo: str | None = None) -> str | None:
    text = _read("/proc/cpuinfo") if cpuinfo is None else cpuinfo
    for key in ("model name", "Model", "cpu model", "Hardware", "uarch"):
        m = re.search(rf"^{re.escape(key)}\s*:\s*(.+)$", text or "", re.M)
        if m:
            return m.group(1).strip()
    return platform.processor() or None


def memory_total_mb(meminfo: str | None = None) -> int | None:
    text = _read("/proc/meminfo") if meminfo is None else meminfo
    m = re.search(r"^MemTotal:\s*(\d+)\s*kB", text or "", re.M)
    return int(m.group(1)) // 1024 if m else None


def _usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


# ----------------------------------------------------------------------------- the record


def safe(fn: Callable[..., _T], *args: Any) -> _T | None:
    try:
        return fn(*args)
    except Exception:
        return None


def collect(emulation: dict[str, Any] | None = None) -> dict[str, Any]:
    """``git_commit``, ``versions`` and ``environment`` for the manifest; ``emulation`` is what the
    emulated backend knows of itself (``emulation.run_facts.emulation_facts``), None for a
    simulated run."""
    packages = {n: safe(package_version, n) for n in safe(locked_names) or []}
    versions = {
        "rmptwin": __version__, "python": platform.python_version(),
        "pyarrow": safe(package_version, "pyarrow"), "pydantic": safe(package_version, "pydantic"),
        "os-ken": safe(package_version, "os-ken"), "pyspark": safe(package_version, "pyspark"),
        "mininet": safe(mininet_version), "openvswitch": safe(ovs_version), "java": safe(java_version),
    }
    environment = {
        "git_dirty": safe(git_dirty),
        "kernel": platform.release() or None,
        "sch_netem": emulation["sch_netem"] if emulation and "sch_netem" in emulation else safe(sch_netem),
        "cpu_count": os.cpu_count(),
        "cpus_usable": safe(_usable_cpus),
        "cpu_model": safe(cpu_model),
        "memory_total_mb": safe(memory_total_mb),
        "cores": corebuild.ACTIVE.kind,     # compiled (mypyc) or interpreted, and why (rmptwin.corebuild)
        "cores_why": corebuild.ACTIVE.why,
        **{k: (emulation or {}).get(k, NA if emulation is None else None) for k in EMULATION_FIELDS},
        "packages": packages,
    }
    return {"git_commit": safe(git_commit), "versions": versions, "environment": environment}


# ----------------------------------------------------------------------------- comparison


def _short(v: object) -> str:
    s = "null" if v is None else str(v)
    return s[:12] if re.fullmatch(r"[0-9a-f]{40}", s) else s


def differences(then: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Where two manifests' environments differ, one phrase each (``'kernel differs (a -> b)'``).
    What ``then`` does not record at all (an older manifest) is not a difference."""
    te: dict[str, Any] = then.get("environment") or {}
    ne: dict[str, Any] = now.get("environment") or {}
    tv, nv = then.get("versions") or {}, now.get("versions") or {}
    pairs = [("git commit", then, now, "git_commit")]
    pairs += [(k.replace("_", " "), te, ne, k) for k in ("git_dirty", "kernel", "sch_netem", "cpu_model", "cpu_count",
                                                         "cpus_usable", "memory_total_mb", "cores",
                                                         *EMULATION_FIELDS)]
    pairs += [(name, tv, nv, name) for name in sorted(tv)]
    out = [f"{what} differs ({_short(a.get(k))} -> {_short(b.get(k))})"
           for what, a, b, k in pairs if k in a and a.get(k) != b.get(k)]
    tp: Any   # JSON: the packages then recorded, None when the manifest has none
    tp, np_ = te.get("packages"), ne.get("packages") or {}
    changed = sorted(n for n in tp or {} if n not in tv and tp.get(n) != np_.get(n))
    changed += sorted(n for n in np_ if tp is not None and n not in tp and n not in tv)
    if changed:
        shown = ", ".join(f"{n} {_short((tp or {}).get(n))} -> {_short(np_.get(n))}" for n in changed[:3])
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        out.append(f"{len(changed)} locked package(s) differ ({shown}{more})")
    return out
