#!/bin/bash
# The VM image's one boot unit (rmptwin-vm-check.service, installed by build-image.sh) runs
# this; the unit powers the guest off when it ends. `rmptwin.run=` on the kernel command line
# picks what runs, so one image serves every host script:
#   check (the default, boot-check.sh): guest-check.sh, baked into the image;
#   NAME (test-vm.sh: selftest, suite, ...): mounts the checkout disk read-only and runs its
#     scripts/vm/guest-NAME.sh, so the tests themselves change without an image rebuild.
set -u
run=check
for arg in $(cat /proc/cmdline); do
  case $arg in rmptwin.run=*) run=${arg#rmptwin.run=} ;; esac
done
case $run in
  check) exec /usr/local/sbin/rmptwin-vm-check ;;
  *[!a-z-]*|'') echo "RMPTWIN-VM-FAIL boot: rmptwin.run=$run is not a guest script's name"; exit 1 ;;
esac
echo "RMPTWIN-VM-STEP mount"
mkdir -p /mnt/rmptwin
# noload: the disk is read-only, so ext4 must not try to replay a journal.
if ! mount -t ext4 -o ro,noload /dev/vdb /mnt/rmptwin; then
  echo "RMPTWIN-VM-FAIL mount: /dev/vdb (the checkout disk) did not mount"
  exit 1
fi
script=/mnt/rmptwin/scripts/vm/guest-$run.sh
if [ ! -f "$script" ]; then
  echo "RMPTWIN-VM-FAIL boot: unknown rmptwin.run=$run (the checkout has no scripts/vm/guest-$run.sh)"
  exit 1
fi
exec /bin/bash "$script"
