#!/usr/bin/env bash
# `make run`: run the default experiment end to end and print where its report is.
# Emulated (Mininet + containers) as root, else simulated; then analysed with Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
EXPERIMENT=${1:-experiments/quickstart.yaml}
NAME=$(basename "$EXPERIMENT" .yaml)
# Relative to the repository, so the printed report path is the same on the Vagrant host.
RUN_DIR=${RUN_DIR:-results/$NAME/make-run-$(date -u +%Y%m%dT%H%M%SZ)}
RMPTWIN=.venv/bin/rmptwin

# The nearest existing ancestor of the run directory must be writable (a read-only clone).
parent=$RUN_DIR
while [ ! -e "$parent" ]; do parent=$(dirname "$parent"); done
if [ ! -w "$parent" ]; then
  echo "rmptwin: $parent is not writable by $(id -un); give another place with RUN_DIR=/some/dir make run" >&2
  exit 1
fi
experiment_dir=$(dirname "$RUN_DIR")
experiment_dir_existed=$([ -e "$experiment_dir" ] && echo yes || echo no)

if [ "$(id -u)" = 0 ]; then
  # at the time dilation this host needs (rmptwin plan; a first run calibrates the host, ~6 min
  # on 2 CPUs), or at the one given: `make run TDF=16`
  "$RMPTWIN" run "$EXPERIMENT" --tdf "${TDF:-auto}" --out "$RUN_DIR"
else
  echo "rmptwin: not root, so simulating instead (emulation needs root for Open vSwitch, Mininet and dockerd: \`sudo make run\`)"
  "$RMPTWIN" sim "$EXPERIMENT" --out "$RUN_DIR"
fi
"$RMPTWIN" analyze "$RUN_DIR"

# A root run in a tree that belongs to someone else (`sudo make run` in a user's clone, the
# Vagrant VM's /vagrant) hands its results to the tree's owner, who can then move or delete them.
owner=$(stat -c %u:%g .)
if [ "$(id -u)" = 0 ] && [ "${owner%%:*}" != 0 ] && [[ $RUN_DIR == results/* ]]; then
  chown -R "$owner" "$RUN_DIR"
  if [ "$experiment_dir_existed" = no ]; then chown "$owner" "$experiment_dir"; fi
fi

if [ "$(pwd -P)" = /vagrant ]; then
  echo "rmptwin: in the Vagrant VM; on the host, \`make vm-results\` copies results/ back, then open the same path there"
fi
