"""Servers for an emulated network spread over several machines, and local stand-ins for them.

A run with ``--servers a,b`` places its switches and hosts on those machines with Mininet's
cluster edition (``emulation.cluster``): every server is reached by SSH as root, runs its own
Open vSwitch, and carries links cut by the placement through SSH Ethernet tunnels
(``ssh -w``). What a server must offer is what ``scripts/provision.sh --server`` installs.

``rmptwin servers up --local N`` makes N such servers on this machine, each a network
namespace with its own mount namespace: its own ``/run/openvswitch`` and database (so its
``ovs-vsctl`` talks to its own switch daemon, on the userspace datapath in its namespace),
its own sshd on an address of a private underlay bridge, and the cluster's SSH client
configuration. They share this machine's CPUs, clock and file system, which is what they
cannot show about real machines (docs/cluster.md); ``--isolated`` takes the file system away
from that list: each server then sees an empty ``/run/rmptwin`` (but its own registry entry)
and an empty ``/var/tmp`` of its own, so a run whose directory is under ``/var/tmp`` must carry
its files to and from the servers over SSH as it must with real machines
(``emulation.server_files``). The registry under ``SERVERS_DIR`` names them, so ``--servers
rts1,rts2`` resolves without touching ``/etc/hosts``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rmptwin.errors import UserError

SERVERS_DIR = Path("/run/rmptwin/servers")
BRIDGE = "rtsbr"                 # the underlay: one Linux bridge in this machine's namespace
SUBNET = "198.18.250"            # RFC 2544's benchmarking range: never routed anywhere
MASTER_IP = f"{SUBNET}.1"        # this machine on the underlay: the controller listens here
PREFIX = "rts"                   # local server names: rts1, rts2, ...
MAX_LOCAL = 8
# The cluster's own key and SSH client configuration, kept across reboots: real servers
# authorize this key once (scripts/provision.sh --server, docs/cluster.md).
CLUSTER_DIR = Path("/var/lib/rmptwin/cluster")
SSH_CONFIG = CLUSTER_DIR / "ssh_config"
CLIENT_KEY = CLUSTER_DIR / "id_ed25519"
AUTHORIZED = SERVERS_DIR / "authorized_keys"


ISOLATED_DIRS = ("/run/rmptwin", "/var/tmp")   # what an --isolated local server sees empty, as its own
KEEP = Path("/run/rmptwin-keep")             # where an isolated server's keeper holds SERVERS_DIR meanwhile


@dataclass(frozen=True)
class Server:
    name: str
    ip: str
    local: bool              # a namespace on this machine made by `servers up --local`
    isolated: bool = False   # a local server with directories of its own (``ISOLATED_DIRS``)

    @property
    def shares_files(self) -> bool:
        """Whether a path here names the same file there: only on a local server that is not
        isolated. Elsewhere the run's files go to and from it over SSH (``server_files``)."""
        return self.local and not self.isolated


def local_name(i: int) -> str:
    return f"{PREFIX}{i}"


def local_ip(i: int) -> str:
    return f"{SUBNET}.{10 + i}"


