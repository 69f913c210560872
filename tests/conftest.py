"""Shared fixtures. Tests that need root-only parts (OVS, Mininet, dockerd, etcd) start and
stop them themselves; they are skipped with a reason only where the machine cannot run them."""

from __future__ import annotations

import os
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
    if not had_ovs:
        env.stop_ovs()
    if not had_docker:
        env.stop_dockerd()


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (Open vSwitch, Mininet, dockerd)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
