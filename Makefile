# rmptwin: `make run` and `make test` each set up a fresh Debian 12 machine first (as root);
# as any other user they check that it is set up and say what to run as root if it is not.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
EXPERIMENT ?= experiments/quickstart.yaml

.PHONY: provision compiled run test bench docs clean vm-run vm-results vm-image vm-box vm-boot-check test-vm

provision:
	@bash scripts/provision.sh

# The cores compiled by mypyc into build/compiled (scripts/build_compiled.py; 2 min on 2 CPUs
# at load 5, nothing when up to date): test and bench build them first, run does not (the
# interpreted cores run wherever they are not built or their build is stale).
compiled:
	@bash scripts/provision.sh --compiled

run: provision
	@bash scripts/run-default.sh $(EXPERIMENT)

# --durations: the 30 slowest tests close every run's output, so the suite's time can be
# spent where it is measured (CI has no other record of it).
test: compiled
	@$(PY) -m pytest --durations=30 $(PYTEST_ARGS)

# `make bench QUICK=1`: smaller sizes; BENCH_ARGS, e.g. "--only matching --write-reference".
bench: compiled
	@$(PY) -m rmptwin.bench $(if $(QUICK),--quick) $(BENCH_ARGS)

# The documentation site (MkDocs, Material theme) from docs/ into site/; the command-line,
# YAML-field and benchmark pages are generated from the code as it builds (scripts/docs_hooks.py).
docs: provision
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	@$(VENV)/bin/rmptwin net down 2>/dev/null || true
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache site build

# On a Vagrant host (see docs/vagrant.md): vagrant up, the emulated run in the VM, its results
# copied back here, the VM destroyed (RMPTWIN_VM_KEEP=1 keeps it). The VM's /vagrant is a
# one-way rsync copy of this tree.
vm-run:
	@bash scripts/vm/vagrant-run.sh $(EXPERIMENT)

vm-results:
	@set -o pipefail; vagrant ssh --no-tty -c 'sudo tar -C /vagrant -c results' | tar -x
	@echo "results/ copied from the VM: every report path the VM printed opens here"

# Without Vagrant (see docs/vm.md): a Debian 12 disk image with Debian's cloud kernel in
# build/vm/ (as root; rebuilt only when scripts/vm/ changed), then one boot of it under qemu
# that checks a netem qdisc and an OVS bridge on the kernel datapath, and powers off.
vm-image:
	@bash scripts/vm/build-image.sh

# A Vagrant box (libvirt) made from that image, provisioned, with the node image saved in, and
# added to Vagrant as rmptwin/bookworm; `make vm-run` then boots it with no network past the host.
vm-box: vm-image
	@bash scripts/vm/build-box.sh

vm-boot-check: vm-image
	@bash scripts/vm/boot-check.sh

# The netem / kernel OVS datapath path in that image (see docs/vm.md), in one boot: the link
# self-test, the controller and Mininet tests, and the quickstart emulated, brought back into
# results/ and judged against the simulator. The checkout goes in on a read-only second disk,
# results come back on the serial console and a raw third disk. CI runs it after `make test`.
test-vm: vm-image
	@bash scripts/vm/test-vm.sh
