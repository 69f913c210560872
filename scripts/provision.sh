#!/usr/bin/env bash
# Idempotent set-up of a Debian 12 machine (or the Vagrant VM) for rmptwin; `make run`,
# `make test` and `make bench` call it first. With --compiled (make compiled, make test,
# make bench) it also installs gcc and a browser and builds the compiled cores; make run never
# waits for those (the interpreted cores run where they are not built).
#
# With --server KEY it prepares a worker for runs spread over several machines
# (docs/cluster.md): the same packages and venv; then root may log in over SSH with the
# cluster's key (KEY.pub, from `rmptwin servers key` on the machine that starts runs), sshd
# lets it open Ethernet tunnels, and root's ssh uses KEY to open them to the other servers
# (Mininet's cluster edition opens each tunnel from one server to the other); and the node
# image is built in its Docker engine, for Docker hosts placed there.
#
# As root it installs only what is missing: Debian packages, the venv, the locked Python
# packages. It never stops, disables or removes anything the machine already had.
# As any other user it only checks. On a provisioned machine it says so and succeeds; on
# one that is not, it says in one line what to run as root and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

COMPILED=
SERVER_KEY=
case "${1:-}" in
  --compiled) COMPILED=yes ;;
  --server)
    SERVER_KEY=${2:-}
    if [ -z "$SERVER_KEY" ] || [ ! -f "$SERVER_KEY" ] || [ ! -f "$SERVER_KEY.pub" ]; then
      echo "rmptwin: --server needs the cluster key and its .pub (copied from \`rmptwin servers key\` on the machine that starts runs): scripts/provision.sh --server KEY" >&2
      exit 2
    fi ;;
esac
VENV=${VENV:-.venv}
LOCK=requirements.lock
STAMP="$VENV/.provisioned"
LOCKCHECK=src/rmptwin/lockcheck.py

APT_PACKAGES=(
  mininet openvswitch-switch            # emulated network (Mininet 2.3 for /usr/bin/python3)
  docker.io debootstrap                 # container nodes; base image without a registry
  apparmor                              # dockerd loads its container profile with apparmor_parser
                                        # where the kernel has AppArmor on (Debian's default)
  etcd-server etcd-client               # fault-tolerant CAS sequencer for the venues
  tshark tcpdump                        # captures and MoldUDP64 decoding
  iproute2 iputils-ping ethtool net-tools nftables
  python3-venv python3-dev python3-pip
  openjdk-17-jre-headless               # Spark
  make git sqlite3
  openssh-server openssh-client sudo    # several servers: Mininet's cluster edition (docs/cluster.md)
)
# Only with --compiled (make test, make bench), never for make run: mypyc compiles the cores
# (scripts/build_compiled.py; python3-dev already brings libc6-dev), the tests screenshot
# the reports in a headless browser, and bench_datapath holds the nodes' UDP loop to socat's.
BUILD_PACKAGES=(gcc libc6-dev chromium socat)

# A command already on PATH stands in for the package, so a machine with Docker's own
# docker-ce or an upstream etcd is left alone (apt would otherwise replace them).
declare -A PROVIDES=([docker.io]=dockerd [etcd-server]=etcd [etcd-client]=etcdctl)

# The project starts these daemons itself, with its own options, only while it needs them
# (src/rmptwin/emulation/env.py, src/rmptwin/node/etcd_cluster.py). When THIS run is what
# installs their package, the package must neither start them nor leave them enabled.
declare -A QUIET_UNITS=(
  [docker.io]="docker.service docker.socket"
  [containerd]="containerd.service"
  [etcd-server]="etcd.service"
  [openssh-server]="ssh.service ssh.socket"   # `servers up --local` runs its own sshd per server
)

say() { printf '[provision] %s\n' "$*"; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing_packages() {
  local p
  for p in "$@"; do
    installed "$p" && continue
    [ -n "${PROVIDES[$p]:-}" ] && command -v "${PROVIDES[$p]}" >/dev/null && continue
    echo "$p"
  done
}

dependency_hash() { cat pyproject.toml "$LOCK" | sha256sum | cut -d' ' -f1; }

# Why the venv is not ready (empty when it is): missing, older than the project's
# dependency files, or not what requirements.lock pins.
venv_problem() {
  if [ ! -x "$VENV/bin/python" ]; then echo "$VENV does not exist"; return; fi
  if [ ! -f "$STAMP" ]; then echo "$VENV was never fully provisioned"; return; fi
  # By content, not by date: a copy of the tree (a fresh clone, the Vagrant VM's rsync) is
  # newer than a venv made from the same files, and must not make an offline VM reinstall.
  if [ "$(cat "$STAMP")" != "$(dependency_hash)" ]; then
    echo "pyproject.toml or $LOCK changed since $VENV was provisioned"; return
  fi
  "$VENV/bin/python" "$LOCKCHECK" "$LOCK" --quiet 2>&1 >/dev/null | sed 's/^rmptwin: //' || true
}

check_only() {
  local missing problem
  missing=$(missing_packages "${APT_PACKAGES[@]}" | tr '\n' ' ')
  problem=$(venv_problem)
  if [ -z "$missing" ] && [ -z "$problem" ]; then
    say "ready (checked only: installing needs root)"
    return 0
  fi
  local why=${problem:-missing Debian packages: ${missing% }}
  echo "rmptwin: not set up yet ($why); run \`sudo make provision\` once, then run this again" >&2
  return 1
}

# Keep apt from starting the QUIET_UNITS daemons while it installs them. An existing
# policy-rc.d is the administrator's policy and is left as it is.
POLICY=/usr/sbin/policy-rc.d
hold_quiet_daemons() {
  [ -e "$POLICY" ] && return 0
  cat > "$POLICY" <<'EOF'
#!/bin/sh
# Written by rmptwin's scripts/provision.sh for one apt-get run, then removed.
case "${1%.service}" in docker|docker.socket|containerd|etcd|ssh|ssh.socket) exit 101 ;; esac
exit 0
EOF
  chmod 755 "$POLICY"
  trap 'rm -f "$POLICY"' EXIT
}

