"""The socket buffers of a node's UDP sockets, in a module of its own so that the benchmark's
bare UDP loops (``bench.udp_loops``), which import as little as they can, set the same ones."""

from __future__ import annotations

import socket

SOCKET_BUFFER = 4 << 20   # a burst of a ticker or a token's batch must not overflow a socket


def set_buffers(s: socket.socket) -> None:
    """Receive and send buffers of ``SOCKET_BUFFER`` bytes, where the kernel allows them."""
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        except OSError:
            pass
