#!/bin/bash
# Container entry point: bring up loopback (Mininet configures the rest through its
# shell in our namespaces), then run the given command (default: sleep forever).
ip link set lo up 2>/dev/null || true
exec "$@"
