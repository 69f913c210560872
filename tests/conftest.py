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


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (Open vSwitch, Mininet, dockerd)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