def _run(cmd: list[str], check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        said = (r.stderr or r.stdout).strip().splitlines()
        raise UserError(f"{' '.join(cmd[:4])}: {said[-1] if said else f'exit {r.returncode}'}")
    return r


def ssh_base() -> list[str]:
    """ssh with the cluster's own configuration (key, no host-key prompts): never the user's."""
    return ["ssh", "-F", str(SSH_CONFIG)]


def ensure_client() -> Path:
    """The cluster's key pair and SSH configuration (made once); returns the private key's path."""
    CLUSTER_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not CLIENT_KEY.exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rmptwin-cluster", "-f", str(CLIENT_KEY)])
    # Local servers are made and unmade here with fresh host keys each time: checking them would
    # only fail. A real server's key is learnt on first contact and held to after (accept-new).
    SSH_CONFIG.write_text(
        f"Host {SUBNET}.*\n"
        "  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n"
        "Host *\n"
        f"  IdentityFile {CLIENT_KEY}\n"
        "  IdentitiesOnly yes\n"
        "  User root\n"
        "  BatchMode yes\n"
        "  StrictHostKeyChecking accept-new\n"
        f"  UserKnownHostsFile {CLUSTER_DIR / 'known_hosts'}\n"
        "  LogLevel ERROR\n"
        "  ConnectTimeout 10\n"
        "  ServerAliveInterval 5\n")
    return CLIENT_KEY


def _write_client_config() -> None:
    ensure_client()
    SERVERS_DIR.mkdir(parents=True, exist_ok=True)
    AUTHORIZED.write_text(Path(f"{CLIENT_KEY}.pub").read_text())


def _sshd_config(d: Path, ip: str) -> str:
    # MaxStartups/MaxSessions: every Mininet node on a server is one SSH session, all opened at
    # once when the network is built (the default 10 unauthenticated connections drop the rest).
    return (f"ListenAddress {ip}\n"
            f"PidFile {d / 'sshd.pid'}\n"
            f"HostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {AUTHORIZED}\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitTunnel ethernet\n"
            "UsePAM no\n"
            "UseDNS no\n"
            "StrictModes no\n"
            "MaxStartups 400:30:800\n"
            "MaxSessions 400\n"
            "LogLevel ERROR\n")


# Run in the server's network namespace, in a mount namespace of its own: the server's own
# Open vSwitch directories and the cluster's SSH client configuration (the tunnels a server
# opens to another server read /etc/ssh/ssh_config), then its switch daemons, then sshd. And
# the machine's cgroup hierarchies: `ip netns exec` mounts a sysfs of the namespace's own over
# /sys, without them, and a Docker host's processes join their container's cgroups there.
KEEPER = """set -e
d={d}
for x in ovs-run ovs-etc ovs-log; do mkdir -p "$d/$x"; done
mount --bind "$d/ovs-run" /run/openvswitch
mount --bind "$d/ovs-etc" /etc/openvswitch
mount --bind "$d/ovs-log" /var/log/openvswitch
mount --bind {ssh_config} /etc/ssh/ssh_config
{cgroups}
ip link set lo up
/usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >"$d/ovs-ctl.log" 2>&1 || true
exec /usr/sbin/sshd -D -e -f "$d/sshd_config" 2>>"$d/sshd.log"
"""

# An isolated server's own directories, mounted before sshd starts: an empty tmpfs over each of
# ISOLATED_DIRS, with the registry (sshd's keys and configuration) moved back in under the first.
ISOLATE = """mkdir -p {keep}
mount --bind {servers} {keep}
for x in {dirs}; do mount -t tmpfs -o mode=0755 rmptwin-own "$x"; done
mkdir -p {servers}
mount --move {keep} {servers}
"""


def cgroup_mounts_script(mountinfo: str) -> str:
    """Shell mounting again, under the keeper's /sys, the cgroup hierarchies ``mountinfo`` (this
    machine's) shows under /sys/fs/cgroup: v2's one, or v1's one per controller set (with the
    tmpfs above them). A v1 hierarchy mounted with the same controllers (or name) is the same
    hierarchy, so paths in /proc/PID/cgroup name the same groups there as here."""
    from rmptwin.emulation.cgroups import V1_CONTROLLERS

    out = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, kinds = left.split(), right.split()
        if len(fields) < 5 or len(kinds) < 3 or not fields[4].startswith("/sys/fs/cgroup"):
            continue
        point, (fstype, opts) = shlex.quote(fields[4]), (kinds[0], kinds[2])
        if fstype == "tmpfs" and fields[4] == "/sys/fs/cgroup":
            out.append(f"mount -t tmpfs -o mode=755 cgroup {point}")
        elif fstype == "cgroup2":
            out.append(f"mkdir -p {point} && mount -t cgroup2 cgroup2 {point}")
        elif fstype == "cgroup":
            keep = [o for o in opts.split(",") if o in V1_CONTROLLERS or o.startswith("name=")]
            if not any(o in V1_CONTROLLERS for o in keep):
                keep.insert(0, "none")
            out.append(f"mkdir -p {point} && mount -t cgroup -o {shlex.quote(','.join(keep))} cgroup {point}")
    return "\n".join(f"{cmd} || true" for cmd in out)


def _needs() -> None:
    for tool, package in (("sshd", "openssh-server"), ("ssh", "openssh-client"), ("sudo", "sudo"),
                          ("ovs-vsctl", "openvswitch-switch"), ("mnexec", "mininet")):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            raise UserError(f"{tool} is missing: run `make provision` (Debian package {package})")


def up_local(n: int, isolated: bool = False) -> list[Server]:
    """Make servers rts1..rtsN on this machine (those already up are kept) and return them;
    ``isolated``: each with directories of its own (``ISOLATED_DIRS``)."""
    if not 1 <= n <= MAX_LOCAL:
        raise UserError(f"servers up --local: N must be 1 to {MAX_LOCAL}, not {n}")
    _needs()
    _write_client_config()
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)       # sshd's privilege separation directory
    Path("/run/openvswitch").mkdir(exist_ok=True)            # a mount point, if this machine's OVS never ran
    if _run(["ip", "link", "show", BRIDGE], check=False).returncode != 0:
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "addr", "add", f"{MASTER_IP}/24", "dev", BRIDGE])
        _run(["ip", "link", "set", BRIDGE, "up"])
    servers = [_up_one(i, isolated) for i in range(1, n + 1)]
    for s in servers:
        _wait_ssh(s)
    return servers


