#!/bin/bash
# Runs in the VM (scripts/vm/test-vm.sh's experiment step), from the checkout disk mounted
# read-only at /mnt/rmptwin: one experiment emulated on the path a Debian machine takes,
# Mininet's TCLink with netem and Open vSwitch's kernel datapath, with namespace hosts and the
# image's venv. Parameters come from the kernel command line: rmptwin.experiment (a path in the
# checkout), rmptwin.exptdf (its time dilation
# factor), rmptwin.seed. The run directory goes back to the host as one tar
# archive written straight onto the results disk (/dev/vdc, raw: the guest has no network and
# its kernel no 9p); the host compares it with the simulator. The last line is one JSON object.
set -u
source "$(dirname "$0")/guest-env.sh"
WORK=/var/tmp/rmptwin-vm
experiment=experiments/quickstart.yaml tdf=8 seed=
for arg in $(cat /proc/cmdline); do
  case $arg in
    rmptwin.experiment=*) experiment=${arg#*=} ;;
    rmptwin.exptdf=*) tdf=${arg#*=} ;;
    rmptwin.seed=*) seed=${arg#*=} ;;
  esac
done

step experiment
t_run=$(up)
mkdir -p "$WORK/results"
out=$WORK/results/run
# The seed of the experiment unless rmptwin.seed says otherwise; the host simulates the same.
"$PY" -m rmptwin.cli.main run "$SRC/$experiment" --nodes ns --impair netem --tdf "$tdf" \
  ${seed:+--seed "$seed"} --out "$out" 2>&1
rc=$?
t_end=$(up)

step results
tar_rc=1
if [ -d "$out" ]; then
  # The archive is the disk's only content; the host reads it back with tar -x.
  tar -C "$WORK/results" -cf /dev/vdc run && tar_rc=0
  sync
fi

step report
RESULT_RC=$rc RESULT_TAR=$tar_rc RESULT_EXPERIMENT=$experiment RESULT_TDF=$tdf \
RESULT_T_RUN=$t_run RESULT_T_END=$t_end RESULT_OUT=$out \
/usr/bin/python3 - <<'PY'
import json, os, platform
e = os.environ
summary = None
try:
    with open(os.path.join(e["RESULT_OUT"], "summary.json")) as f:
        summary = json.load(f)
except (OSError, ValueError):
    pass
print("RMPTWIN-VM-EXPERIMENT " + json.dumps({
    "kernel": platform.release(), "experiment": e["RESULT_EXPERIMENT"], "tdf": e["RESULT_TDF"],
    "rc": int(e["RESULT_RC"]), "archived": e["RESULT_TAR"] == "0",
    "run_s": round(float(e["RESULT_T_END"]) - float(e["RESULT_T_RUN"]), 2),
    "summary": summary,
}), flush=True)
PY
[ "$rc" = 0 ] && [ "$tar_rc" = 0 ]
