#!/bin/bash
# Runs in the VM (scripts/vm/test-vm.sh), from the checkout disk mounted read-only at
# /mnt/rmptwin: the three parts of `make test-vm` in one boot, so the boot and the venv's
# first imports are paid once under TCG. Each part is its own guest script and prints its own
# result line (RMPTWIN-VM-SELFTEST, -PYTEST, -EXPERIMENT); a part that fails does not stop the
# next. rmptwin.parts on the kernel command line picks the parts (default
# selftest,pytest,experiment). The last line is RMPTWIN-VM-DONE with each part's exit code.
set -u
here=$(dirname "$0")
parts=selftest,pytest,experiment
for arg in $(cat /proc/cmdline); do
  case $arg in rmptwin.parts=*) parts=${arg#*=} ;; esac
done
declare -A rc=()
IFS=, read -r -a names <<<"$parts"
for p in "${names[@]}"; do
  if [ -f "$here/guest-$p.sh" ]; then
    bash "$here/guest-$p.sh"
    rc[$p]=$?
  else
    echo "RMPTWIN-VM-FAIL $p: the checkout has no scripts/vm/guest-$p.sh"
    rc[$p]=127
  fi
done
line=
for p in "${names[@]}"; do line+="${line:+, }\"$p\": ${rc[$p]}"; done
echo "RMPTWIN-VM-DONE {$line}"
for p in "${names[@]}"; do [ "${rc[$p]}" = 0 ] || exit 1; done
