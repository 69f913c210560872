# rmptwin: `make run` and `make test` each set up a fresh Debian 12 machine (as root) first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
EXPERIMENT ?= experiments/quickstart.yaml

.PHONY: provision run test bench clean

provision:
	@bash scripts/provision.sh

run: provision
	@bash scripts/run-default.sh $(EXPERIMENT)

test: provision
	@$(PY) -m pytest $(PYTEST_ARGS)

bench: provision
	@$(PY) -m rmptwin.bench

clean:
	@$(VENV)/bin/rmptwin net down 2>/dev/null || true
	rm -rf $(VENV) .pytest_cache .hypothesis
