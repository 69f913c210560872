#!/bin/bash
# The VM image's one boot unit (rmptwin-vm-check.service, installed by build-image.sh) runs
# this; the unit powers the guest off when it ends. `rmptwin.run=` on the kernel command line
# picks what runs, so one image serves both host scripts:
#   check (the default, boot-check.sh): guest-check.sh, baked into the image;
#   selftest (test-vm.sh): mounts the checkout disk read-only and runs its
#     scripts/vm/guest-selftest.sh, so the test itself changes without an image rebuild.
set -u
run=check
for arg in $(cat /proc/cmdline); do
  case $arg in rmptwin.run=*) run=${arg#rmptwin.run=} ;; esac
done
case $run in
  check) exec /usr/local/sbin/rmptwin-vm-check ;;
  selftest)
    echo "RMPTWIN-VM-STEP mount"
    mkdir -p /mnt/rmptwin
    # noload: the disk is read-only, so ext4 must not try to replay a journal.
    if ! mount -t ext4 -o ro,noload /dev/vdb /mnt/rmptwin; then
      echo "RMPTWIN-VM-FAIL mount: /dev/vdb (the checkout disk) did not mount"
      exit 1
    fi
    exec /bin/bash /mnt/rmptwin/scripts/vm/guest-selftest.sh ;;
  *) echo "RMPTWIN-VM-FAIL boot: unknown rmptwin.run=$run"; exit 1 ;;
esac
