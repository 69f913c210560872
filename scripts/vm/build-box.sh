#!/usr/bin/env bash
# `make vm-box`: a Vagrant box for the libvirt provider made from the VM image
# (build/vm/rootfs.raw, `make vm-image`), so `vagrant up` boots the same Debian 12 and the same
# kernel (sch_netem, the openvswitch module) that `make test-vm` does.
#
# The image is copied, grown and loop-mounted; in a chroot of it:
#   - scripts/provision.sh runs on a copy of this checkout at /vagrant, as `make run`
#     would in the VM: every Debian package it lists, and /vagrant/.venv with the lock's
#     packages. The Vagrantfile's rsync leaves .venv/ alone, so the VM's first `make run`
#     finds it ready;
#   - the node image and its base are saved in (`rmptwin image save`), where `rmptwin run` in
#     the VM loads them from: the box's network is host-only, there is no Debian mirror to
#     build them from;
#   - what Vagrant needs of a box: the vagrant user with Vagrant's insecure key and sudo, sshd
#     (host keys made at each VM's first boot), rsync, DHCP on the management network.
# The image's own boot unit (the one that runs a test-vm part and powers off) is removed.
# The file system then goes into a partitioned disk that boots by itself (SYSLINUX's MBR and
# EXTLINUX): a box whose kernel lay beside its disk (qemu -kernel, as test-vm boots) would
# need libvirt's qemu user to read the box directory in the Vagrant user's home, which
# Debian makes private.
#
# Output: build/vm/rmptwin-bookworm.box (a tar: metadata.json, Vagrantfile, box.img), rebuilt
# only when its inputs changed, then `vagrant box add`ed as rmptwin/bookworm.
set -eEuo pipefail
cd "$(dirname "$0")/../.."

OUT=build/vm
IMAGE=$OUT/rootfs.raw
BOX=$OUT/rmptwin-bookworm.box
BOX_NAME=${RMPTWIN_VM_BOX_NAME:-rmptwin/bookworm}
HASHFILE=$OUT/box.hash
LOG=$OUT/box-build.log
WORK=$OUT/box
BOX_GB=${RMPTWIN_VM_BOX_GB:-24}     # the guest's disk (sparse; a quickstart run needs ~1 GB)
PART_START_MB=1                     # where partitioning tools put the first partition
NEED_GB=12
HOST_PACKAGES=(vagrant vagrant-libvirt libvirt-daemon-system qemu-utils e2fsprogs fdisk extlinux syslinux-common)
BOX_PACKAGES=(rsync)                # besides provision.sh's: Vagrant's synced folder
MBR=/usr/lib/syslinux/mbr/mbr.bin

say() { printf '[vm-box] %s\n' "$*"; }
die() { printf 'vm-box: %s\n' "$1" >&2; exit "${2:-1}"; }
source scripts/vm/build-lib.sh

[ "$(id -u)" = 0 ] || die "building the box needs root (loop mount, chroot): run \`sudo make vm-box\`" 2
{ [ -f "$IMAGE" ] && [ -f "$OUT/image.hash" ]; } || die "$IMAGE is missing: run \`sudo make vm-image\` first" 2

