# Sourced by the guest scripts of the VM's parts (guest-selftest.sh, guest-pytest.sh,
# guest-experiment.sh): where the checkout and the venv are, how steps are announced, and the
# checkout's src/ made importable by every Python the part starts. PYTHONPATH alone is not
# enough: a test that starts `python -m rmptwin.cli.main` with an environment of its own (as a
# user's shell would) drops it, so a .pth file in the venv names src/ too. The root file system
# is qemu's -snapshot, so the file is gone with the boot.
SRC=/mnt/rmptwin
VENV=/opt/rmptwin-venv
PY=$VENV/bin/python
# The checkout is read-only: no bytecode is written next to it. (PYTHONPYCACHEPREFIX would
# keep the checkout's bytecode in /run, but it also hides the venv's own compiled bytecode:
# the venv step took 65 s with it under TCG, 36 s without.)
export PYTHONPATH=$SRC/src PYTHONDONTWRITEBYTECODE=1 COLUMNS=160 HOME=/root
echo "$SRC/src" >"$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/rmptwin-checkout.pth"
step() { echo "RMPTWIN-VM-STEP $*"; }
up() { cut -d' ' -f1 /proc/uptime; }
