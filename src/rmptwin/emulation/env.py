"""What this machine offers the emulation, detected at start and printed by `rmptwin env`.

Detection is by trying the real thing in a throwaway network namespace (netem) or asking
the kernel (openvswitch module, cgroup mounts), never by guessing from the distribution:
the sandbox kernel lacks netem and the openvswitch module and mounts cgroup v1, an
ordinary Debian 12 VM has both modules and cgroup v2. Each decision is a pure function of
what was read (``netem_from``, ``cgroup_version``), so both kinds of machine are
unit-tested anywhere; the readers next to them only gather the text.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmptwin.emulation import docker_engine as engine
from rmptwin.emulation.cgroups import parse_mountinfo
from rmptwin.emulation.relay import boost_priority
from rmptwin.errors import UserError

IMPAIR_BACKENDS = ("netem", "relay")


def _run(cmd: list[str], timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def is_root() -> bool:
    # RMPTWIN_ASSUME_NOT_ROOT lets the CLI test exercise the not-root message where no
    # unprivileged user can read the repository; it can only make the check stricter.
    return os.geteuid() == 0 and not os.environ.get("RMPTWIN_ASSUME_NOT_ROOT")


def require_root(what: str = "the emulated network") -> None:
    if not is_root():
        raise UserError(f"{what} needs root (Open vSwitch, Mininet, network namespaces); run it as root or with sudo")


@dataclass(frozen=True)
class TcProbe:
    """What `tc qdisc add dev lo root netem` answered in a throwaway network namespace."""

    returncode: int
    output: str


@dataclass(frozen=True)
class Detected:
    available: bool
    how: str        # one line: the evidence, for `rmptwin env` and the manifest


def netem_from(probe: TcProbe | None, proc_modules: str = "", kernel_modules: str = "") -> Detected:
    """Whether links can be impaired with netem, from what the machine said.

    ``probe``: the tc attempt (None when it could not be made: not root, no tc/unshare);
    it decides when present, since tc loads the module itself and attaching is what the
    netem backend does. Otherwise ``proc_modules`` (/proc/modules) or ``kernel_modules``
    (the running kernel's modules.builtin and modules.dep) say whether sch_netem exists.
    """
    if probe is not None:
        if probe.returncode == 0:
            return Detected(True, "tc attached a netem qdisc in a scratch namespace")
        said = next((ln.strip() for ln in probe.output.splitlines() if ln.strip()), f"exit {probe.returncode}")
        return Detected(False, f"tc could not attach a netem qdisc: {said}")
    if any(ln.split()[:1] == ["sch_netem"] for ln in proc_modules.splitlines()):
        return Detected(True, "sch_netem is loaded (/proc/modules); not tried without root")
    if re.search(r"(^|/)sch_netem\.ko", kernel_modules, re.MULTILINE):
        return Detected(True, "sch_netem is in the kernel's module lists; not tried without root")
    return Detected(False, "no sch_netem in /proc/modules or the kernel's module lists; not tried without root")


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _tc_netem_probe() -> TcProbe | None:
    if not shutil.which("tc") or not shutil.which("unshare") or os.geteuid() != 0:
        return None
    try:
        r = _run(["unshare", "-n", "sh", "-c", "ip link set lo up && tc qdisc add dev lo root netem delay 1ms"])
    except (OSError, subprocess.SubprocessError) as e:
        return TcProbe(-1, f"the probe did not run: {e}")
    return TcProbe(r.returncode, (r.stderr or "") + (r.stdout or ""))


def detect_netem() -> Detected:
    modules = Path("/lib/modules") / platform.release()
    return netem_from(_tc_netem_probe(), _read("/proc/modules"),
                      _read(modules / "modules.builtin") + _read(modules / "modules.dep"))


def has_netem() -> bool:
    """True when a netem qdisc can be attached (tried on lo of a new network namespace)."""
    return detect_netem().available


def cgroup_version(mountinfo: str) -> str:
    """'v2' (unified hierarchy), 'v1' (a hierarchy per controller, also the hybrid layout)
    or 'none', from the text of /proc/self/mountinfo."""
    return parse_mountinfo(mountinfo).version


def detect_cgroup_version() -> str:
    return cgroup_version(_read("/proc/self/mountinfo"))


def has_ovs_kernel_module() -> bool:
    if Path("/sys/module/openvswitch").exists():
        return True
    if os.geteuid() != 0 or not shutil.which("modprobe"):
        return False
    try:
        return _run(["modprobe", "-q", "openvswitch"]).returncode == 0 and Path("/sys/module/openvswitch").exists()
    except (OSError, subprocess.SubprocessError):
        return False


def docker_state() -> str:
    """'running' (an engine answers the SDK), 'stopped' (dockerd installed, not answering) or 'missing'."""
    if engine.running():
        return "running"
    return "stopped" if shutil.which("dockerd") else "missing"


def java_version() -> str | None:
    if not shutil.which("java"):
        return None
    try:
        r = _run(["java", "-version"])
    except (OSError, subprocess.SubprocessError):
        return None
    first = (r.stderr or r.stdout).splitlines()
    return first[0].strip() if first else "unknown"


@dataclass(frozen=True)
class MachineEnv:
    root: bool
    netem: bool
    ovs_installed: bool
    ovs_kernel_datapath: bool
    mininet: bool
    docker: str
    java: str | None
    netem_how: str = ""     # the evidence behind ``netem``
    cgroup: str = ""        # 'v1', 'v2' or 'none' (container limits live there)

    @property
    def datapath(self) -> str:
        """Mininet OVSSwitch datapath: 'kernel' where the module exists, else 'user'."""
        return "kernel" if self.ovs_kernel_datapath else "user"

    @property
    def impair_backend(self) -> str:
        return "netem" if self.netem else "relay"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(datapath=self.datapath, impair_backend=self.impair_backend)
        return d


def detect() -> MachineEnv:
    try:
        import mininet.net  # noqa: F401 - only whether it imports

        mininet_ok = True
    except ImportError:
        mininet_ok = False
    netem = detect_netem()
    return MachineEnv(
        root=is_root(),
        netem=netem.available,
        netem_how=netem.how,
        cgroup=detect_cgroup_version(),
        ovs_installed=bool(shutil.which("ovs-vsctl")),
        ovs_kernel_datapath=has_ovs_kernel_module(),
        mininet=mininet_ok,
        docker=docker_state(),
        java=java_version(),
    )


def choose_impair(requested: str, env: MachineEnv | None = None) -> str:
    """'auto' -> netem where it exists, else the user-space relay; explicit choices are checked."""
    if requested == "auto":
        return (env or detect()).impair_backend
    if requested not in IMPAIR_BACKENDS:
        raise UserError(f"unknown impairment backend {requested!r}; choose auto, {', '.join(IMPAIR_BACKENDS)}")
    if requested == "netem":
        netem = Detected(env.netem, env.netem_how) if env else detect_netem()
        if not netem.available:
            why = f" ({netem.how})" if netem.how else ""
            raise UserError(f"netem was requested but this kernel has no sch_netem{why}; use --impair relay (or auto)")
    return requested


# ----------------------------------------------------------------------------- daemons


def _boost_ovs() -> None:
    # The userspace datapath forwards in ovs-vswitchd itself; on a busy machine its wake-up
    # latency would be added to every configured link delay.
    # Only where the userspace datapath forwards (no kernel module).
    if has_ovs_kernel_module():
        return
    try:
        pid = int(Path("/var/run/openvswitch/ovs-vswitchd.pid").read_text().strip())
    except (OSError, ValueError):
        return
    boost_priority(pid)


def ovs_running() -> bool:
    try:
        return _run(["ovs-vsctl", "--timeout=3", "show"], timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def ensure_ovs() -> None:
    """Start Open vSwitch (ovsdb-server + ovs-vswitchd) when it is not running."""
    if not shutil.which("ovs-vsctl"):
        raise UserError("Open vSwitch is not installed; run `make provision` (apt package openvswitch-switch)")
    if ovs_running():
        _boost_ovs()
        return
    ctl = "/usr/share/openvswitch/scripts/ovs-ctl"
    if not Path(ctl).exists():
        raise UserError(f"{ctl} is missing; reinstall openvswitch-switch")
    # ovs-ctl warns that it cannot raise ulimit or load the kernel module; both are harmless
    # with the userspace datapath, so only the outcome is checked.
    r = _run([ctl, "start", "--system-id=random"], timeout=60)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if ovs_running():
            _boost_ovs()
            return
        time.sleep(0.2)
    raise UserError(f"Open vSwitch did not start: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


def stop_ovs() -> None:
    """Stop Open vSwitch (what ``ensure_ovs`` started)."""
    ctl = "/usr/share/openvswitch/scripts/ovs-ctl"
    if Path(ctl).exists() and ovs_running():
        _run([ctl, "stop"], timeout=60)


DOCKERD_LOG = engine.DOCKERD_LOG


def stop_dockerd() -> None:
    """Stop the Docker engine (what ``ensure_dockerd`` started); containerd goes with it."""
    if docker_state() != "running":
        return
    # By the engine's own pid file, never by name: only the engine the socket answers for.
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
        if Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd":
            os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and docker_state() == "running":
        time.sleep(0.5)


def ensure_dockerd() -> None:
    """Start the Docker engine without its own networking (Mininet wires containers)."""
    state = docker_state()
    if state == "running":
        return
    if state == "missing":
        raise UserError("no Docker engine (dockerd not found); install docker.io or use --nodes ns")
    if not is_root():
        raise UserError("starting the Docker engine needs root; run as root or use --nodes ns")
    log = open(DOCKERD_LOG, "ab")
    # --bridge=none --iptables=false: containers get no Docker network and the host's
    # firewall is untouched; the daemon outlives this process by design (like OVS).
    subprocess.Popen(
        ["dockerd", "--bridge=none", "--iptables=false",],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if docker_state() == "running":
            return
        time.sleep(0.5)
    raise UserError(f"the Docker engine did not start within 60 s; see {DOCKERD_LOG}")
