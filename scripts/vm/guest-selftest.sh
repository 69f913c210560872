#!/bin/bash
# Runs in the VM (scripts/vm/test-vm.sh), from the checkout disk mounted read-only at
# /mnt/rmptwin by the image's guest-run.sh: the link self-test on netem links, with
# namespace hosts, with the image's venv and this checkout's code. Parameters come from the
# kernel command line (rmptwin.topology, .tdf, .count, .bwcount). Each step is announced on
# the console first, so the host names the step a failure or a hang stopped in; the last line
# is one JSON object the host parses. The guest has no network; nothing leaves it.
set -u
source "$(dirname "$0")/guest-env.sh"
topology=tests/emulation/vm_links.yaml tdf=8 count=1600 bwcount=500
for arg in $(cat /proc/cmdline); do
  case $arg in
    rmptwin.topology=*) topology=${arg#*=} ;;
    rmptwin.tdf=*) tdf=${arg#*=} ;;
    rmptwin.count=*) count=${arg#*=} ;;
    rmptwin.bwcount=*) bwcount=${arg#*=} ;;
  esac
done

step venv
t_venv=$(up)
venv_out=$("$PY" -c 'import os_ken.base.app_manager, mininet.net, rmptwin.cli.main' 2>&1)
venv_rc=$?
t_selftest=$(up)
rc=125 report=/run/rmptwin-selftest.json
if [ "$venv_rc" = 0 ]; then
  step selftest
  "$PY" -m rmptwin.cli.main net selftest "$SRC/$topology" --impair netem --nodes ns --tdf "$tdf" \
    --count "$count" --bw-count "$bwcount" --json "$report" --state-dir /run/rmptwin/selftest 2>&1
  rc=$?
else
  echo "$venv_out"
fi
t_end=$(up)

step report
RESULT_RC=$rc RESULT_VENV_RC=$venv_rc RESULT_REPORT=$report RESULT_TOPOLOGY=$topology \
RESULT_TDF=$tdf RESULT_COUNT=$count RESULT_BWCOUNT=$bwcount \
RESULT_T_VENV=$t_venv RESULT_T_SELFTEST=$t_selftest RESULT_T_END=$t_end \
/usr/bin/python3 - <<'PY'
import json, os, platform
e = os.environ
try:
    with open(e["RESULT_REPORT"]) as f:
        report = json.load(f)
except (OSError, ValueError):
    report = None
t_venv, t_st, t_end = (float(e[k]) for k in ("RESULT_T_VENV", "RESULT_T_SELFTEST", "RESULT_T_END"))
print("RMPTWIN-VM-SELFTEST " + json.dumps({
    "kernel": platform.release(),
    "topology": e["RESULT_TOPOLOGY"], "tdf": float(e["RESULT_TDF"]),
    "count": int(e["RESULT_COUNT"]), "bw_count": int(e["RESULT_BWCOUNT"]),
    "venv_ok": e["RESULT_VENV_RC"] == "0", "rc": int(e["RESULT_RC"]),
    # guest seconds since the kernel started when each step began, and the steps' lengths
    "guest_uptime_at_venv_s": t_venv, "venv_s": round(t_st - t_venv, 2),
    "selftest_s": round(t_end - t_st, 2), "report": report,
}), flush=True)
PY
[ "$rc" = 0 ]
