"""A real emulated network per node mode (namespaces, Docker containers), shared by the
module's tests and always torn down."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NET4 = HERE / "net4.yaml"
# IGMP version per host: v2 and v3 hosts in the same network, so joins and leaves of
# both versions are exercised by the same tests.
IGMP = {"h1": 3, "h6": 2, "h2": 2, "h3": 3, "h4": 2, "h5": 3}
METER_PPS = 1000


@pytest.fixture(scope="session")
def node_image():
    """The node image (built once, then cached by its definition's hash)."""
    from rmptwin.emulation import env
    from rmptwin.emulation.image import ensure_image

    env.ensure_dockerd()
    return ensure_image()


@pytest.fixture(scope="module", params=["ns", "docker"])
def net(request, tmp_path_factory):
    from rmptwin.emulation.network import EmulatedNetwork

    if os.geteuid() != 0:
        pytest.skip("needs root")
    if request.param == "docker":
        request.getfixturevalue("node_image")
    state = tmp_path_factory.mktemp(f"net-{request.param}")
    n = EmulatedNetwork(NET4, nodes=request.param, impair="auto", seed=7, state_dir=state,
                        igmp_version=IGMP, meter_pps=METER_PPS)
    try:
        n.start()
        yield n
    finally:
        n.stop()
