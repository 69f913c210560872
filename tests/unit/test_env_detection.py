"""Backend and cgroup detection, fed what both kinds of machine say: this sandbox (no
sch_netem, cgroup v1 with a hybrid cgroup2 mount) and stock Debian 12 (netem, cgroup v2)."""

from __future__ import annotations

import pytest

from rmptwin.emulation import env
from rmptwin.emulation.cgroups import Limits, Mount, limit_files, parse_limits, parse_mountinfo, parse_proc_cgroup
from rmptwin.emulation.env import MachineEnv, TcProbe, cgroup_version, netem_from
from rmptwin.errors import UserError

# ----------------------------------------------------------------------------- netem

NO_NETEM_TC = "Error: Specified qdisc kind is unknown.\n"
PROC_MODULES = "sch_htb 36864 0 - Live 0x0000000000000000\nsch_netem 20480 0 - Live 0x0000000000000000\n"
MODULES_DEP = "kernel/net/sched/sch_tbf.ko:\nkernel/net/sched/sch_netem.ko:\n"


def test_a_netem_qdisc_that_attaches_means_netem():
    assert netem_from(TcProbe(0, "")).available


def test_tc_refusing_netem_means_relay_and_says_what_tc_said():
    d = netem_from(TcProbe(2, NO_NETEM_TC))
    assert not d.available
    assert "Specified qdisc kind is unknown" in d.how


def test_the_tc_probe_decides_over_the_module_lists():
    # tc loads the module itself; if attaching fails, netem links would fail the same way.
    assert not netem_from(TcProbe(2, "RTNETLINK answers: Operation not supported"), PROC_MODULES, MODULES_DEP).available
    assert netem_from(TcProbe(0, ""), "", "").available


@pytest.mark.parametrize("proc_modules, kernel_modules, expected", [
    (PROC_MODULES, "", True),                                   # loaded
    ("", MODULES_DEP, True),                                    # loadable module
    ("", "kernel/net/sched/sch_netem.ko\n", True),              # modules.builtin
    ("sch_htb 36864 0 - Live 0x0\n", "kernel/net/sched/sch_tbf.ko:\n", False),
    ("", "", False),                                            # no /proc/modules, no /lib/modules (this sandbox)
])
def test_without_root_the_kernels_module_lists_decide(proc_modules, kernel_modules, expected):
    d = netem_from(None, proc_modules, kernel_modules)
    assert d.available is expected
    assert "not tried without root" in d.how


def test_detect_netem_reads_what_netem_from_decides(monkeypatch):
    files = {"/proc/modules": PROC_MODULES}
    monkeypatch.setattr(env, "_tc_netem_probe", lambda: None)
    monkeypatch.setattr(env, "_read", lambda p: files.get(str(p), ""))
    assert env.detect_netem().available
    files.clear()
    assert not env.detect_netem().available
    monkeypatch.setattr(env, "_tc_netem_probe", lambda: TcProbe(0, ""))
    assert env.has_netem()


def _machine(netem: bool, how: str = "") -> MachineEnv:
    return MachineEnv(root=True, netem=netem, ovs_installed=True, ovs_kernel_datapath=netem, mininet=True,
                      docker="running", java="17", netem_how=how, cgroup="v2" if netem else "v1")


def test_auto_picks_netem_where_the_kernel_has_it_else_the_relay():
    assert env.choose_impair("auto", _machine(True)) == "netem"
    assert env.choose_impair("auto", _machine(False)) == "relay"
    assert env.choose_impair("relay", _machine(True)) == "relay"


def test_asking_for_netem_without_it_is_one_line_with_the_evidence():
    how = netem_from(TcProbe(2, NO_NETEM_TC)).how
    with pytest.raises(UserError) as e:
        env.choose_impair("netem", _machine(False, how))
    msg = str(e.value)
    assert "--impair relay" in msg and "Specified qdisc kind is unknown" in msg and "\n" not in msg


def test_the_environment_reports_its_evidence_and_cgroup_version():
    d = _machine(False, "tc could not attach").as_dict()
    assert d["impair_backend"] == "relay" and d["netem_how"] == "tc could not attach" and d["cgroup"] == "v1"


# ----------------------------------------------------------------------------- cgroups

# This sandbox: a v1 hierarchy per controller, plus an empty cgroup2 at .../unified.
MOUNTINFO_V1 = """\
23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
# Debian 10/11 style: cpu and cpuacct co-mounted, optional fields before the separator.
MOUNTINFO_V1_COMOUNTED = """\
30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,memory
"""
# Stock Debian 12: the unified hierarchy at /sys/fs/cgroup.
MOUNTINFO_V2 = """\
22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""


@pytest.mark.parametrize("mountinfo, version", [
    (MOUNTINFO_V1, "v1"), (MOUNTINFO_V1_COMOUNTED, "v1"), (MOUNTINFO_V2, "v2"),
    ("23 1 0:21 / /sys rw - sysfs sysfs rw\n", "none"), ("", "none"),
])
def test_cgroup_version_from_mountinfo(mountinfo, version):
    assert cgroup_version(mountinfo) == version


def test_detect_cgroup_version_reads_this_machines_mountinfo():
    with open("/proc/self/mountinfo") as f:
        assert env.detect_cgroup_version() == cgroup_version(f.read()) != "none"


def test_v1_limits_come_from_each_controllers_hierarchy():
    mounts = parse_mountinfo(MOUNTINFO_V1_COMOUNTED)
    cgroups = parse_proc_cgroup("5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n")
    files = limit_files(mounts, cgroups)
    assert str(files["memory"]) == "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"
    assert str(files["cpu_quota"]) == "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"
    limits = parse_limits("v1", {"memory": "536870912\n", "cpu_quota": "150000\n", "cpu_period": "100000\n"})
    assert limits == Limits(512 << 20, 1.5)
    unlimited = parse_limits("v1", {"memory": "9223372036854771712\n", "cpu_quota": "-1\n", "cpu_period": "100000"})
    assert unlimited == Limits(None, None)


def test_v2_limits_come_from_the_unified_hierarchy():
    mounts = parse_mountinfo(MOUNTINFO_V2)
    cgroups = parse_proc_cgroup("0::/system.slice/docker-abc.scope\n")
    files = limit_files(mounts, cgroups)
    assert str(files["memory"]) == "/sys/fs/cgroup/system.slice/docker-abc.scope/memory.max"
    assert str(files["cpu"]) == "/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.max"
    assert parse_limits("v2", {"memory": "536870912\n", "cpu": "150000 100000\n"}) == Limits(512 << 20, 1.5)
    assert parse_limits("v2", {"memory": "max\n", "cpu": "max 100000\n"}) == Limits(None, None)


def test_a_mount_of_a_sub_cgroup_and_escaped_mount_points():
    # Inside a cgroup namespace the mount shows a sub-tree; mountinfo escapes spaces.
    m = parse_mountinfo("26 22 0:23 /docker/abc /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n").v2
    assert m == Mount("/sys/fs/my cgroup", "/docker/abc")
    assert str(m.path_of("/docker/abc/inner")) == "/sys/fs/my cgroup/inner"
    assert str(m.path_of("/elsewhere")) == "/sys/fs/my cgroup/elsewhere"


def test_no_cgroup_hierarchy_is_a_clear_error():
    with pytest.raises(ValueError, match="no cgroup hierarchy"):
        limit_files(parse_mountinfo(""), {})
