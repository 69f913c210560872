"""The ports a run gives its own processes (etcd members, the controller): distinct, free, and
outside the kernel's ephemeral range, so the first members' connections to their peers cannot
take a later member's port as their source port before it binds it (a CI run's "bind: address
already in use")."""

from __future__ import annotations

import socket

import pytest

from rmptwin.errors import UserError
from rmptwin.node import local_ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    top = local_ports.ephemeral_start()
    for _ in range(20):
        ports = local_ports.free_local_ports(6, "etcd")
        assert len(set(ports)) == 6
        assert all(p < top for p in ports), (ports, top)
        for p in ports:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))   # still free


def test_a_taken_port_is_not_handed_out_and_none_left_is_one_error(monkeypatch):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    taken = held.getsockname()[1]
    monkeypatch.setattr(local_ports, "EPHEMERAL_FLOOR", taken)
    monkeypatch.setattr(local_ports, "ephemeral_start", lambda: taken + 1)   # the range holds one port
    try:
        with pytest.raises(UserError, match=f"etcd: no 1 free 127.0.0.1 ports in {taken}-{taken}"):
            local_ports.free_local_ports(1, "etcd")
    finally:
        held.close()
