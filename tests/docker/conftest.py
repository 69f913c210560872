"""The Docker engine for the engine adapter's tests: started with the project's helper when it
is not running, and stopped again after them (only if they started it)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def docker_engine():
    from rmptwin.emulation import env

    if os.geteuid() != 0:
        pytest.skip("needs root (dockerd)")
    if env.docker_state() == "missing":
        pytest.skip("no Docker engine installed (dockerd not found)")
    started = env.docker_state() != "running"
    env.ensure_dockerd()
    try:
        yield
    finally:
        if started:
            env.stop_dockerd()


@pytest.fixture(scope="session")
def local_image(docker_engine) -> str:
    """The node image, as the emulation's tests get it (built once, then cached by its hash;
    nothing is pulled from a registry)."""
    from rmptwin.emulation.image import ensure_image

    return ensure_image()
