"""Shared fixtures. Tests that need root-only parts (OVS, Mininet, dockerd, etcd) start and
stop them themselves; they are skipped with a reason only where the machine cannot run them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
TOPOLOGIES = REPO / "topologies"


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session", autouse=True)
def daemons_started_by_the_tests_are_stopped():
    """Tests start Open vSwitch and the Docker engine when they need them (the CLI leaves
    them running, like system daemons); a test session stops again what it started."""
    if os.geteuid() != 0:
        yield
        return
    from rmptwin.emulation import env

    had_ovs, had_docker = env.ovs_running(), env.docker_state() == "running"
    yield
    stop_ovs = not had_ovs and env.ovs_running()
    stop_docker = not had_docker and env.docker_state() == "running"
    if not (stop_ovs or stop_docker):
        return
    # Before stopping what it started: networks of dead owners (tests that crashed) go, but
    # a live network of another process keeps the daemons it runs on (stopping them would kill it).
    from rmptwin.emulation.cleanup import cleanup_all

    _, kept = cleanup_all()
    if kept:
        print("\n".join(["left Open vSwitch and Docker running for:", *(n.kept_line() for n in kept)]),
              file=sys.stderr)
        return
    if stop_ovs:
        env.stop_ovs()
    if stop_docker:
        env.stop_dockerd()


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (Open vSwitch, Mininet, dockerd)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
