#!/usr/bin/env bash
# `make vm-run`: the Vagrant path end to end. `vagrant up` (the provisioner runs
# scripts/provision.sh in the VM), `make run` in the VM, its results/ copied back here
# (`make vm-results`), the report's path printed (and opened where there is a desktop), and
# the VM destroyed: what this made (the VM, its disk volume, the libvirt network of the
# rmptwin/bookworm box, a libvirtd it started) is gone when it ends, also after a failure.
#
# RMPTWIN_VM_KEEP=1 keeps the VM (and libvirtd) for more runs; `vagrant destroy -f` removes it.
# RMPTWIN_VM_BOX: the box; rmptwin/bookworm where `make vm-box` added it, else debian/bookworm64.
# RMPTWIN_VM_DRIVER (libvirt): kvm or qemu; by default what the VM image's KVM probe finds
#   (scripts/vm/boot-check.sh --probe-only, where `make vm-image` built the image: nested KVM
#   opens /dev/kvm and then hangs), else kvm where /dev/kvm opens.
# RMPTWIN_VM_TDF: the time dilation factor of the run in the VM (default auto: `rmptwin plan`
#   calibrates the VM first, four emulated runs; under TCG that takes hours, so give a factor).
set -euo pipefail
cd "$(dirname "$0")/../.."

EXPERIMENT=${1:-experiments/quickstart.yaml}
NAME=$(basename "$EXPERIMENT" .yaml)
OUT=build/vm
LOG=$OUT/vagrant-run.log
NETWORK=rmptwin-vagrant

say() { printf '[vm-run] %s\n' "$*"; }
die() { printf 'vm-run: %s\n' "$1" >&2; exit "${2:-1}"; }

command -v vagrant >/dev/null || die "vagrant is missing: apt-get install vagrant vagrant-libvirt (docs/vagrant.md)" 2
[ -f "$EXPERIMENT" ] || die "no experiment $EXPERIMENT: give one of experiments/*.yaml as EXPERIMENT=" 2
mkdir -p "$OUT" results
: >"$LOG"

PROVIDER=${VAGRANT_DEFAULT_PROVIDER:-}
if [ -z "$PROVIDER" ]; then
  if vagrant plugin list 2>/dev/null | grep -q '^vagrant-libvirt'; then PROVIDER=libvirt; else PROVIDER=virtualbox; fi
fi
export VAGRANT_DEFAULT_PROVIDER=$PROVIDER

if [ -z "${RMPTWIN_VM_BOX:-}" ]; then
  RMPTWIN_VM_BOX=debian/bookworm64
  if vagrant box list 2>/dev/null | grep -q "^rmptwin/bookworm .*$PROVIDER"; then RMPTWIN_VM_BOX=rmptwin/bookworm; fi
fi
export RMPTWIN_VM_BOX

STARTED_LIBVIRTD=
if [ "$PROVIDER" = libvirt ]; then
  if [ -z "${RMPTWIN_VM_DRIVER:-}" ]; then
    accel=
    [ -f "$OUT/rootfs.raw" ] && accel=$(bash scripts/vm/boot-check.sh --probe-only 2>/dev/null | tail -n1)
    case $accel in
      kvm) RMPTWIN_VM_DRIVER=kvm ;;
      tcg) RMPTWIN_VM_DRIVER=qemu ;;
      *) if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then RMPTWIN_VM_DRIVER=kvm; else RMPTWIN_VM_DRIVER=qemu; fi ;;
    esac
  fi
  export RMPTWIN_VM_DRIVER
  # libvirtd: started here if nothing runs it (no systemd in a container), stopped at the end.
  if ! virsh -c qemu:///system version >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "libvirtd is not running: start it (sudo systemctl start libvirtd) and run this again" 2
    if [ -d /run/systemd/system ]; then
      systemctl start libvirtd
    else
      pgrep -x virtlogd >/dev/null || virtlogd -d
      libvirtd -d
      STARTED_LIBVIRTD=yes
    fi
    for _ in $(seq 50); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.2; done
    virsh -c qemu:///system version >/dev/null 2>&1 || die "libvirtd did not answer after starting it: see its log (journalctl -u libvirtd, /var/log/libvirt)"
  fi
