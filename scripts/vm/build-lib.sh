# Sourced by build-image.sh and build-box.sh: what both builds do around their own steps. The
# caller defines say() and die() (its one-line messages) and sets OUT and LOG first.

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# need_free_gb GB WHAT: at least GB free where the build writes, or one line saying so.
need_free_gb() {
  local free_kb
  mkdir -p "$OUT"
  free_kb=$(df --output=avail -k "$OUT" | tail -n1 | tr -d ' ')
  if [ "$free_kb" -lt $(($1 * 1024 * 1024)) ]; then
    die "needs $1 GB free in $OUT to build $2, has $((free_kb / 1024 / 1024)) GB: free some disk" 2
  fi
}

# install_host_packages PACKAGE...: the missing ones from Debian, their output to the log.
install_host_packages() {
  local missing p
  mapfile -t missing < <(for p in "$@"; do installed "$p" || echo "$p"; done)
  [ ${#missing[@]} -gt 0 ] || return 0
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"; } \
       >>"$LOG" 2>&1; then
    die "could not install ${missing[*]} (see $LOG): install them with apt-get and run this again"
  fi
}

# unmount_below DIR: every mount point under DIR, deepest first, lazily where one is busy;
# for clean-up on exit, so it never fails.
unmount_below() {
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$(realpath "$1")/" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

elapsed() { echo $(( $(date +%s) - $1 )); }
declare -A TIMES=()
ORDER=()
# timed NAME COMMAND...: runs it with its output in the log, and records its seconds.
timed() {
  local t0
  STEP=$1; shift
  say "$STEP ..."
  t0=$(date +%s)
  "$@" >>"$LOG" 2>&1
  TIMES[$STEP]=$(elapsed "$t0")
  ORDER+=("$STEP")
  say "$STEP: ${TIMES[$STEP]} s"
}

# print_times PREFIX WIDTH T0: each step's seconds, then the whole build's.
print_times() {
  local s
  for s in "${ORDER[@]}"; do printf "%s   %-${2}s %5s s\n" "$1" "$s" "${TIMES[$s]}"; done
  printf "%s   %-${2}s %5s s\n" "$1" total "$(elapsed "$3")"
}
