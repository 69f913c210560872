#!/usr/bin/env bash
# `make run`: run the default experiment end to end and print where its report is.
# Emulated (Mininet + containers) where this machine can, else simulated; then analysed.
set -euo pipefail
cd "$(dirname "$0")/.."
EXPERIMENT=${1:-experiments/quickstart.yaml}
NAME=$(basename "$EXPERIMENT" .yaml)
RUN_DIR=${RUN_DIR:-results/$NAME/make-run-$(date -u +%Y%m%dT%H%M%SZ)}
RMPTWIN=.venv/bin/rmptwin

if [ "$(id -u)" = 0 ]; then
  "$RMPTWIN" run "$EXPERIMENT" --out "$RUN_DIR"
else
  echo "rmptwin: emulation needs root (Open vSwitch, Mininet, dockerd); simulating instead"
  "$RMPTWIN" sim "$EXPERIMENT" --out "$RUN_DIR"
fi
"$RMPTWIN" analyze "$RUN_DIR"
