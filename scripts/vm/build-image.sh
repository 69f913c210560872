#!/usr/bin/env bash
# `make vm-image`: a Debian 12 disk image with a real Debian kernel (sch_netem and the
# openvswitch module), so the netem / kernel-OVS path can run in a VM on a machine whose own
# kernel has neither. Output in build/vm/: rootfs.raw (ext4, no partition table), vmlinuz and
# initrd.img (booted by qemu -kernel, so there is no bootloader to install), image.hash.
#
# The image is rebuilt only when this script, the guest package list, the guest scripts,
# guest-python.txt or requirements.lock changed (their hash is kept in image.hash); otherwise
# it says "up to date" at once.
#
# The guest has no network when it runs, so the project's Python packages go into a venv in
# the image here, /opt/rmptwin-venv: the lock's pins and hashes for the names in
# guest-python.txt, installed the way scripts/provision.sh installs the lock (Debian's python3,
# system site packages for Debian's Mininet). The project itself is not in the image:
# scripts/vm/test-vm.sh hands the guest the checkout on a second disk.
#
# debootstrap's minbase variant: the default variant adds every "important" package (cron,
# logrotate, editors, man-db, ...) that the check never uses and that would only make
# debootstrap slower and the image bigger; what the guest needs is listed in
# guest-packages.txt and installed on top.
#
# The root file system is built in a directory and turned into the image by
# `mkfs.ext4 -d`, so there is no loop device and nothing mounted but /proc and /sys in the
# chroot while packages install; both are unmounted and the directory removed on any exit.
set -eEuo pipefail
cd "$(dirname "$0")/../.."

