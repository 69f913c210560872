"""An etcd cluster's member ports: distinct, free, and outside the kernel's ephemeral range, so
the first members' connections to their peers cannot take a later member's port as their
source port before it binds it (a CI run's "bind: address already in use")."""

from __future__ import annotations

import socket

import pytest

from rmptwin.errors import UserError
from rmptwin.node import etcd_cluster


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    top = etcd_cluster._ephemeral_start()
    for _ in range(20):
        ports = etcd_cluster._free_ports(6)
        assert len(set(ports)) == 6
        assert all(p < top for p in ports), (ports, top)
        for p in ports:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))   # still free


def test_a_taken_port_is_not_handed_out_and_none_left_is_one_error(monkeypatch):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    taken = held.getsockname()[1]
    monkeypatch.setattr(etcd_cluster, "EPHEMERAL_FLOOR", taken)
    monkeypatch.setattr(etcd_cluster, "_ephemeral_start", lambda: taken + 1)   # the range holds one port
    try:
        with pytest.raises(UserError, match=f"no 1 free 127.0.0.1 ports in {taken}-{taken}"):
            etcd_cluster._free_ports(1)
    finally:
        held.close()
