#!/usr/bin/env bash
# Re-resolve requirements.lock after a change to pyproject.toml's dependencies.
#
# The versions come from a clean throwaway venv (no system site packages, so nothing of
# Debian's leaks into the resolution): `pip install .[dev]`, then `pip freeze --all`.
# The hashes (of every file the index has for each pinned version, so the lock also
# installs on other architectures) come from `uv pip compile --generate-hashes`, run with
# exactly those versions as constraints; its "# via" lines name who needs each package.
# Needs network access to the package index; takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
say() { printf '[update-lock] %s\n' "$*"; }
quiet_pip() { "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }; }

say "resolving pyproject.toml's dependencies (with the dev extra) in a clean venv"
mkdir "$WORK/project"
cp -r pyproject.toml README.md src "$WORK/project/"
rm -rf "$WORK"/project/src/*.egg-info
/usr/bin/python3 -m venv "$WORK/venv"
quiet_pip "$WORK/venv/bin/pip" install -q --upgrade pip
quiet_pip "$WORK/venv/bin/pip" install -q "$WORK/project[dev]"
"$WORK/venv/bin/pip" check
"$WORK/venv/bin/pip" freeze --all | grep -v '^rmptwin @' > "$WORK/versions.txt"

say "collecting the hashes of those exact versions"
quiet_pip "$WORK/venv/bin/pip" install -q uv
printf 'pip\nsetuptools\n' > "$WORK/venv-tools.in"   # in every venv; setuptools' .pth runs at each start
(cd "$WORK/project" && SSL_CERT_FILE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt} \
  "$WORK/venv/bin/uv" pip compile --quiet pyproject.toml "$WORK/venv-tools.in" --extra dev \
    --constraint "$WORK/versions.txt" --generate-hashes --python-version 3.11 \
    --no-header --output-file "$WORK/compiled.txt")

{
  cat <<'HEADER'
# Every Python package the venv imports, except Mininet (Debian's python3-mininet), pinned
# with the hash of every file the index has for that version. scripts/provision.sh installs
# it into .venv with `pip install --require-hashes --no-deps --force-reinstall`, so the venv
# imports these versions and not Debian's site packages, then checks the result with
# src/rmptwin/lockcheck.py. Do not edit by hand: change pyproject.toml, then run
# scripts/update-lock.sh (a clean venv's `pip freeze`, hashes from `uv pip compile`).
HEADER
  # The constraints file and the throwaway paths are this script's plumbing, not "via"s.
  grep -v '^    #   -c ' "$WORK/compiled.txt" | sed "s|-r $WORK/venv-tools.in|the venv itself|"
} > requirements.lock

say "requirements.lock: $(grep -c '==' requirements.lock) packages; review with git diff, then run scripts/provision.sh"
