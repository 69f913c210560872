# Sourced by boot-check.sh and test-vm.sh: what both do with the image's qemu. The caller sets
# OUT and IMAGE and defines die() (its one-line errors) before sourcing this.

# The image and qemu are there, or one line saying what to run.
vm_preflight() {
  local f
  for f in "$IMAGE" "$OUT/vmlinuz" "$OUT/initrd.img"; do
    [ -f "$f" ] || die "$f is missing: run \`sudo make vm-image\` first"
  done
  command -v qemu-system-x86_64 >/dev/null \
    || die "qemu-system-x86_64 is missing: apt-get install qemu-system-x86 (or run \`sudo make vm-image\`)"
}

QEMU_PID=
# start_qemu ACCEL LOGFILE APPEND [QEMU ARGS...]: the image booted in the background, no network
# device (-nic none: nothing the guest does leaves the VM), -snapshot (the image never changes),
# its console (stdout) to LOGFILE, APPEND added to the kernel command line.
# RMPTWIN_VM_MEMORY_MB (6144): the guest's memory. The quickstart's 31 node processes, Open
# vSwitch and the controller outgrew 2048: the kernel's OOM killer took the runner after 6 min.
start_qemu() {
  local accel=$1 log=$2 append=$3 cpu=max
  shift 3
  [ "$accel" = kvm ] && cpu=host
  qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -m "${RMPTWIN_VM_MEMORY_MB:-6144}" -smp 2 \
    -nographic -no-reboot -nic none -snapshot \
    -drive "file=$IMAGE,format=raw,if=virtio" "$@" \
    -kernel "$OUT/vmlinuz" -initrd "$OUT/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1 $append" \
    </dev/null >"$log" 2>&1 &
  QEMU_PID=$!
  # Its end is read from the console and kill -0; disowned, bash does not add a job line
  # ("Aborted ...") to the caller's one-line errors when qemu itself fails.
  disown "$QEMU_PID"
}

# qemu asked to stop, then killed; nothing left running.
stop_qemu() {
  [ -n "$QEMU_PID" ] || return 0
  if kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$QEMU_PID" 2>/dev/null || true
  fi
  wait "$QEMU_PID" 2>/dev/null || true
  QEMU_PID=
}

# last_step LOGFILE: the guest's last "RMPTWIN-VM-STEP <step>" marker (empty if none).
last_step() {
  { grep -a "RMPTWIN-VM-STEP" "$1" || true; } | tail -n1 | tr -d '\r' | sed 's/^.*RMPTWIN-VM-STEP //'
}

# console_last_line LOGFILE: the console's last non-blank line, colours stripped, cut to 120.
console_last_line() {
  { grep -av '^[[:space:]]*$' "$1" || true; } | tail -n1 | tr -d '\r' | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-120
}
