#!/usr/bin/env bash
# `make vm-boot-check`: boots build/vm/rootfs.raw (from `make vm-image`) once under qemu,
# waits for the guest's check line (scripts/vm/guest-check.sh: netem qdisc, openvswitch
# module, an OVS bridge on the kernel datapath), prints it as a table with the boot time, and
# succeeds only if netem and the kernel datapath worked. The guest powers itself off.
#
# The guest has no network device at all (-nic none): nothing it does leaves the VM. The
# disk is opened with -snapshot, so the boot never changes the image and its hash stays valid.
# The serial console goes to build/vm/console.log; qemu is killed on any exit of this script.
#
# RMPTWIN_VM_ACCEL=kvm|tcg|auto (auto by default): auto uses KVM only if /dev/kvm opens and a
# probe boot under KVM prints the kernel's "Run /init" line within RMPTWIN_VM_PROBE_TIMEOUT
# seconds (20). Nested KVM fails it either way: with -cpu host qemu aborts at once (an MSR
# the outer hypervisor refuses), with qemu's default CPU the guest hangs after "Probing EDD".
# The probe's answer is kept in build/vm/accel-probe for this host kernel, qemu and guest
# kernel, so it runs once.
# RMPTWIN_VM_TIMEOUT (600 s) bounds the whole boot; TCG is the slow case it is sized for.
# --probe-only: print the accelerator (kvm or tcg) the probe finds, and boot nothing more
# (scripts/vm/vagrant-run.sh picks libvirt's domain type with it).
set -eEuo pipefail
cd "$(dirname "$0")/../.."

OUT=build/vm
IMAGE=$OUT/rootfs.raw
CONSOLE=$OUT/console.log
PROBE_CACHE=$OUT/accel-probe
ACCEL=${RMPTWIN_VM_ACCEL:-auto}
TIMEOUT=${RMPTWIN_VM_TIMEOUT:-600}
PROBE_TIMEOUT=${RMPTWIN_VM_PROBE_TIMEOUT:-20}

say() { printf '[vm-boot-check] %s\n' "$*"; }
die() { printf 'vm-boot-check: %s\n' "$1" >&2; exit "${2:-1}"; }
trap 'die "unexpected failure at line $LINENO"' ERR
source scripts/vm/qemu.sh
vm_preflight
case $ACCEL in kvm|tcg|auto) ;; *) die "RMPTWIN_VM_ACCEL must be kvm, tcg or auto, not \"$ACCEL\"" ;; esac

PROBE_LOG=
cleanup() { local rc=$?; trap - ERR; stop_qemu; [ -z "$PROBE_LOG" ] || rm -f "$PROBE_LOG"; exit "$rc"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for PATTERN LOGFILE SECONDS: 0 once the pattern is in the log, 1 on timeout, 2 if
# qemu exited first.
wait_for() {
  local deadline=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    grep -qa -- "$1" "$2" && return 0
    kill -0 "$QEMU_PID" 2>/dev/null || { grep -qa -- "$1" "$2" && return 0; return 2; }
    sleep 0.2
  done
  return 1
}

probe_kvm() {
  local key
  key="$(uname -r) $(qemu-system-x86_64 --version | head -n1) $(cat "$OUT/kernel-release" 2>/dev/null)"
  if [ -f "$PROBE_CACHE" ] && [ "$(tail -n +2 "$PROBE_CACHE")" = "$key" ]; then
    head -n1 "$PROBE_CACHE"; return
  fi
  local result=tcg
  if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    say "probing KVM (up to ${PROBE_TIMEOUT} s; the answer is kept in $PROBE_CACHE) ..." >&2
    PROBE_LOG=$(mktemp)
    # Only as far as the kernel handing over to the initramfs: a nested KVM that hangs does
    # so long before that, and stopping there costs a few seconds, not a whole boot.
    start_qemu kvm "$PROBE_LOG" "systemd.unit=emergency.target"
    if wait_for "Run /init as init process" "$PROBE_LOG" "$PROBE_TIMEOUT"; then result=kvm; fi
    stop_qemu
  fi
  printf '%s\n%s\n' "$result" "$key" >"$PROBE_CACHE"
  echo "$result"
}

if [ "${1:-}" = --probe-only ]; then
  probe_kvm
  exit 0
fi
if [ "$ACCEL" = auto ]; then
  ACCEL=$(probe_kvm)
  say "accelerator: $ACCEL$( [ "$ACCEL" = tcg ] && echo ' (KVM missing or its probe boot did not reach /init)')"
fi

say "booting $IMAGE under $ACCEL (timeout ${TIMEOUT} s, console in $CONSOLE) ..."
T0=$(date +%s.%N)
start_qemu "$ACCEL" "$CONSOLE" "quiet systemd.show_status=1"
rc=0
wait_for "RMPTWIN-VM-CHECK {" "$CONSOLE" "$TIMEOUT" || rc=$?
T1=$(date +%s.%N)
if [ "$rc" != 0 ]; then
  # No match is an answer here, not a failure.
  last=$(last_step "$CONSOLE")
  if [ -n "$last" ]; then
    where="the check's last step was \"$last\""
  else
    where="the console's last line was \"$(console_last_line "$CONSOLE")\""
  fi
  if [ "$rc" = 1 ]; then
    die "no check line within ${TIMEOUT} s under $ACCEL; $where (console: $CONSOLE)"
  fi
  die "qemu exited before the check line; $where (console: $CONSOLE)"
fi

# The guest powers off after the check; give it a little while, then qemu is killed anyway.
wait_for "reboot: Power down" "$CONSOLE" 120 || true
stop_qemu
T2=$(date +%s.%N)

line=$(grep -a "RMPTWIN-VM-CHECK {" "$CONSOLE" | tail -n1 | tr -d '\r' | sed 's/^.*RMPTWIN-VM-CHECK /RMPTWIN-VM-CHECK /')
echo "$line"
BOOT_S=$(awk "BEGIN{print $T1 - $T0}") TOTAL_S=$(awk "BEGIN{print $T2 - $T0}") VM_ACCEL=$ACCEL \
python3 - "${line#RMPTWIN-VM-CHECK }" <<'PY' || exit 1
import json, os, sys
r = json.loads(sys.argv[1])
rows = [
    ("accelerator", os.environ["VM_ACCEL"]),
    ("boot to check line (wall s)", f'{float(os.environ["BOOT_S"]):.1f}'),
    ("until powered off (wall s)", f'{float(os.environ["TOTAL_S"]):.1f}'),
    ("guest uptime at check (s)", r.get("guest_uptime_s")),
    ("kernel", r.get("kernel")),
    ("sch_netem + netem qdisc", r.get("sch_netem")),
    ("openvswitch module", r.get("openvswitch_module")),
    ("OVS kernel datapath bridge", r.get("kernel_datapath")),
    ("ovs-vswitchd", r.get("ovs_vswitchd")),
    ("mininet", r.get("mininet")),
    ("python", r.get("python")),
]
for k, v in rows:
    print(f"[vm-boot-check]   {k:<28} {v}")
ok = r.get("sch_netem") is True and r.get("kernel_datapath") is True and r.get("openvswitch_module") is True
print("[vm-boot-check] " + ("ok: netem and the kernel OVS datapath work in the VM" if ok
                            else "FAILED: netem or the kernel OVS datapath did not work (see build/vm/console.log)"))
sys.exit(0 if ok else 1)
PY