fi

finish() {
  local rc=$?
  if [ "${RMPTWIN_VM_KEEP:-}" = 1 ]; then
    say "the VM is kept (RMPTWIN_VM_KEEP=1): \`vagrant destroy -f\` removes it"
    exit "$rc"
  fi
  say "destroying the VM"
  vagrant destroy -f >>"$LOG" 2>&1 || say "vagrant destroy failed; see $LOG"
  if [ "$PROVIDER" = libvirt ]; then
    if virsh -c qemu:///system net-info "$NETWORK" >/dev/null 2>&1; then
      virsh -c qemu:///system net-destroy "$NETWORK" >>"$LOG" 2>&1 || true
      virsh -c qemu:///system net-undefine "$NETWORK" >>"$LOG" 2>&1 || true
    fi
    # vagrant-libvirt keeps the box's disk in the pool for the next VM; this run uploaded it.
    local vol
    for vol in $(virsh -c qemu:///system vol-list default 2>/dev/null | awk -v b="${RMPTWIN_VM_BOX//\//-VAGRANTSLASH-}_vagrant_box_image_" 'index($1, b) == 1 {print $1}'); do
      virsh -c qemu:///system vol-delete --pool default "$vol" >>"$LOG" 2>&1 || true
    done
  fi
  if [ -n "$STARTED_LIBVIRTD" ]; then
    pkill -x libvirtd || true
    pkill -x virtlogd || true
  fi
  exit "$rc"
}
trap finish EXIT
trap "exit 130" INT TERM

source scripts/vm/build-lib.sh   # elapsed, TIMES, ORDER, print_times
STEP=
step() { # step NAME COMMAND...: runs it, its output to the terminal and the log, and records its seconds
  local t0 rc
  STEP=$1; shift
  say "$STEP ..."
  t0=$(date +%s)
  # Vagrant redraws its upload progress with carriage returns: lines of their own, then dropped.
  set +e
  "$@" 2>&1 | stdbuf -oL tr '\r' '\n' | grep --line-buffered -v -e 'Progress: [0-9]*%' -e '^[[:space:]]*$' \
    | tee -a "$LOG" | sed -u 's/^/    /'
  rc=${PIPESTATUS[0]}
  set -e
  TIMES[$STEP]=$(elapsed "$t0")
  ORDER+=("$STEP")
  [ "$rc" = 0 ] || die "step \"$STEP\" failed after ${TIMES[$STEP]} s; its output is in $LOG"
  say "$STEP: ${TIMES[$STEP]} s"
}

say "box $RMPTWIN_VM_BOX, provider $PROVIDER${RMPTWIN_VM_DRIVER:+, domain type $RMPTWIN_VM_DRIVER}, experiment $EXPERIMENT"
T0=$(date +%s)
step "vagrant up" vagrant up --provider "$PROVIDER"
step "make run in the VM" vagrant ssh -c "cd /vagrant && sudo make run EXPERIMENT=$EXPERIMENT TDF=${RMPTWIN_VM_TDF:-auto}"
before=$(ls -d results/"$NAME"/make-run-* 2>/dev/null | sort || true)
step "make vm-results" make --no-print-directory vm-results
run_dir=$(comm -13 <(echo "$before") <(ls -d results/"$NAME"/make-run-* 2>/dev/null | sort) | tail -n1)
[ -n "$run_dir" ] || run_dir=$(ls -d results/"$NAME"/make-run-* 2>/dev/null | sort | tail -n1)
report=$run_dir/analysis/report.html
[ -f "$report" ] || die "the VM's run came back without its report ($report): see $LOG"

print_times "[vm-run]" 22 "$T0"
say "report: $report"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && command -v xdg-open >/dev/null; then
  xdg-open "$report" >/dev/null 2>&1 || true
fi
