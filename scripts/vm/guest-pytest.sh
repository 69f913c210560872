#!/bin/bash
# Runs in the VM (scripts/vm/test-vm.sh's pytest step), from the checkout disk mounted
# read-only at /mnt/rmptwin: the controller and Mininet tests on the path a Debian machine
# takes, Open vSwitch's kernel datapath and netem links (the tests' `impair="auto"` picks
# netem where the kernel has it). rmptwin.tests on the kernel command line: the test paths,
# comma-separated. Docker tests are deselected (the image has no Docker engine). Nothing is
# written next to the checkout: pytest's cache is off, hypothesis's database is in /var/tmp.
# The last line is one JSON object with pytest's counts.
set -u
source "$(dirname "$0")/guest-env.sh"
tests=tests/controllers,tests/emulation/test_network.py
for arg in $(cat /proc/cmdline); do
  case $arg in rmptwin.tests=*) tests=${arg#*=} ;; esac
done
WORK=/var/tmp/rmptwin-pytest
mkdir -p "$WORK"
cd "$WORK" || exit 1
paths=()
IFS=, read -r -a rel <<<"$tests"
for p in "${rel[@]}"; do paths+=("$SRC/$p"); done

step pytest
t0=$(up)
"$VENV/bin/python" -m pytest -p no:cacheprovider --rootdir "$SRC" -c "$SRC/pyproject.toml" \
  -m "not docker" -q --durations=10 --junitxml "$WORK/junit.xml" "${paths[@]}" 2>&1
rc=$?
t1=$(up)
if [ "$rc" != 0 ]; then
  # The guest's files are gone with the boot: what a failed network left is shown here.
  for log in /tmp/pytest-of-root/pytest-*/net-*/controller.log; do
    [ -f "$log" ] || continue
    echo "--- the last lines of $log"
    tail -n 40 "$log"
  done
fi

step report
RESULT_RC=$rc RESULT_TESTS=$tests RESULT_S=$(awk "BEGIN{print $t1 - $t0}") RESULT_JUNIT=$WORK/junit.xml \
/usr/bin/python3 - <<'PY'
import json, os, platform
import xml.etree.ElementTree as ET
e = os.environ
counts = {}
try:
    suite = ET.parse(e["RESULT_JUNIT"]).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["failed_names"] = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
                              if c.find("failure") is not None or c.find("error") is not None][:10]
except (OSError, ET.ParseError, AttributeError):
    pass
print("RMPTWIN-VM-PYTEST " + json.dumps({
    "kernel": platform.release(), "paths": e["RESULT_TESTS"].split(","), "rc": int(e["RESULT_RC"]),
    "pytest_s": round(float(e["RESULT_S"]), 2), **counts,
}), flush=True)
PY
[ "$rc" = 0 ]
