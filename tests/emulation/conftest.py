"""A real emulated network per node mode (namespaces, Docker containers), shared by the
module's tests and always torn down."""

from __future__ import annotations

import os

import pytest

# tests/emulation is on sys.path (rootdir conftest)
from emukit import DOCKER_CPUS, DOCKER_MEMORY_MB, IGMP, METER_PPS, NET4


@pytest.fixture(scope="session")
def node_image():
    """The node image (built once, then cached by its definition's hash)."""
    from rmptwin.emulation import env
    from rmptwin.emulation.image import ensure_image

    env.ensure_dockerd()
    return ensure_image()


@pytest.fixture(scope="module", params=["ns", pytest.param("docker", marks=pytest.mark.docker)])
def net(request, tmp_path_factory):
    from rmptwin.emulation.emulated_network import EmulatedNetwork

    if os.geteuid() != 0:
        pytest.skip("needs root")
    if request.param == "docker":
        request.getfixturevalue("node_image")
    state = tmp_path_factory.mktemp(f"net-{request.param}")
    limits = {"cpus": DOCKER_CPUS, "memory_mb": DOCKER_MEMORY_MB} if request.param == "docker" else {}
    n = EmulatedNetwork(NET4, nodes=request.param, impair="auto", seed=7, state_dir=state,
                        igmp_version=IGMP, meter_pps=METER_PPS, **limits)
    try:
        n.start()
        yield n
    finally:
        n.stop()