install_packages() {
  local missing=("$@") new_quiet=() p
  for p in "${!QUIET_UNITS[@]}"; do installed "$p" || new_quiet+=("$p"); done
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  hold_quiet_daemons
  apt-get update -qq
  # --no-remove: never take away a package the machine has to make room for one of ours.
  apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}" >/dev/null
  command -v systemctl >/dev/null || return 0
  local unit
  for p in "${new_quiet[@]}"; do
    installed "$p" || continue
    for unit in ${QUIET_UNITS[$p]}; do
      systemctl is-enabled --quiet "$unit" 2>/dev/null || continue
      if systemctl disable --quiet "$unit" 2>/dev/null; then
        say "disabled $unit, which installing $p just enabled (rmptwin starts the daemon when it needs it)"
      fi
    done
  done
}

install_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV from /usr/bin/python3 (system site packages, for Mininet)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
  fi
  say "installing the Python packages pinned in $LOCK into $VENV"
  # --force-reinstall puts every locked package in the venv itself, even where Debian's site
  # packages have the same version, so the venv never imports an unpinned copy.
  "$VENV/bin/python" -m pip install -q --require-hashes --no-deps --force-reinstall -r "$LOCK"
  "$VENV/bin/python" -m pip install -q --no-deps -e .
  "$VENV/bin/python" "$LOCKCHECK" "$LOCK" --pip-check
  dependency_hash >"$STAMP"
}

# The cores compiled by mypyc into build/compiled (rmptwin.corebuild loads them), rebuilt when
# a source they were built from changed; a fraction of a second's check otherwise. Without a
# compiler it says so in one line and the interpreted cores run; a failed build is not a
# failed set-up. The script hands a build made as root to the tree's owner itself.
build_compiled_cores() {
  "$VENV/bin/python" scripts/build_compiled.py | sed -u 's/^/[provision] /' || true
}

# A worker of a run over several machines: the starting machine's key may log in as root, and
# sshd allows it the Ethernet tunnels of Mininet's cluster edition. Both in files of their own,
# so that removing them undoes it; sshd is started (or reloaded) only if it was not running
# with them already.
prepare_server() {
  local key=$1 conf=/etc/ssh/sshd_config.d/rmptwin-cluster.conf
  install -d -m 700 /root/.ssh
  touch /root/.ssh/authorized_keys
  grep -qxF "$(cat "$key.pub")" /root/.ssh/authorized_keys || cat "$key.pub" >> /root/.ssh/authorized_keys
  install -m 600 "$key" /root/.ssh/rmptwin_cluster
  printf '%s\n' '# Written by rmptwin scripts/provision.sh --server (docs/cluster.md)' 'Host *' \
    '  IdentityFile /root/.ssh/rmptwin_cluster' '  StrictHostKeyChecking accept-new' > /etc/ssh/ssh_config.d/rmptwin-cluster.conf
  printf '%s\n' '# Written by rmptwin scripts/provision.sh --server (docs/cluster.md)' \
    'PermitRootLogin prohibit-password' 'PermitTunnel ethernet' 'MaxStartups 400:30:800' 'MaxSessions 400' > "$conf"
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl enable --now ssh >/dev/null 2>&1 || true
    systemctl reload ssh
  else
    /usr/sbin/sshd -t && { pkill -HUP -x sshd || /usr/sbin/sshd; }
  fi
  say "server ready: root may log in with $(basename "$key") and open Ethernet tunnels ($conf)"
  # Docker hosts placed here run the node image from this server's own engine (docs/cluster.md);
  # its tag is its definition's hash, so this checkout builds the one the starting machine asks
  # for. A server for namespace hosts only can do without it: a failed build is one line, not a
  # failed set-up.
  if "$VENV/bin/python" -m rmptwin.cli.main image build 2>&1 | sed -u 's/^/[provision] /'; then
    say "node image ready in this server's Docker engine"
  else
    say "the node image was not built (see above); Docker hosts cannot run here until \`rmptwin image build\` succeeds"
  fi
}

# Files made here as root in a tree that belongs to someone else (`sudo make provision` in a
# user's clone, the Vagrant VM's /vagrant) are handed to the tree's owner.
give_back_to_owner() {
  local owner
  owner=$(stat -c %u:%g .)
  [ "${owner%%:*}" = 0 ] && return 0
  chown -R "$owner" "$VENV" src/*.egg-info 2>/dev/null || true
}

if [ "$(id -u)" != 0 ]; then
  check_only
  if [ -n "$COMPILED" ]; then build_compiled_cores; fi
  exit
fi
mapfile -t missing < <(missing_packages "${APT_PACKAGES[@]}" ${COMPILED:+"${BUILD_PACKAGES[@]}"})
if [ ${#missing[@]} -gt 0 ]; then
  install_packages "${missing[@]}"
fi
problem=$(venv_problem)
if [ -n "$problem" ]; then
  if [ -x "$VENV/bin/python" ]; then say "$problem"; fi
  install_python
  give_back_to_owner
fi
if [ -n "$COMPILED" ]; then build_compiled_cores; fi
if [ -n "$SERVER_KEY" ]; then prepare_server "$SERVER_KEY"; fi
say "ready"
