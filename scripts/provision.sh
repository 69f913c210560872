#!/usr/bin/env bash
# Idempotent set-up of a Debian 12 machine (or the Vagrant VM) for rmptwin.
# Installs only what is missing; safe to run before every `make run` / `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
STAMP="$VENV/.provisioned"

APT_PACKAGES=(
  mininet openvswitch-switch            # emulated network (Mininet 2.3 for /usr/bin/python3)
  docker.io debootstrap                 # container nodes; base image without a registry
  etcd-server etcd-client               # fault-tolerant CAS sequencer for the venues
  tshark tcpdump                        # captures and MoldUDP64 decoding
  iproute2 iputils-ping ethtool net-tools nftables
  python3-venv python3-dev python3-pip
  openjdk-17-jre-headless               # Spark
  chromium                              # report screenshots in tests
  make git sqlite3
)

say() { printf '[provision] %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "rmptwin: provisioning needs root (apt-get, Open vSwitch, dockerd); run as root or with sudo" >&2
  exit 1
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The distribution's services must not grab the machine: the project starts OVS,
# dockerd and etcd itself, with its own options, when a run or a test needs them.
for svc in etcd docker containerd; do
  if command -v systemctl >/dev/null && systemctl is-enabled "$svc" >/dev/null 2>&1; then
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
  fi
done

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV from /usr/bin/python3 (system site packages, for Mininet)"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ requirements.lock -nt "$STAMP" ]; then
  say "installing Python dependencies"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -c requirements.lock -e '.[dev]'
  touch "$STAMP"
fi
say "ready"