OUT=build/vm
IMAGE=$OUT/rootfs.raw
HASHFILE=$OUT/image.hash
LOG=$OUT/build.log
PACKAGES=scripts/vm/guest-packages.txt
CHECK=scripts/vm/guest-check.sh
RUN=scripts/vm/guest-run.sh
PYLIST=scripts/vm/guest-python.txt
LOCK=requirements.lock
GUEST_VENV=/opt/rmptwin-venv
MIRROR=${RMPTWIN_VM_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
IMAGE_SIZE=${RMPTWIN_VM_IMAGE_SIZE:-4G}   # sparse: only what the tree uses takes disk
NEED_GB=6
HOST_PACKAGES=(debootstrap qemu-system-x86 qemu-utils e2fsprogs)

say() { printf '[vm-image] %s\n' "$*"; }
die() { printf 'vm-image: %s\n' "$1" >&2; exit "${2:-1}"; }
source scripts/vm/build-lib.sh

inputs_hash() { cat scripts/vm/build-image.sh scripts/vm/build-lib.sh "$PACKAGES" "$CHECK" "$RUN" "$PYLIST" "$LOCK" | sha256sum | cut -d' ' -f1; }

if [ -f "$HASHFILE" ] && [ -f "$IMAGE" ] && [ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initrd.img" ] \
   && [ "$(cat "$HASHFILE")" = "$(inputs_hash)" ]; then
  say "up to date: $IMAGE ($(cat "$OUT/kernel-release" 2>/dev/null || echo '?'))"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "building the VM image needs root (debootstrap, chroot): run \`sudo make vm-image\`" 2
need_free_gb "$NEED_GB" "the image"

# From here every failure is one line naming the step and the log, never a bash trace.
STEP=start
trap 'die "step \"$STEP\" failed; its output is in $LOG"' ERR

: >"$LOG"
STEP="install host packages"
install_host_packages "${HOST_PACKAGES[@]}"

# Every child of the chroot directory that is a mount point is unmounted (deepest first)
# before anything is removed, and rm stays on this file system, so a failed unmount can
# never make rm reach into the host's /proc or /sys.
ROOT=
cleanup() {
  local rc=$?
  trap - ERR
  if [ -n "$ROOT" ] && [ -d "$ROOT" ]; then
    unmount_below "$ROOT"
    if findmnt -rn -o TARGET | grep -qF "$(realpath "$ROOT")/"; then
      printf 'vm-image: could not unmount everything under %s: unmount it by hand, then remove it\n' "$ROOT" >&2
    else
      rm -rf --one-file-system "$ROOT"
    fi
  fi
  rm -f "$OUT/rootfs.raw.tmp"
  exit "$rc"
}
trap cleanup EXIT
trap "exit 130" INT TERM
# A build interrupted by an earlier crash of this script may have left a directory behind.
for old in "$OUT"/rootfs.tree.*; do
  [ -d "$old" ] && ! findmnt -rn -o TARGET | grep -qF "$(realpath "$old")/" && rm -rf --one-file-system "$old"
done
ROOT=$(mktemp -d "$OUT/rootfs.tree.XXXXXX")
chmod 755 "$ROOT"
rm -f "$HASHFILE"

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

guest_packages() { sed -e 's/#.*//' -e 's/[[:space:]]//g' "$PACKAGES" | grep -v '^$'; }

install_guest_packages() {
  cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
EOF
  # No service may start inside the chroot while its package installs.
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod 755 "$ROOT/usr/sbin/policy-rc.d"
  mount -t proc proc "$ROOT/proc"
  mount -t sysfs sysfs "$ROOT/sys"
  in_root apt-get update -q
  mapfile -t pkgs < <(guest_packages)
  in_root apt-get install -y -q --no-install-recommends "${pkgs[@]}"
  in_root apt-get clean
  rm -f "$ROOT/usr/sbin/policy-rc.d"
  umount "$ROOT/sys" "$ROOT/proc"
}

lock_subset() { # the stanzas (pin and hashes) of the lock for guest-python.txt's names
  awk 'function norm(s) { s = tolower(s); gsub(/[-_.]+/, "-", s); return s }
    FNR == NR { sub(/#.*/, ""); if (NF) want[norm($1)] = 1; next }
    /^[A-Za-z0-9]/ { n = $1; sub(/[=;<>!~ ].*/, "", n); keep = (norm(n) in want); if (keep) got[norm(n)] = 1 }
    keep && !/^[[:space:]]*#/ { print }
    END { for (n in want) if (!(n in got)) { print "not in the lock: " n > "/dev/stderr"; bad = 1 }; exit bad }' \
    "$PYLIST" "$LOCK"
}

# --force-reinstall, as in provision.sh: every pinned package lands in the venv itself, even
# where a Debian python3-* package (a dependency of mininet) has one, so nothing unpinned is
# imported. pip builds the lock's one sdist it needs (ovs) here, with the chroot's network.
# pip trusts the host's CA bundle for this one install: the download goes through the host's
# network, which may sit behind a TLS proxy only the host's bundle knows; the copy is removed.
install_venv() {
  lock_subset >"$ROOT/tmp/rmptwin-lock.txt"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/tmp/host-ca.crt"
  mount -t proc proc "$ROOT/proc"
  mount -t sysfs sysfs "$ROOT/sys"
  in_root /usr/bin/python3 -m venv --system-site-packages "$GUEST_VENV"
  # PIP_CERT, not --cert: the sdist build's own pip (for its build dependencies) reads it too.
  in_root HOME=/root PIP_CERT=/tmp/host-ca.crt "$GUEST_VENV/bin/python" -m pip install -q --no-cache-dir \
    --disable-pip-version-check --require-hashes --no-deps --force-reinstall -r /tmp/rmptwin-lock.txt
  in_root "$GUEST_VENV/bin/python" -c 'import os_ken.base.app_manager, pydantic, typer, pandas, pyarrow, mininet.net'
  umount "$ROOT/sys" "$ROOT/proc"
  rm -f "$ROOT/tmp/rmptwin-lock.txt" "$ROOT/tmp/host-ca.crt"
}

check_modules() {
  local found
  found=$(find "$ROOT"/lib/modules \( -name 'sch_netem*' -o -name 'openvswitch*' \) -printf '%f\n')
  echo "$found"
  grep -q '^sch_netem' <<<"$found" && grep -q '^openvswitch' <<<"$found"
}

configure_guest() {
  echo rmptwin-vm >"$ROOT/etc/hostname"
  echo '/dev/vda / ext4 defaults,errors=remount-ro 0 1' >"$ROOT/etc/fstab"
  in_root passwd -d root
  install -m 755 "$CHECK" "$ROOT/usr/local/sbin/rmptwin-vm-check"
  install -m 755 "$RUN" "$ROOT/usr/local/sbin/rmptwin-vm-run"
  # The unit runs once the system is up, prints on the serial console, and its end (either
  # way) powers the guest off, so qemu -no-reboot exits by itself. What it runs is chosen on
  # the kernel command line (guest-run.sh), so one image serves the boot check and the test.
  # No start timeout: under TCG the self-test takes minutes; the host bounds the whole boot.
  cat >"$ROOT/etc/systemd/system/rmptwin-vm-check.service" <<'EOF'
[Unit]
Description=rmptwin VM run: the boot check or the link self-test
After=basic.target openvswitch-switch.service
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/rmptwin-vm-run
TimeoutStartSec=infinity
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
EOF
  in_root systemctl enable rmptwin-vm-check.service
  # There is no network device in the check's VM: waiting for one only delays boot.
  in_root systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer
}

extract_kernel() {
  local vmlinuz initrd
  vmlinuz=$(ls "$ROOT"/boot/vmlinuz-* | sort -V | tail -n1)
  initrd=$(ls "$ROOT"/boot/initrd.img-* | sort -V | tail -n1)
  cp "$vmlinuz" "$OUT/vmlinuz"
  cp "$initrd" "$OUT/initrd.img"
  basename "$vmlinuz" | sed 's/^vmlinuz-//' >"$OUT/kernel-release"
}

make_image() {
  rm -f "$OUT/rootfs.raw.tmp"
  mkfs.ext4 -q -F -L rmptwin-root -E root_owner=0:0 -d "$ROOT" "$OUT/rootfs.raw.tmp" "$IMAGE_SIZE"
  mv "$OUT/rootfs.raw.tmp" "$IMAGE"
}

T0=$(date +%s)
timed debootstrap debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR"
timed packages install_guest_packages
STEP="module check"
if ! check_modules >>"$LOG" 2>&1; then
  die "the guest kernel has no sch_netem or openvswitch module (find /lib/modules in the image found none): check linux-image-cloud-amd64 in $PACKAGES"
fi
timed "python venv" install_venv
timed configure configure_guest
timed "kernel extraction" extract_kernel
timed "image file" make_image
inputs_hash >"$HASHFILE"

say "built $IMAGE ($(du -h --apparent-size "$IMAGE" | cut -f1) apparent, $(du -h "$IMAGE" | cut -f1) on disk), kernel $(cat "$OUT/kernel-release")"
print_times "[vm-image]" 18 "$T0"