def _up_one(i: int, isolated: bool) -> Server:
    name, ip = local_name(i), local_ip(i)
    d = SERVERS_DIR / name
    record = d / "server.json"
    if record.exists() and _alive((old := json.loads(record.read_text())).get("keeper_pid", 0)):
        if bool(old.get("isolated")) != isolated:
            raise UserError(f"server {name} is up {'with' if old.get('isolated') else 'without'} --isolated; "
                            "run `rmptwin servers down --local` first")
        return Server(name, ip, True, isolated)
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "host_key").exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")])
    (d / "sshd_config").write_text(_sshd_config(d, ip))
    if _run(["ip", "netns", "pids", name], check=False).returncode != 0:
        _run(["ip", "netns", "add", name])
    if _run(["ip", "link", "show", f"{name}-u"], check=False).returncode != 0:
        _run(["ip", "link", "add", f"{name}-u", "type", "veth", "peer", "name", "eth0", "netns", name])
        _run(["ip", "link", "set", f"{name}-u", "master", BRIDGE, "up"])
        _run(["ip", "-n", name, "addr", "add", f"{ip}/24", "dev", "eth0"])
        _run(["ip", "-n", name, "link", "set", "eth0", "up"])
    script = KEEPER.format(d=d, ssh_config=SSH_CONFIG,
                           cgroups=cgroup_mounts_script(Path("/proc/self/mountinfo").read_text()))
    if isolated:
        script = script.replace("ip link set lo up\n", ISOLATE.format(keep=KEEP, servers=SERVERS_DIR,
                                                                      dirs=" ".join(ISOLATED_DIRS)) + "ip link set lo up\n")
    with open(d / "keeper.log", "ab") as log:   # the keeper writes on; this process need not hold it
        keeper = subprocess.Popen(["ip", "netns", "exec", name, "unshare", "--mount", "--propagation", "private",
                                   "sh", "-c", script], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  start_new_session=True)
    record.write_text(json.dumps({"name": name, "ip": ip, "keeper_pid": keeper.pid, "isolated": isolated}))
    return Server(name, ip, True, isolated)


def _alive(pid: int) -> bool:
    return pid > 0 and Path(f"/proc/{pid}").exists()


