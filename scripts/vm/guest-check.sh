#!/bin/bash
# Runs once at boot in the VM image (rmptwin-vm-check.service, installed by
# scripts/vm/build-image.sh), then the unit powers the guest off. It exercises exactly what
# the user-space relay and datapath stand in for on the build host: a netem qdisc and an OVS
# bridge on the kernel datapath. Each step is announced on the console first, so a host-side
# timeout can say where the guest stopped; the last line is one JSON object the host parses.
set -u
step() { echo "RMPTWIN-VM-STEP $*"; }
ok() { if "$@" >/dev/null 2>&1; then echo true; else echo false; fi; }

step modprobe sch_netem
netem_mod=$(ok modprobe sch_netem)
step tc netem on lo
netem_qdisc=false
if tc qdisc add dev lo root netem delay 1ms 2>&1 && tc qdisc show dev lo | grep -q netem; then
  netem_qdisc=true
fi
tc qdisc del dev lo root 2>/dev/null

step modprobe openvswitch
ovs_mod=$(ok modprobe openvswitch)
step start openvswitch-switch
ovs_started=$(ok systemctl start openvswitch-switch)
step add-br br0 on the system datapath
# --may-exist: the image is booted with -snapshot, but a bridge left by a boot without it
# must not fail the check.
ovs-vsctl --timeout=60 --may-exist add-br br0 -- set bridge br0 datapath_type=system 2>&1
step ovs-dpctl show
dp=$(ovs-dpctl show 2>&1)
echo "$dp"
kernel_dp=false
if grep -q '^system@ovs-system:' <<<"$dp" && grep -q ': br0 (internal)' <<<"$dp"; then kernel_dp=true; fi
ovs-vsctl --timeout=30 --if-exists del-br br0 2>&1

step report
RESULT_KERNEL=$(uname -r) RESULT_NETEM_MOD=$netem_mod RESULT_NETEM_QDISC=$netem_qdisc \
RESULT_OVS_MOD=$ovs_mod RESULT_OVS_STARTED=$ovs_started RESULT_KERNEL_DP=$kernel_dp \
RESULT_OVS_VERSION=$(ovs-vswitchd --version 2>/dev/null | head -n1) \
RESULT_MININET=$(python3 -c "import mininet.net; print(mininet.net.VERSION)" 2>&1 | tail -n1) \
python3 - <<'PY'
import json, os, platform
e = os.environ
print("RMPTWIN-VM-CHECK " + json.dumps({
    "kernel": e["RESULT_KERNEL"],
    "sch_netem": e["RESULT_NETEM_MOD"] == "true" and e["RESULT_NETEM_QDISC"] == "true",
    "openvswitch_module": e["RESULT_OVS_MOD"] == "true",
    "ovs_started": e["RESULT_OVS_STARTED"] == "true",
    "kernel_datapath": e["RESULT_KERNEL_DP"] == "true",
    "ovs_vswitchd": e["RESULT_OVS_VERSION"],
    "mininet": e["RESULT_MININET"],
    "python": platform.python_version(),
    # guest seconds since the kernel started, to set beside the host's wall time
    "guest_uptime_s": float(open("/proc/uptime").read().split()[0]),
}), flush=True)
PY