inputs_hash() {
  { cat "$OUT/image.hash" scripts/vm/build-box.sh scripts/vm/build-lib.sh scripts/provision.sh requirements.lock pyproject.toml
    cat nodes/*; } | sha256sum | cut -d' ' -f1
}

box_added() { command -v vagrant >/dev/null && vagrant box list 2>/dev/null | grep -q "^$BOX_NAME .*libvirt"; }

if [ -f "$BOX" ] && [ -f "$HASHFILE" ] && [ "$(cat "$HASHFILE")" = "$(inputs_hash)" ] && box_added; then
  say "up to date: $BOX (added as $BOX_NAME)"
  exit 0
fi

need_free_gb "$NEED_GB" "the box"

STEP=start
trap 'die "step \"$STEP\" failed; its output is in $LOG"' ERR
: >"$LOG"

STEP="install host packages"
install_host_packages "${HOST_PACKAGES[@]}"
INSECURE_KEY=$(find /usr/share /usr/lib -path '*vagrant*/keys/vagrant.pub' 2>/dev/null | head -n1)
[ -n "$INSECURE_KEY" ] || die "Vagrant's insecure public key (keys/vagrant.pub) is not where Debian's vagrant package puts it: reinstall vagrant"

# Everything mounted under the box's root is unmounted (deepest first) on any exit, the loop
# device with it; the work directory goes too.
MNT=
cleanup() {
  local rc=$?
  trap - ERR
  if [ -n "$MNT" ] && [ -d "$MNT" ]; then
    unmount_below "$MNT"
    umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
    rmdir "$MNT" 2>/dev/null || true
  fi
  rm -rf "$WORK" "$BOX.tmp"
  exit "$rc"
}
trap cleanup EXIT
trap "exit 130" INT TERM

in_root() { chroot "$MNT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

grow_image() {
  rm -rf "$WORK"
  mkdir -p "$WORK"
  cp --sparse=always "$IMAGE" "$WORK/fs.raw"
  truncate -s $((BOX_GB * 1024 - PART_START_MB))M "$WORK/fs.raw"
  e2fsck -fy "$WORK/fs.raw" || [ $? -le 1 ]
  resize2fs "$WORK/fs.raw"
}

mount_image() {
  MNT=$(mktemp -d /tmp/rmptwin-box.XXXXXX)
  mount -o loop "$WORK/fs.raw" "$MNT"
  mount -t proc proc "$MNT/proc"
  mount -t sysfs sysfs "$MNT/sys"
  mount --bind /dev "$MNT/dev"
  mount -t tmpfs tmpfs "$MNT/run"
  cp /etc/resolv.conf "$MNT/etc/resolv.conf"
}

# provision.sh as `make run` runs it in the VM, on the checkout's tracked files as they are here
# (the box's hash is of these): the Debian packages with apt (services held back by its
# policy-rc.d), the venv from the lock. pip trusts the host's CA bundle for this one install,
# as build-image.sh's venv does.
provision_in_box() {
  mkdir -p "$MNT/vagrant"
  git ls-files -z | tar --null -T - -cf - | tar -x -C "$MNT/vagrant"
  cp /etc/ssl/certs/ca-certificates.crt "$MNT/tmp/host-ca.crt"
  in_root apt-get update -q
  in_root apt-get install -y -q --no-install-recommends "${BOX_PACKAGES[@]}"
  in_root PIP_CERT=/tmp/host-ca.crt bash -c 'cd /vagrant && bash scripts/provision.sh'
  in_root apt-get clean
  rm -f "$MNT/tmp/host-ca.crt"
}

save_node_images() {
  mkdir -p "$MNT/var/lib/rmptwin"
  .venv/bin/rmptwin image save "$MNT/var/lib/rmptwin/node-images.tar"
}

configure_box() {
  echo rmptwin >"$MNT/etc/hostname"
  # test-vm's unit runs a part and powers off: a box boots to a normal system instead.
  in_root systemctl disable rmptwin-vm-check.service
  rm -f "$MNT/etc/systemd/system/rmptwin-vm-check.service"
  # The management network's DHCP (libvirt's dnsmasq), whatever the NIC is called.
  printf '%s\n' '[Match]' 'Name=en* eth*' '[Network]' 'DHCP=ipv4' >"$MNT/etc/systemd/network/80-vagrant.network"
  in_root systemctl enable systemd-networkd.service ssh.service
  # Vagrant's user: its insecure key (Vagrant swaps it for the VM's own at the first `vagrant
  # up`), sudo without a password, and /vagrant, the rsync target, as on Vagrant's own boxes.
  in_root id vagrant >/dev/null 2>&1 || in_root useradd -m -s /bin/bash vagrant
  install -d -m 700 "$MNT/home/vagrant/.ssh"
  install -m 600 "$INSECURE_KEY" "$MNT/home/vagrant/.ssh/authorized_keys"
  echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$MNT/etc/sudoers.d/vagrant"
  chmod 440 "$MNT/etc/sudoers.d/vagrant"
  in_root chown -R vagrant:vagrant /home/vagrant/.ssh /vagrant
  # Each VM makes its own host keys at its first boot (sshd -t fails without them).
  rm -f "$MNT"/etc/ssh/ssh_host_*
  mkdir -p "$MNT/etc/systemd/system/ssh.service.d"
  printf '%s\n' '[Service]' 'ExecStartPre=' 'ExecStartPre=/usr/bin/ssh-keygen -A' 'ExecStartPre=/usr/sbin/sshd -t' \
    >"$MNT/etc/systemd/system/ssh.service.d/rmptwin-host-keys.conf"
  echo 'UseDNS no' >"$MNT/etc/ssh/sshd_config.d/rmptwin-vagrant.conf"
  : >"$MNT/etc/machine-id"     # each VM gets its own (systemd makes it at first boot)
  rm -f "$MNT/etc/resolv.conf"
}

# EXTLINUX in the file system, booting the image's own kernel with the root found by its
# label, whatever the disk is called.
install_bootloader() {
  local kernel initrd
  kernel=$(cd "$MNT/boot" && ls vmlinuz-* | sort -V | tail -n1)
  initrd=$(cd "$MNT/boot" && ls initrd.img-* | sort -V | tail -n1)
  echo 'LABEL=rmptwin-root / ext4 defaults,errors=remount-ro 0 1' >"$MNT/etc/fstab"
  mkdir -p "$MNT/boot/extlinux"
  printf '%s\n' 'DEFAULT debian' 'PROMPT 0' 'TIMEOUT 1' 'SERIAL 0 115200' 'LABEL debian' \
    "  LINUX /boot/$kernel" \
    "  APPEND initrd=/boot/$initrd root=LABEL=rmptwin-root rw console=tty0 console=ttyS0 net.ifnames=0" \
    >"$MNT/boot/extlinux/extlinux.conf"
  extlinux --install "$MNT/boot/extlinux"
}

unmount_image() {
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$(realpath "$MNT")/" | sort -r); do umount "$m"; done
  umount "$MNT"
  rmdir "$MNT"
  MNT=
  e2fsck -fy "$WORK/fs.raw" || [ $? -le 1 ]
}

# The disk: one bootable partition at 1 MiB holding the file system, SYSLINUX's MBR before it.
# The box's own Vagrantfile is merged under the project's.
pack_box() {
  truncate -s "${BOX_GB}G" "$WORK/disk.raw"
  echo "start=$((PART_START_MB * 2048)), type=83, bootable" | sfdisk -q "$WORK/disk.raw"
  dd if="$WORK/fs.raw" of="$WORK/disk.raw" bs=1M seek="$PART_START_MB" conv=sparse,notrunc status=none
  dd if="$MBR" of="$WORK/disk.raw" bs=440 count=1 conv=notrunc status=none
  rm -f "$WORK/fs.raw"
  qemu-img convert -O qcow2 "$WORK/disk.raw" "$WORK/box.img"
  rm -f "$WORK/disk.raw"
  printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %d}\n' "$BOX_GB" >"$WORK/metadata.json"
  printf '%s\n' 'Vagrant.configure("2") do |config|' '  config.vm.provider :libvirt do |lv|' \
    '    lv.disk_bus = "virtio"' '  end' 'end' >"$WORK/Vagrantfile"
  tar -C "$WORK" -cf "$BOX.tmp" metadata.json Vagrantfile box.img
  mv "$BOX.tmp" "$BOX"
}

add_box() {
  vagrant box add --force --name "$BOX_NAME" "$BOX"
}

rm -f "$HASHFILE"
T0=$(date +%s)
timed "grow image" grow_image
timed mount mount_image
timed "provision (packages, venv)" provision_in_box
timed "node images" save_node_images
timed configure configure_box
timed bootloader install_bootloader
timed unmount unmount_image
timed "pack box" pack_box
timed "vagrant box add" add_box
inputs_hash >"$HASHFILE"

say "built $BOX ($(du -h "$BOX" | cut -f1)), added as $BOX_NAME"
print_times "[vm-box]" 28 "$T0"