def _wait_ssh(s: Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        r = subprocess.run([*ssh_base(), s.ip, "ovs-vsctl --timeout=5 show >/dev/null && echo ok"],
                           capture_output=True, text=True, timeout=30)
        if r.stdout.strip() == "ok":
            return
        last = (r.stderr or r.stdout).strip()
        time.sleep(0.3)
    raise UserError(f"server {s.name} ({s.ip}) did not answer over SSH with a running Open vSwitch "
                    f"within {timeout:.0f} s: {last or 'no answer'}; see {SERVERS_DIR / s.name}")


def local_servers() -> list[Server]:
    """The local servers that are up, by number."""
    out = []
    for rec in sorted(SERVERS_DIR.glob(f"{PREFIX}*/server.json"), key=lambda p: int(p.parent.name[len(PREFIX):])):
        data = json.loads(rec.read_text())
        if _alive(data.get("keeper_pid", 0)):
            out.append(Server(data["name"], data["ip"], True, bool(data.get("isolated"))))
    return out


def down_local() -> list[str]:
    """Remove every local server: its processes, namespace, link and directory; then the bridge."""
    removed = []
    for d in sorted(SERVERS_DIR.glob(f"{PREFIX}*")):
        if not d.is_dir():
            continue
        name = d.name
        pids = _run(["ip", "netns", "pids", name], check=False).stdout.split()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(int(pid), sig)
                except (ProcessLookupError, ValueError):
                    pass
            if sig == signal.SIGTERM and pids:
                time.sleep(0.5)
        _run(["ip", "link", "del", f"{name}-u"], check=False)
        _run(["ip", "netns", "del", name], check=False)
        shutil.rmtree(d, ignore_errors=True)
        removed.append(name)
    _run(["ip", "link", "del", BRIDGE], check=False)
    with contextlib.suppress(OSError):
        KEEP.rmdir()   # an isolated server's mount point, empty here
    return removed


def resolve(names: list[str]) -> list[Server]:
    """``--servers`` names (local server names, host names or addresses) as servers."""
    local = {s.name: s for s in local_servers()}
    out = []
    for n in names:
        if n in local:
            out.append(local[n])
            continue
        if n.startswith(PREFIX) and n[len(PREFIX):].isdigit():
            raise UserError(f"server {n} is not up; run `rmptwin servers up --local {n[len(PREFIX):]}`")
        r = _run(["getent", "ahostsv4", n], check=False)
        ip = r.stdout.split()[0] if r.returncode == 0 and r.stdout.split() else ""
        if not ip:
            raise UserError(f"server {n}: no such host (give a name that resolves, an address, "
                            f"or rts1..rts{MAX_LOCAL} after `rmptwin servers up --local N`)")
        out.append(Server(n, ip, False))
    if len({s.ip for s in out}) != len(out):
        raise UserError(f"--servers names one machine twice: {','.join(names)}")
    ensure_client()
    for s in out:
        check_server(s)
    return out


# What a server must run: Mininet's cluster edition starts nodes with mnexec, switches with
# ovs-vsctl (its own Open vSwitch running), and opens tunnels with ssh and tap devices.
SERVER_NEEDS = {"mnexec": "mininet", "ovs-vsctl": "openvswitch-switch", "ssh": "openssh-client", "sudo": "sudo",
                "tcpdump": "tcpdump", "tar": "tar"}
# Nodes and relays run there as here: this interpreter, this checkout's sources, at the same paths.
SOURCES = Path(__file__).resolve().parents[1]   # src/rmptwin


def check_server(s: Server) -> None:
    """One line if ``s`` cannot be used: unreachable as root with the cluster key, a package
    missing, or its Open vSwitch not running."""
    script = ("for t in " + " ".join(SERVER_NEEDS) + "; do command -v $t >/dev/null || echo missing $t; done; "
              "ovs-vsctl --timeout=5 show >/dev/null 2>&1 || echo ovs-down; "
              f"[ -x {shlex.quote(sys.executable)} ] && [ -f {shlex.quote(str(SOURCES / '__init__.py'))} ] "
              "|| echo no-checkout")
    try:
        r = subprocess.run([*ssh_base(), s.ip, script], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise UserError(f"server {s.name} ({s.ip}) did not answer over SSH within 30 s") from None
    if r.returncode == 255:
        said = r.stderr.strip().splitlines()
        raise UserError(f"server {s.name} ({s.ip}): cannot log in as root with the cluster key "
                        f"({said[-1] if said else 'ssh failed'}); run scripts/provision.sh --server on it (docs/cluster.md)")
    missing = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("missing ")]
    if missing:
        pkgs = " ".join(SERVER_NEEDS[m] for m in missing)
        raise UserError(f"server {s.name} ({s.ip}) lacks {', '.join(missing)}: run scripts/provision.sh --server "
                        f"on it (Debian packages {pkgs})")
    if "no-checkout" in r.stdout:
        raise UserError(f"server {s.name} ({s.ip}) has no {sys.executable} or {SOURCES}: put this checkout at the "
                        "same path there and run scripts/provision.sh --server in it (docs/cluster.md)")
    if "ovs-down" in r.stdout:
        raise UserError(f"server {s.name} ({s.ip}): Open vSwitch is not running there; start it "
                        "(/usr/share/openvswitch/scripts/ovs-ctl start)")


@dataclass(frozen=True)
class ServerClock:
    """A server's wall clock against this machine's, NTP's way: the server's time read between
    two of ours, offset = theirs - the midpoint, known to within half the round trip."""

    offset_ns: int
    uncertainty_ns: int

    @property
    def correction_ns(self) -> int:
        """What to add to this machine's time to get the server's: the offset where it is
        larger than what the measure can tell, else 0 (servers on one machine share a clock)."""
        return self.offset_ns if abs(self.offset_ns) > self.uncertainty_ns else 0

    def to_json(self) -> dict[str, float]:
        return {"offset_ms": round(self.offset_ns / 1e6, 3), "uncertainty_ms": round(self.uncertainty_ns / 1e6, 3),
                "applied_ms": round(self.correction_ns / 1e6, 3)}


def measure_clock(s: Server, samples: int = 9) -> ServerClock:
    """The best (shortest round trip) of ``samples`` reads of the server's clock over one SSH session."""
    proc = subprocess.Popen([*ssh_base(), s.ip, "while read x; do date +%s%N; done"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None   # both piped
    best: tuple[int, int] | None = None
    try:
        for _ in range(samples):
            t0 = time.time_ns()
            proc.stdin.write("\n")
            proc.stdin.flush()
            line = proc.stdout.readline().strip()
            t1 = time.time_ns()
            if not line.isdigit():
                raise UserError(f"server {s.name} ({s.ip}) did not tell its time over SSH")
            rtt, offset = t1 - t0, int(line) - (t0 + t1) // 2
            if best is None or rtt < best[0]:
                best = (rtt, offset)
    finally:
        proc.kill()
        proc.wait()
    assert best is not None   # samples >= 1
    return ServerClock(best[1], best[0] // 2)
